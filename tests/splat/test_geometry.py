"""The geometry phase's kernels (spirula/engine/splat/geometry_phase.py) against NumPy float64 references
and central finite differences, on fresh random inputs: the surfels the projection writes and
their backward, the composited geometry map and the rasterizer's backward through it, the
depth-normal consistency loss and its gradient."""

import numpy as np
import pytest
import slangpy as spy

from spirula.engine.splat.camera_table import View, camera_row
from spirula.engine.splat.geometry_phase import DepthNormalLoss
from spirula.engine.splat.param_layout import row_stride
from spirula.engine.splat.render import SCREEN_GRAD_STRIDE, Rasterizer, pack_screen_grads, split_screen_grads
from spirula.engine.splat.trainer import pack_rgba8
from tests.splat import reference as ref
from tests.splat.scenes import random_camera, random_scene
from tests.splat.test_raster import _intersections, _splats


def surfels(means, log_scales, quats, w2c):
    """NumPy surfel of each Gaussian: camera-space unit normal of its shortest axis turned
    towards the camera, and d = n . p. Returns [N, 4] (n, d)."""
    R, t = w2c[:3, :3], w2c[:3, 3]
    p = means @ R.T + t
    Rq = ref.quat_to_rotmat(quats)
    k = np.argmin(log_scales, axis=1)
    n = np.einsum("ij,nj->ni", R, Rq[np.arange(len(k)), :, k])
    n = np.where((np.sum(n * p, 1) > 0)[:, None], -n, n)
    return np.concatenate([n, np.sum(n * p, 1, keepdims=True)], 1)


def test_geometry_render_matches_numpy_compositor(gpu, rng):
    """The whole geometry render (projection with GEOMETRY, sort, binning, forward) against the
    NumPy projection, surfels and per-pixel compositor of the same Gaussians; and the colour
    image is the one of the render without geometry."""
    width, height = 72, 56
    f, rows = random_scene(rng, 300, degree=1, max_degree=3, spread=0.6, scale=(-2.8, -1.6))
    w2c, fx, fy, cx, cy = random_camera(rng, width, height, dist=3.0)
    r = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], w2c, fx, fy, cx, cy,
                    width, height, 1)
    vis = r["radii"][:, 0] > 0
    geo = surfels(f["means"], f["log_scales"], f["quats"], w2c)
    assert np.allclose(np.linalg.norm(geo[:, :3], axis=1), 1) and np.all(geo[:, 3] <= 0)
    want = ref.composite(r["means2d"], r["conics"], r["opacities"], geo, r["depths"], vis, r["rects"],
                         width, height, (0, 0, 0, 0))
    raster = Rasterizer(gpu, 3)
    cams = gpu.upload(camera_row(w2c, fx, fy, cx, cy, width, height)[None])
    params, view = gpu.upload(rows), View(0, width, height)
    plain = raster.render(params, len(rows), cams, view, 1)
    raster.prepare(params, len(rows), cams, view, 1, geometry=True)
    enc = gpu.encoder()
    raster.record_forward(enc)
    gpu.submit(enc)
    got = gpu.read(raster.geom_image, np.float32, shape=(height, width, 4))
    got_geom = gpu.read(raster.buffer("geom"), np.float32, shape=(len(rows), 4))
    np.testing.assert_allclose(got_geom[vis], geo[vis], atol=2e-5 * max(1.0, np.abs(geo[:, 3]).max()))
    np.testing.assert_array_equal(gpu.read(raster.image, np.float32, shape=(height, width, 3)), plain)
    # the float32 projection moves the 1/255 and T cut-offs of a few pixels: the colour image
    # of the same render sets the bar (at least 95% of its pixels' agreement, 2x its RMS)
    colour = ref.composite(r["means2d"], r["conics"], r["opacities"], r["rgb"], r["depths"], vis, r["rects"],
                           width, height)
    c_err = np.abs(plain - colour) / np.abs(colour).max()
    err = np.abs(got - want) / np.abs(want).max()
    print(f"within 1e-4: colour {np.mean(c_err < 1e-4):.4f}, geometry {np.mean(err < 1e-4):.4f}; "
          f"rms {np.sqrt(np.mean(c_err ** 2)):.2e}, {np.sqrt(np.mean(err ** 2)):.2e}")
    assert np.mean(err < 1e-4) > min(0.95 * np.mean(c_err < 1e-4), 0.97)
    assert np.sqrt(np.mean(err ** 2)) < max(2 * np.sqrt(np.mean(c_err ** 2)), 1e-4)
    covered = np.linalg.norm(want[..., :3], axis=-1) > 0.5
    assert covered.mean() > 0.2 and want[..., :3][covered].std() > 0.1, "the normals must vary over the image"


