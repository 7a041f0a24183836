"""Rasterization forward against the per-pixel NumPy compositor, and backward against
float64 central finite differences, on fresh random splats. The intersection list is
built here in NumPy, so these tests do not depend on the GPU sort."""

import numpy as np
import pytest

from spirula.engine.splat.camera_table import View
from spirula.engine.splat.render import SCREEN_GRAD_STRIDE, split_screen_grads
from tests.splat import reference as ref
from tests.splat.scenes import random_camera, random_scene, random_screen_splats


def _splats(rng, n, width, height, scale=(-2.5, -1.2)):
    f, _ = random_scene(rng, n, degree=1, scale=scale)
    w2c, fx, fy, cx, cy = random_camera(rng, width, height)
    r = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], w2c, fx, fy, cx, cy,
                    width, height, 1)
    vis = r["radii"][:, 0] > 0
    # float32 values as the GPU will see them
    for key in ("means2d", "conics", "opacities", "rgb", "depths"):
        r[key] = r[key].astype(np.float32).astype(np.float64)
    return r, vis


def _intersections(r, vis, view):
    tiles, ids = [], []
    for g in np.argsort(r["depths"], kind="stable"):
        if not vis[g]:
            continue
        x0, x1, y0, y1 = r["rects"][g]
        for ty in range(y0, y1):
            for tx in range(x0, x1):
                tiles.append(ty * view.tiles_x + tx)
                ids.append(g)
    tiles, ids = np.array(tiles, np.uint32), np.array(ids, np.uint32)
    order = np.argsort(tiles, kind="stable")
    tiles, ids = tiles[order], ids[order]
    ntiles = view.tiles_x * view.tiles_y
    ranges = np.zeros((ntiles, 2), np.uint32)
    starts = np.searchsorted(tiles, np.arange(ntiles), "left")
    ends = np.searchsorted(tiles, np.arange(ntiles), "right")
    ranges[:, 0], ranges[:, 1] = starts, ends
    ranges[starts == ends] = 0
    return ids, ranges