@pytest.mark.parametrize("kind", ["translucent", "deep-split"])
def test_geometry_raster_backward_matches_finite_differences(gpu, kind, rng):
    """L = <W, geom_image> (colour gradient 0): the backward's g_geom and, through the alphas,
    the screen-space gradients against float64 central differences of the NumPy compositor.
    deep-split: faint splats several hundred deep, each tile's replay shared by 3 workgroups
    starting from the forward's checkpoints (of the geometry too), 2 pixels per thread."""
    deep = kind == "deep-split"
    view = View(0, 32, 32) if deep else View(0, 40, 36)
    n, scale = (900, (-2.2, -1.4)) if deep else (60, (-2.5, -1.2))
    r, vis = _splats(rng, n, view.width, view.height, scale)
    r["opacities"] = rng.uniform(0.01, 0.06, n) if deep else np.clip(r["opacities"], 0.05, 0.9)
    r["geom"] = rng.normal(0, 1, (n, 4)).astype(np.float32).astype(np.float64)
    wg = rng.normal(0, 1, (view.height, view.width, 4))
    splits, py = (3, 2) if deep else (1, 1)
    ids, ranges = _intersections(r, vis, view)
    npix = view.width * view.height
    co = np.concatenate([r["conics"], r["opacities"][:, None]], 1).astype(np.float32)
    common = dict(ranges=gpu.upload(ranges), isect_ids=gpu.upload(ids), means2d=gpu.upload(r["means2d"].astype(np.float32)),
                  conic_opac=gpu.upload(co), rgb=gpu.upload(r["rgb"].astype(np.float32)),
                  geom=gpu.upload(r["geom"].astype(np.float32)), width=view.width, height=view.height,
                  tiles_x=view.tiles_x, background=spy.float3(0.2, 0.3, 0.4), row0=0)
    image, final_T, last, geom_image = gpu.buffer(12 * npix), gpu.buffer(4 * npix), gpu.buffer(4 * npix), gpu.buffer(16 * npix)
    slots = (len(ids) // 256 + 1) * 256
    ck, gck = gpu.buffer(16 * slots), gpu.buffer(16 * slots)
    gpu.kernel("raster/raster", "rasterize_forward", GEOMETRY=1).dispatch(
        thread_count=[view.tiles_x * 16, view.tiles_y * 16, 1], image=image, final_T=final_T, last_index=last,
        checkpoints=ck, write_checkpoints=int(splits > 1), geom_image=geom_image, geom_checkpoints=gck, **common)
    g_screen, g_geom = gpu.zeros(4 * SCREEN_GRAD_STRIDE * n), gpu.zeros(16 * n)
    gpu.kernel("raster/raster", "rasterize_backward", PY=py, GEOMETRY=1).dispatch(
        thread_count=[view.tiles_x * 16, view.tiles_y * (16 // py) * splits, 1], final_T=final_T, last_index=last,
        g_image=gpu.zeros(12 * npix), checkpoints=ck, image=image, splits=splits, g_screen=g_screen,
        geom_image=geom_image, geom_checkpoints=gck, g_geom_image=gpu.upload(wg.astype(np.float32)), g_geom=g_geom,
        **common)
    out = split_screen_grads(gpu.read(g_screen, np.float32, shape=(n, SCREEN_GRAD_STRIDE)))
    out["g_geom"] = gpu.read(g_geom, np.float32, shape=(n, 4))
    if deep:
        assert gpu.read(last, np.uint32).max() > 300, "the replay must span more than one batch of 256"

    def composite(rr):
        return ref.composite(rr["means2d"], rr["conics"], rr["opacities"], rr["geom"], rr["depths"], vis,
                             r["rects"], view.width, view.height, (0, 0, 0, 0))

    np.testing.assert_allclose(gpu.read(geom_image, np.float32, shape=(view.height, view.width, 4)), composite(r),
                               atol=2e-4)
    loss = lambda rr: float(np.sum(composite(rr) * wg))
    eps = {"geom": 1e-6, "means2d": 1e-4, "conics": 1e-6, "opacities": 1e-6}
    names = {"geom": "g_geom", "means2d": "g_means2d", "conics": "g_conic", "opacities": "g_opacity"}
    picked = rng.choice(np.flatnonzero(vis), size=min(10, int(vis.sum())), replace=False)
    l0 = loss(r)
    for key, gname in names.items():
        num, ana, kinks = [], [], 0
        arr = r[key]
        for g in picked:
            for c in range(arr.shape[1] if arr.ndim > 1 else 1):
                idx = (g, c) if arr.ndim > 1 else (g,)
                old = arr[idx]
                arr[idx] = old + eps[key]
                lp = loss(r)
                arr[idx] = old - eps[key]
                lm = loss(r)
                arr[idx] = old
                # a step that moves a pixel across an alpha or 3-sigma cutoff makes the loss
                # jump: one-sided differences disagree there and no derivative exists to check
                fwd, bwd = (lp - l0) / eps[key], (l0 - lm) / eps[key]
                if abs(fwd - bwd) > 0.1 * max(abs(fwd), abs(bwd), 1e-3):
                    kinks += 1
                    continue
                num.append((lp - lm) / (2 * eps[key]))
                ana.append(out[gname][idx])
        num, ana = np.array(num), np.array(ana)
        assert kinks <= len(num), f"{key}: {kinks} of {kinks + len(num)} samples on a cutoff"
        big = np.abs(num).max()
        assert big > 1e-6, f"{key}: gradients vanish, the check is vacuous"
        np.testing.assert_allclose(ana, num, atol=0.02 * big, rtol=0.02, err_msg=key)


def test_geometry_alpha_grad_off_keeps_the_alphas(gpu, rng):
    """GEOMETRY_ALPHA_GRAD = 0: a geometry-only loss (colour gradient 0) gives the splats the
    same g_geom as with it on, and no screen-space gradient at all; with it on, the same loss
    reaches the opacities (so the switch is what zeroes them)."""
    view = View(0, 40, 36)
    n = 60
    r, vis = _splats(rng, n, view.width, view.height, (-2.5, -1.2))
    r["opacities"] = np.clip(r["opacities"], 0.05, 0.9)
    geom = rng.normal(0, 1, (n, 4)).astype(np.float32)
    wg = rng.normal(0, 1, (view.height, view.width, 4)).astype(np.float32)
    ids, ranges = _intersections(r, vis, view)
    npix = view.width * view.height
    co = np.concatenate([r["conics"], r["opacities"][:, None]], 1).astype(np.float32)
    common = dict(ranges=gpu.upload(ranges), isect_ids=gpu.upload(ids), means2d=gpu.upload(r["means2d"].astype(np.float32)),
                  conic_opac=gpu.upload(co), rgb=gpu.upload(r["rgb"].astype(np.float32)), geom=gpu.upload(geom),
                  width=view.width, height=view.height, tiles_x=view.tiles_x, background=spy.float3(0.2, 0.3, 0.4),
                  row0=0)
    image, final_T, last, geom_image = gpu.buffer(12 * npix), gpu.buffer(4 * npix), gpu.buffer(4 * npix), gpu.buffer(16 * npix)
    ck, gck = gpu.buffer(16 * 256), gpu.buffer(16 * 256)
    gpu.kernel("raster/raster", "rasterize_forward", GEOMETRY=1).dispatch(
        thread_count=[view.tiles_x * 16, view.tiles_y * 16, 1], image=image, final_T=final_T, last_index=last,
        checkpoints=ck, write_checkpoints=0, geom_image=geom_image, geom_checkpoints=gck, **common)
    out = {}
    for alpha_grad in (1, 0):
        g_screen, g_geom = gpu.zeros(4 * SCREEN_GRAD_STRIDE * n), gpu.zeros(16 * n)
        gpu.kernel("raster/raster", "rasterize_backward", PY=1, GEOMETRY=1, GEOMETRY_ALPHA_GRAD=alpha_grad).dispatch(
            thread_count=[view.tiles_x * 16, view.tiles_y * 16, 1], final_T=final_T, last_index=last,
            g_image=gpu.zeros(12 * npix), checkpoints=ck, image=image, splits=1, g_screen=g_screen,
            geom_image=geom_image, geom_checkpoints=gck, g_geom_image=gpu.upload(wg), g_geom=g_geom, **common)
        out[alpha_grad] = (gpu.read(g_screen, np.float32, shape=(n, SCREEN_GRAD_STRIDE)),
                           gpu.read(g_geom, np.float32, shape=(n, 4)))
    on, off = out[1], out[0]
    assert np.abs(on[1][vis]).max() > 1e-3, "the geometry gradient must reach the splats"
    assert np.abs(split_screen_grads(on[0])["g_opacity"][vis]).max() > 1e-3, "with it on, the alphas move"
    np.testing.assert_allclose(off[1], on[1], rtol=1e-5, atol=1e-6 * np.abs(on[1]).max())
    np.testing.assert_array_equal(off[0], 0.0)


def test_surfel_projection_backward_matches_finite_differences(gpu, rng):
    """The projection backward with GEOMETRY and only a surfel gradient g_geom: dL/dmeans and
    dL/dquats of L = sum over visible Gaussians of <Wg, (n, d)> against float64 central
    differences of the NumPy surfels; the scales only choose the axis (gradient 0)."""
    n, width, height = 40, 120, 90
    f, rows = random_scene(rng, n, degree=0, max_degree=3, spread=0.6)
    w2c, fx, fy, cx, cy = random_camera(rng, width, height, dist=3.0)
    r0 = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], w2c, fx, fy, cx, cy,
                     width, height, 0)
    vis = r0["radii"][:, 0] > 0
    wg = rng.normal(0, 1, (n, 4)) * vis[:, None]
    # away from the kinks: a clear shortest axis, a normal not edge-on to the view
    ls = np.sort(f["log_scales"], axis=1)
    geo0 = surfels(f["means"], f["log_scales"], f["quats"], w2c)
    safe = vis & (ls[:, 1] - ls[:, 0] > 1e-3) & (np.abs(geo0[:, 3]) > 1e-3)
    cams = gpu.upload(camera_row(w2c, fx, fy, cx, cy, width, height)[None])
    params = gpu.upload(rows)
    b = {k: gpu.buffer(16 * n) for k in ["means2d", "conic_opac", "rgb", "depths", "radii", "tiles", "keys", "ids", "geom"]}
    gpu.kernel("project/project", "project_forward", MAX_SH_DEGREE=3, GEOMETRY=1).dispatch(
        thread_count=[n, 1, 1], params=params, cams=cams, means2d=b["means2d"], conic_opac=b["conic_opac"],
        rgb=b["rgb"], depths=b["depths"], radii=b["radii"], tiles_touched=b["tiles"], depth_keys=b["keys"],
        depth_ids=b["ids"], geom=b["geom"], n=n, cam_index=0, sh_degree=0, tiles_x=8, tiles_y=6)
    D = row_stride(3)
    grads, stats = gpu.buffer(4 * n * D), (gpu.zeros(4 * n), gpu.zeros(4 * n))
    z = np.zeros
    gpu.kernel("project/project_backward", "project_backward", MAX_SH_DEGREE=3, GEOMETRY=1).dispatch(
        thread_count=[n, 1, 1], params=params, cams=cams, radii=b["radii"], conic_opac=b["conic_opac"],
        g_screen=gpu.upload(pack_screen_grads(z((n, 3)), z((n, 2)), z((n, 3)), z(n))), grads=grads,
        g_geom=gpu.upload(wg.astype(np.float32)), grad2d_sum=stats[0], vis_count=stats[1], n=n, cam_index=0,
        sh_degree=0, accumulate_stats=0, isect_total=gpu.zeros(16), isect_capacity=0xFFFFFFFF)
    g = gpu.read(grads, np.float32, shape=(n, D))
    assert np.all(g[:, 3:6] == 0) and np.all(g[~vis] == 0)
    loss = lambda ff: float(np.sum(wg * surfels(ff["means"], ff["log_scales"], ff["quats"], w2c)))
    for key, c0 in (("means", 0), ("quats", 6)):
        num, ana = [], []
        for i in np.flatnonzero(safe)[:10]:
            for c in range(f[key].shape[1]):
                old = f[key][i, c]
                f[key][i, c] = old + 1e-6
                lp = loss(f)
                f[key][i, c] = old - 1e-6
                lm = loss(f)
                f[key][i, c] = old
                num.append((lp - lm) / 2e-6)
                ana.append(g[i, c0 + c])
        num, ana = np.array(num), np.array(ana)
        big = np.abs(num).max()
        assert big > 1e-3, f"{key}: vanishing gradients"
        np.testing.assert_allclose(ana, num, atol=1e-3 * big, rtol=1e-3, err_msg=key)


def consistency_loss(geom, final_T, gt, intr, lam):
    """NumPy float64 depth-normal consistency (shaders/loss/geometry.slang's definition)."""
    h, w, _ = geom.shape
    fx, fy, cx, cy = intr
    ys, xs = np.mgrid[0:h, 0:w]
    r = np.stack([(xs + 0.5 - cx) / fx, (ys + 0.5 - cy) / fy, np.ones((h, w))], -1)
    s = np.sum(geom[..., :3] * r, -1)
    P = r * (geom[..., 3] / s)[..., None]
    alpha_ok = 1 - final_T >= 0.5
    face_ok = s < -0.05 * np.linalg.norm(geom[..., :3], axis=-1) * np.linalg.norm(r, axis=-1)
    c = (slice(1, -1), slice(1, -1))
    xp, xm, yp, ym = (slice(1, -1), slice(2, None)), (slice(1, -1), slice(0, -2)), \
        (slice(2, None), slice(1, -1)), (slice(0, -2), slice(1, -1))
    ok = alpha_ok[c].copy()
    for q in (xp, xm, yp, ym):
        ok &= alpha_ok[q] & face_ok[q]
    a, b = P[xp] - P[xm], P[yp] - P[ym]
    cr = np.cross(b, a)
    nd = cr / np.linalg.norm(cr, axis=-1, keepdims=True)
    nr = geom[c][..., :3] / np.linalg.norm(geom[c][..., :3], axis=-1, keepdims=True)
    img = gt.astype(np.float64) / 255
    e = 0.5 * (np.abs(img[xp] - img[xm]) + np.abs(img[yp] - img[ym]))
    wgt = (1 - np.minimum(1, e.mean(-1))) ** 2
    return lam / (w * h) * float(np.sum(np.where(ok, wgt * (1 - np.sum(nd * nr, -1)), 0)))


def test_depth_normal_loss_and_gradient_match_numpy(gpu, rng):
    """A random smooth surface seen by a random pinhole (planes' normals and offsets with
    noise, some pixels too transparent or seen edge-on): the loss against the NumPy float64
    definition and its gradient with respect to the [H, W, 4] map against central differences."""
    w, h = 37, 29
    fx, fy = rng.uniform(30, 45, 2)
    cx, cy = w * rng.uniform(0.4, 0.6), h * rng.uniform(0.4, 0.6)
    ys, xs = np.mgrid[0:h, 0:w]
    # a wavy surface z(x, y) in front of the camera, its normals from the analytic slope
    z = 3 + 0.3 * np.sin(xs / rng.uniform(4, 8)) + 0.2 * np.cos(ys / rng.uniform(4, 8))
    X, Y = (xs + 0.5 - cx) / fx * z, (ys + 0.5 - cy) / fy * z
    P = np.stack([X, Y, z], -1)
    n = np.cross(np.gradient(P, axis=0), np.gradient(P, axis=1))
    n /= np.linalg.norm(n, axis=-1, keepdims=True)
    n = np.where((np.sum(n * P, -1) > 0)[..., None], -n, n) + rng.normal(0, 0.15, (h, w, 3))
    alpha = rng.uniform(0.55, 1.0, (h, w))
    alpha[rng.uniform(size=(h, w)) < 0.05] = 0.2  # masked out
    geom = np.concatenate([n, np.sum(n * P, -1, keepdims=True) * rng.uniform(0.97, 1.03, (h, w, 1))], -1)
    geom *= alpha[..., None]  # composited: both carry the accumulated alpha
    geom = geom.astype(np.float32).astype(np.float64)
    final_T = (1 - alpha).astype(np.float32).astype(np.float64)
    gt = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    gt[: h // 2] = gt[: h // 2] // 8 + 100  # a smooth half: weights near 1
    lam = float(rng.uniform(0.5, 2))
    intr = (fx, fy, cx, cy)
    loss = DepthNormalLoss(gpu)
    gbuf, lsum = gpu.buffer(16 * w * h), gpu.zeros(32)
    enc = gpu.encoder()
    loss.record(enc, gpu.upload(geom.astype(np.float32)), gpu.upload(final_T.astype(np.float32)),
                gpu.upload(pack_rgba8(gt)), gbuf, lsum, w, h, intr, lam)
    gpu.submit(enc)
    got = gpu.read(lsum, np.float32, 8)
    want = consistency_loss(geom, final_T, gt, intr, lam)
    assert got[0] == 0 and want > 1e-3 * lam
    np.testing.assert_allclose(got[4], want, rtol=1e-4)
    grad = gpu.read(gbuf, np.float32, shape=(h, w, 4))
    num, ana = [], []
    for _ in range(60):
        y, x, c = rng.integers(0, h), rng.integers(0, w), rng.integers(0, 4)
        e = 1e-6 * max(1.0, abs(geom[y, x, c]))
        old = geom[y, x, c]
        geom[y, x, c] = old + e
        lp = consistency_loss(geom, final_T, gt, intr, lam)
        geom[y, x, c] = old - e
        lm = consistency_loss(geom, final_T, gt, intr, lam)
        geom[y, x, c] = old
        num.append((lp - lm) / (2 * e))
        ana.append(grad[y, x, c])
    num, ana = np.array(num), np.array(ana)
    big = np.abs(num).max()
    assert big > 0 and np.count_nonzero(num) > 20
    np.testing.assert_allclose(ana, num, atol=2e-3 * big, rtol=2e-3)