def _run(gpu, r, vis, view, background, g_image=None, splits=1, py=1):
    """Forward (and with ``g_image`` the backward, its tiles split over ``splits``
    workgroups from the forward's checkpoints, ``py`` pixels per thread) over a NumPy-built
    intersection list."""
    import slangpy as spy

    n = len(r["depths"])
    npix = view.width * view.height
    ids, ranges = _intersections(r, vis, view)
    co = np.concatenate([r["conics"], r["opacities"][:, None]], 1).astype(np.float32)
    common = dict(ranges=gpu.upload(ranges), isect_ids=gpu.upload(ids), means2d=gpu.upload(r["means2d"].astype(np.float32)),
                  conic_opac=gpu.upload(co), rgb=gpu.upload(r["rgb"].astype(np.float32)),
                  width=view.width, height=view.height, tiles_x=view.tiles_x, background=spy.float3(*background),
                  row0=0)
    image, final_T, last = gpu.buffer(12 * npix), gpu.buffer(4 * npix), gpu.buffer(4 * npix)
    checkpoints = gpu.buffer(16 * (len(ids) // 256 + 1) * 256)
    gpu.kernel("raster/raster", "rasterize_forward").dispatch(
        thread_count=[view.tiles_x * 16, view.tiles_y * 16, 1], image=image, final_T=final_T, last_index=last,
        checkpoints=checkpoints, write_checkpoints=int(splits > 1), **common)
    out = {"image": gpu.read(image, np.float32, shape=(view.height, view.width, 3)),
           "last_index": gpu.read(last, np.uint32, shape=(view.height, view.width))}
    ys, xs = np.mgrid[0:view.height, 0:view.width]
    tile = (ys // 16) * view.tiles_x + xs // 16
    out["range_len"] = (ranges[:, 1] - ranges[:, 0])[tile]
    out["tile"] = tile
    if g_image is not None:
        g_screen = gpu.zeros(4 * SCREEN_GRAD_STRIDE * n)
        gpu.kernel("raster/raster", "rasterize_backward", PY=py).dispatch(
            thread_count=[view.tiles_x * 16, view.tiles_y * (16 // py) * splits, 1], final_T=final_T, last_index=last,
            g_image=gpu.upload(g_image.astype(np.float32)), checkpoints=checkpoints, image=image, splits=splits,
            g_screen=g_screen, **common)
        out.update(split_screen_grads(gpu.read(g_screen, np.float32, shape=(n, SCREEN_GRAD_STRIDE))))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_rasterize_forward_matches_compositor(gpu, seed):
    rng = np.random.default_rng(200 + seed)
    view = View(0, 83, 57)
    r, vis = _splats(rng, 400, view.width, view.height)
    bg = tuple(rng.uniform(0, 1, 3))
    out = _run(gpu, r, vis, view, bg)
    want = ref.composite(r["means2d"], r["conics"], r["opacities"], r["rgb"], r["depths"], vis, r["rects"],
                         view.width, view.height, bg)
    err = np.abs(out["image"] - want)
    # float32 accumulation over ~100 splats: 1e-4 per pixel, a few pixels may flip a 1/255 or T cut-off
    assert np.mean(err < 1e-4) > 0.995, f"max err {err.max()}"
    assert np.sqrt(np.mean(err ** 2)) < 2e-3
    assert want.std() > 0.05, "scene renders nearly flat"


@pytest.mark.parametrize("kind,py", [("translucent", 1), ("saturating", 1), ("deep", 1), ("deep-split", 1),
                                     ("saturating", 2), ("deep-split", 2), ("translucent", 4), ("deep-split", 4)])
def test_rasterize_backward_matches_finite_differences(gpu, kind, py):
    """``saturating``: near-opaque splats stacked deep, so pixels stop (T < 1e-4) long before
    the end of their tile's list and the backward starts from the tile's last contributor.
    ``deep``: faint splats, several hundred per tile, so a tile's replay spans batches of
    256; ``deep-split``: the same with each tile's batches shared by 3 workgroups, each
    starting from the forward's checkpoint at the end of its share. ``py``: pixels per
    thread of the backward."""
    rng = np.random.default_rng(7)
    opaque = kind == "saturating"
    deep = kind.startswith("deep")
    view = View(0, 32, 32) if deep else View(0, 40, 36)
    n, scale = {"translucent": (60, (-2.5, -1.2)), "saturating": (150, (-1.5, -0.8)), "deep": (900, (-2.2, -1.4)),
                "deep-split": (900, (-2.2, -1.4))}[kind]
    r, vis = _splats(rng, n, view.width, view.height, scale)
    if opaque:
        r["opacities"] = rng.uniform(0.9, 0.98, len(r["opacities"]))  # below the 0.999 clamp
    elif deep:
        r["opacities"] = rng.uniform(0.01, 0.06, len(r["opacities"]))  # T stays above 1e-4 through hundreds
    else:
        r["opacities"] = np.clip(r["opacities"], 0.05, 0.9)  # keep away from the 0.999 clamp
    w = rng.normal(0, 1, (view.height, view.width, 3))
    out = _run(gpu, r, vis, view, (0.2, 0.3, 0.4), g_image=w, splits=3 if kind == "deep-split" else 1, py=py)
    if deep:
        replayed = out["last_index"].max()
        print(f"deep scene: up to {out['range_len'].max()} splats per tile, a pixel composites up to {replayed}")
        assert replayed > 300, "the replay must span more than one batch of 256"
    if opaque:  # pixels stop before the end of their tile's list, whole tiles too
        stopped = out["last_index"] < out["range_len"]
        tile_max = np.zeros(view.tiles_x * view.tiles_y, np.int64)
        np.maximum.at(tile_max, out["tile"].ravel(), out["last_index"].ravel().astype(np.int64))
        tile_len = np.zeros_like(tile_max)
        tile_len[out["tile"].ravel()] = out["range_len"].ravel()
        print(f"saturating scene: {stopped.mean():.0%} of pixels stop early, "
              f"tiles replayed from {tile_max.sum()} of {tile_len.sum()} entries")
        assert stopped.mean() > 0.5 and tile_max.sum() < tile_len.sum(), "scene must saturate early"

    def loss(rr):
        img = ref.composite(rr["means2d"], rr["conics"], rr["opacities"], rr["rgb"], rr["depths"], vis,
                            r["rects"], view.width, view.height, (0.2, 0.3, 0.4))
        return float(np.sum(img * w))

    checks = {"means2d": "g_means2d", "conics": "g_conic", "opacities": "g_opacity", "rgb": "g_rgb"}
    eps = {"means2d": 1e-4, "conics": 1e-6, "opacities": 1e-6, "rgb": 1e-6}
    gs = [g for g in np.flatnonzero(vis)]
    picked = rng.choice(gs, size=min(12, len(gs)), replace=False)
    for key, gname in checks.items():
        num, ana = [], []
        # saturating: every splat's opacity, so a contributor the replay skipped cannot hide
        for g in (gs if opaque and key == "opacities" else picked):
            arr = r[key]
            for c in range(arr.shape[1] if arr.ndim > 1 else 1):
                idx = (g, c) if arr.ndim > 1 else (g,)
                e = eps[key]
                old = arr[idx]
                arr[idx] = old + e
                lp = loss(r)
                arr[idx] = old - e
                lm = loss(r)
                arr[idx] = old
                num.append((lp - lm) / (2 * e))
                ana.append(out[gname][idx])
        num, ana = np.array(num), np.array(ana)
        scale = np.abs(num).max() + 1e-12
        # tolerance: 2% of the largest gradient of the group (float32 GPU vs float64 FD)
        np.testing.assert_allclose(ana, num, atol=0.02 * scale, rtol=0.02, err_msg=key)
        assert scale > 1e-6, f"{key}: gradients vanish, test is vacuous"




@pytest.mark.parametrize("m,max_groups", [(5_000, 3), (16_776_960 + 3_000, None)],
                         ids=["grid-forced-to-3-columns", "past-65535-workgroups"])
def test_tile_ranges_over_a_2d_grid(gpu, m, max_groups, monkeypatch, rng):
    """tile_ranges, one thread per intersection, against NumPy's searchsorted: over a grid
    forced to rows of 3 workgroups, and over a real list of more than 65,535 x 256
    intersections (the 1D limit of Intel and lavapipe)."""
    from spirula.engine import device
    from spirula.engine.device import dispatch_grid

    if max_groups:
        monkeypatch.setattr(device, "MAX_DISPATCH_GROUPS", max_groups)
    ntiles = 4_099
    tiles = np.sort(rng.integers(0, ntiles, m, dtype=np.uint32))
    tiles[-rng.integers(1, 300):] = ntiles  # the binning's filler past the last tile: ignored
    threads, groups_x = dispatch_grid(m, 256)
    assert threads[1] > 1, "the grid must be 2D"
    ranges = gpu.zeros(8 * (ntiles + 1))  # room for a stray filler range, which must stay 0
    gpu.kernel("raster/binning", "tile_ranges").dispatch(
        thread_count=threads, isect_tiles=gpu.upload(tiles), ranges=ranges, count=gpu.zeros(4), m=m,
        count_from_buf=0, groups_x=groups_x, tiles=ntiles)
    got = gpu.read(ranges, np.uint32, shape=(ntiles + 1, 2))
    assert (got[ntiles] == 0).all(), "a range was written for the filler"
    got = got[:ntiles]
    starts = np.searchsorted(tiles, np.arange(ntiles), "left")
    ends = np.searchsorted(tiles, np.arange(ntiles), "right")
    want = np.stack([np.where(starts == ends, 0, starts), np.where(starts == ends, 0, ends)], 1)
    np.testing.assert_array_equal(got, want)


def test_clear_screen_grads_zeroes_exactly_n_rows_over_a_2d_grid(gpu, monkeypatch, rng):
    from spirula.engine import device
    from spirula.engine.device import dispatch_grid

    monkeypatch.setattr(device, "MAX_DISPATCH_GROUPS", 3)
    n = int(rng.integers(200, 400))
    before = rng.uniform(1, 2, SCREEN_GRAD_STRIDE * n + 77).astype(np.float32)  # a slot longer than n rows
    buf = gpu.upload(before)
    threads, groups_x = dispatch_grid(SCREEN_GRAD_STRIDE * n, 256)
    assert threads[1] > 1, "the grid must be 2D"
    gpu.kernel("raster/raster", "clear_screen_grads").dispatch(thread_count=threads, g_screen=buf, n=n, groups_x=groups_x)
    after = gpu.read(buf, np.float32, before.size)
    assert (after[:SCREEN_GRAD_STRIDE * n] == 0).all()
    np.testing.assert_array_equal(after[SCREEN_GRAD_STRIDE * n:], before[SCREEN_GRAD_STRIDE * n:])


def test_strip_masks_keep_every_strip_a_pixel_composites_in(gpu, rng):
    """raster.slang's strip_mask (the 2-row strips of a tile a subgroup may skip a splat
    for) on screen-space splats of every shape, needles included, each in a tile near its
    mean: every strip one of whose pixel centres passes the alpha >= 1/255 test (float64 or
    float32, as the rasterizer evaluates it) is kept; well-conditioned splats keep little
    more than the strips they reach."""
    n = 3000
    means, co, radii = random_screen_splats(rng, n, 1008, 400)
    # a tile around a point within the splat's rectangle, so most tiles meet the ellipse's edge
    point = means + rng.uniform(-1, 1, (n, 2)) * radii
    origins = (np.floor(point / 16) * 16).astype(np.float32)
    masks = gpu.buffer(4 * n)
    gpu.kernel("raster/raster", "strip_masks").dispatch(
        thread_count=[n, 1, 1], means2d=gpu.upload(means), conic_opac=gpu.upload(co), origins=gpu.upload(origins),
        masks=masks, n=n)
    got = gpu.read(masks, np.uint32, n)
    ys, xs = np.mgrid[0:16, 0:16] + 0.5
    need = np.zeros((n, 8), bool)
    for dt in (np.float64, np.float32):
        dx = means[:, 0, None, None].astype(dt) - (origins[:, 0, None, None] + xs).astype(dt)
        dy = means[:, 1, None, None].astype(dt) - (origins[:, 1, None, None] + ys).astype(dt)
        a, b, c, o = (co[:, k, None, None].astype(dt) for k in range(4))
        power = dt(-0.5) * (a * dx * dx + c * dy * dy) - b * dx * dy
        hit = (power <= 0) & (np.minimum(dt(0.999), o * np.exp(power)) >= dt(1) / dt(255))
        need |= hit.reshape(n, 8, 2, 16).any(axis=(2, 3))
    kept = (got[:, None] >> np.arange(8)) & 1 == 1
    dropped = need & ~kept
    assert not dropped.any(), f"{dropped.any(1).sum()} splats lose a strip, e.g. {np.flatnonzero(dropped.any(1))[:5]}"
    # the draw mixes splats that reach some strips of their tile but not all
    assert 0.2 * n < (need.any(1) & ~need.all(1)).sum()
    a, b, c = (co[:, k].astype(np.float32) for k in range(3))
    conditioned = (a * c - b * b) * np.float32(2000) > a * c
    extra = (kept & ~need)[conditioned].sum()
    assert extra <= 0.05 * need[conditioned].sum() + 10, f"{extra} strips kept that no pixel reaches"
    # an ill-conditioned conic keeps its whole tile
    assert (got[~conditioned] == 0xFF).all()
