"""The multi-view geometric consistency loss (spirula/engine/splat/geometry_phase.py MultiViewLoss,
shaders/loss/multiview.slang) against a NumPy float64 reference and central finite
differences, on two synthetic geometry maps of a known plane seen from two cameras; and the
neighbour choice from the poses."""

import numpy as np
import pytest

from spirula.engine.ingest.dataset import Camera
from spirula.engine.splat.camera_table import camera_row
from spirula.engine.splat.geometry_phase import MV_LOSS_WORD, MultiViewLoss, Neighbours, neighbour_views
from tests.splat.scenes import camera_of, geometry_map_reader, look_at_w2c


def rays(w, h, intr):
    fx, fy, cx, cy = intr
    ys, xs = np.mgrid[0:h, 0:w]
    return np.stack([(xs + 0.5 - cx) / fx, (ys + 0.5 - cy) / fy, np.ones((h, w))], -1)


def plane_map(w2c, intr, w, h, nw, c, alpha):
    """The composited geometry [H, W, 4] and final_T [H, W] of the world plane nw . X = c seen
    by camera w2c: per pixel alpha (n, d), n the camera-space normal facing the camera."""
    R, t = w2c[:3, :3], w2c[:3, 3]
    n = R @ nw
    d = c + n @ t  # n . p for p = R X + t on the plane
    if d > 0:
        n, d = -n, -d
    geom = np.broadcast_to(np.concatenate([n, [d]]), (h, w, 4)) * alpha[..., None]
    return geom.copy(), 1.0 - alpha


def plane_depth_np(geom, final_T, intr):
    """NumPy float64 of the plane_depth kernel: D, 0 where invalid."""
    h, w, _ = geom.shape
    r = rays(w, h, intr)
    s = np.sum(geom[..., :3] * r, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        D = geom[..., 3] / s
    ok = (1 - final_T >= 0.5) & (s < -0.05 * np.linalg.norm(geom[..., :3], axis=-1) * np.linalg.norm(r, axis=-1)) & (D > 0)
    return np.where(ok, D, 0.0)


def reprojection_np(geom, final_T, depth_n, cam_r, cam_n, max_error=1.0):
    """NumPy float64 forward-backward error phi [H, W] (px) and the valid mask of the
    reference pixels (shaders/loss/multiview.slang's definition). cam = (w2c, intr, w, h)."""
    (wr, ir, w, h), (wn, inn, wn_w, wn_h) = cam_r, cam_n
    r = rays(w, h, ir)
    D = plane_depth_np(geom, final_T, ir)
    ok = D > 0
    P = r * D[..., None]
    Pw = (P - wr[:3, 3]) @ wr[:3, :3]  # R^T (P - t), row vectors
    Pn = Pw @ wn[:3, :3].T + wn[:3, 3]
    ok &= Pn[..., 2] > 1e-6
    z = np.where(ok, Pn[..., 2], 1.0)
    m = Pn / z[..., None]
    fu, fv = inn[0] * m[..., 0] + inn[2] - 0.5, inn[1] * m[..., 1] + inn[3] - 0.5
    ok &= (fu >= 0) & (fv >= 0) & (fu < wn_w - 1) & (fv < wn_h - 1)
    i0 = np.clip(np.floor(fu), 0, wn_w - 2).astype(int)
    j0 = np.clip(np.floor(fv), 0, wn_h - 2).astype(int)
    tx, ty = fu - i0, fv - j0
    d00, d10, d01, d11 = depth_n[j0, i0], depth_n[j0, i0 + 1], depth_n[j0 + 1, i0], depth_n[j0 + 1, i0 + 1]
    ok &= (d00 > 0) & (d10 > 0) & (d01 > 0) & (d11 > 0)
    Dn = (1 - ty) * ((1 - tx) * d00 + tx * d10) + ty * ((1 - tx) * d01 + tx * d11)
    Qn = m * Dn[..., None]
    Q = ((Qn - wn[:3, 3]) @ wn[:3, :3]) @ wr[:3, :3].T + wr[:3, 3]
    ok &= Q[..., 2] > 1e-6
    qz = np.where(ok, Q[..., 2], 1.0)
    ys, xs = np.mgrid[0:h, 0:w]
    e = np.stack([ir[0] * Q[..., 0] / qz + ir[2] - (xs + 0.5), ir[1] * Q[..., 1] / qz + ir[3] - (ys + 0.5)], -1)
    phi = np.linalg.norm(e, axis=-1)
    ok &= phi < max_error
    return np.where(ok, phi, 0.0), ok


def two_views(rng, w=40, h=32, noise_ref=0.0, noise_nb=0.0, offset=0.0):
    """A tilted plane through the origin seen by two cameras about 12 degrees apart (3 units
    away); the reference map's plane offsets get relative noise ``noise_ref`` and the plane
    itself is moved by ``offset`` along its normal in the neighbour's map."""
    nw = np.array([0.0, 0.0, -1.0]) + rng.normal(0, 0.15, 3)
    nw /= np.linalg.norm(nw)
    look = rng.normal(0, 0.05, 3)
    c = float(nw @ look)
    cams = []
    for k, az in enumerate((0.0, np.radians(rng.uniform(10, 14)))):
        az += rng.uniform(-0.05, 0.05)
        eye = 3.0 * np.array([np.sin(az), rng.uniform(-0.1, 0.1), -np.cos(az)])
        f = w * rng.uniform(1.0, 1.2)
        intr = (f, f * rng.uniform(0.97, 1.03), w * rng.uniform(0.45, 0.55), h * rng.uniform(0.45, 0.55))
        cams.append((look_at_w2c(eye, look), intr, w, h))
    maps = []
    for k, (w2c, intr, ww, hh) in enumerate(cams):
        alpha = rng.uniform(0.55, 1.0, (hh, ww))
        alpha[rng.uniform(size=(hh, ww)) < 0.05] = 0.2  # masked out
        geom, T = plane_map(w2c, intr, ww, hh, nw, c + (offset if k == 1 else 0.0), alpha)
        noise = noise_ref if k == 0 else noise_nb
        geom[..., 3] *= 1 + noise * rng.normal(0, 1, (hh, ww))
        geom[..., :3] += 0.3 * noise * rng.normal(0, 1, (hh, ww, 3))
        maps.append((geom.astype(np.float32).astype(np.float64), T.astype(np.float32).astype(np.float64)))
    return cams, maps


def run_gpu(gpu, cams, maps, lam, max_error=1.0):
    """The GPU loss of reference camera 0 against neighbour 1: (loss, count, grad [H, W, 4],
    neighbour depth [Hn, Wn])."""
    table = gpu.upload(np.stack([camera_row(w2c, *intr, ww, hh) for w2c, intr, ww, hh in cams]))
    (g0, T0), (g1, T1) = maps
    (_, _, w, h), (_, _, wn, hn) = cams
    loss = MultiViewLoss(gpu, max_error)
    depth = gpu.buffer(4 * wn * hn)
    grad = gpu.upload(np.full((h, w, 4), 0.25, np.float32))  # added to: starts non-zero
    lsum = gpu.zeros(32)
    enc = gpu.encoder()
    loss.record_depth(enc, gpu.upload(g1.astype(np.float32)), gpu.upload(T1.astype(np.float32)), table, 1, wn, hn, depth)
    loss.record(enc, gpu.upload(g0.astype(np.float32)), gpu.upload(T0.astype(np.float32)), depth, table, 0, 1, w, h,
                grad, lsum, lam)
    gpu.submit(enc)
    out = gpu.read(lsum, np.float32, 8)
    assert np.all(out[:MV_LOSS_WORD] == 0) and np.all(out[MV_LOSS_WORD + 1:] == 0)
    return (float(out[MV_LOSS_WORD]), int(gpu.read(loss.count, np.uint32, 4)[0]),
            gpu.read(grad, np.float32, shape=(h, w, 4)) - 0.25, gpu.read(depth, np.float32, shape=(hn, wn)))


def test_multiview_loss_vanishes_for_one_plane_and_grows_with_an_offset(gpu):
    """Both maps of the same plane: phi ~ 0 on most pixels (loss at float32 noise); the
    neighbour's plane moved along its normal by a growing offset: the loss grows with it."""
    rng = np.random.default_rng(4701)
    losses = []
    for offset in (0.0, 0.002, 0.005, 0.01):
        cams, maps = two_views(np.random.default_rng(rng.integers(1 << 30)), offset=offset)
        loss, count, _, _ = run_gpu(gpu, cams, maps, 1.0)
        losses.append(loss)
        assert count > 0.5 * 40 * 32, f"offset {offset}: only {count} valid pixels"
    print("losses by offset:", losses)
    assert losses[0] < 2e-3
    assert losses[1] > 5 * losses[0] and losses[2] > 1.5 * losses[1] and losses[3] > 1.5 * losses[2]


def test_multiview_loss_and_gradient_match_numpy(gpu):
    """A noisy reference map against a slightly noisy neighbour map of the same plane: the
    neighbour's depth, the loss and the valid count against the NumPy float64 definition, and
    the gradient with respect to the reference [H, W, 4] map (the weights exp(-phi), the mask
    and the count held constant) against central differences."""
    rng = np.random.default_rng(4702)
    cams, maps = two_views(rng, noise_ref=0.08, noise_nb=0.002)
    lam = float(rng.uniform(0.5, 2))
    loss, count, grad, depth = run_gpu(gpu, cams, maps, lam)
    (g0, T0), (g1, T1) = maps
    want_depth = plane_depth_np(g1, T1, cams[1][1])
    np.testing.assert_allclose(depth, want_depth, rtol=1e-5, atol=1e-6)
    phi, ok = reprojection_np(g0, T0, want_depth, cams[0], cams[1])
    print(f"valid {ok.sum()} (GPU {count}) of {ok.size}; phi mean {phi[ok].mean():.3f}, max {phi[ok].max():.3f}")
    assert ok.sum() > 0.3 * ok.size and phi[ok].mean() > 0.2, "the check needs many valid pixels with errors"
    assert abs(count - ok.sum()) <= 0.01 * ok.sum()  # float32 moves a few pixels across the 1 px bound
    w0 = np.exp(-phi)
    want = lam * float(np.sum(w0 * phi * ok)) / ok.sum()
    np.testing.assert_allclose(loss, want, rtol=1e-4)
    k = lam / count

    def detached(geom, y, x):  # the pixel's term with its weight held at w0
        p, _ = reprojection_np(geom, T0, want_depth, cams[0], cams[1], max_error=np.inf)
        return k * w0[y, x] * p[y, x]

    num, ana, kinks = [], [], 0
    picked = rng.permutation(np.argwhere(ok & (phi < 0.9)))[:40]
    for y, x in picked:
        for c in range(4):
            e = 1e-6 * max(1.0, abs(g0[y, x, c]))
            old = g0[y, x, c]
            l0 = detached(g0, y, x)
            g0[y, x, c] = old + e
            lp = detached(g0, y, x)
            g0[y, x, c] = old - e
            lm = detached(g0, y, x)
            g0[y, x, c] = old
            fwd, bwd = (lp - l0) / e, (l0 - lm) / e
            if abs(fwd - bwd) > 0.1 * max(abs(fwd), abs(bwd), 1e-3):
                kinks += 1  # a bilinear cell's edge: no derivative to check
                continue
            num.append((lp - lm) / (2 * e))
            ana.append(grad[y, x, c])
    num, ana = np.array(num), np.array(ana)
    assert kinks < 0.1 * len(num)
    big = np.abs(num).max()
    assert big > 0 and np.count_nonzero(num) > 100
    print(f"loss {loss:.6f} vs {want:.6f}; gradient: {len(num)} samples, {kinks} kinks, max |ana - num| / big "
          f"{np.abs(ana - num).max() / big:.2e}")
    np.testing.assert_allclose(ana, num, atol=1e-4 * big, rtol=1e-3)
    # the gradient reaches the valid pixels only (but for those float32 moved across the bound)
    assert np.count_nonzero(np.abs(grad).sum(-1)[~ok]) <= abs(count - ok.sum())


def test_multiview_loss_skips_an_overflowed_neighbour(gpu):
    """A neighbour render whose intersections outgrew its capacity gives an all-0 depth map:
    no valid pixel, no loss, no gradient."""
    rng = np.random.default_rng(4703)
    cams, maps = two_views(rng, noise_ref=0.006)
    table = gpu.upload(np.stack([camera_row(w2c, *intr, ww, hh) for w2c, intr, ww, hh in cams]))
    (g0, T0), (g1, T1) = maps
    w, h = cams[0][2], cams[0][3]
    loss = MultiViewLoss(gpu)
    depth, grad, lsum = gpu.buffer(4 * w * h), gpu.zeros(16 * w * h), gpu.zeros(32)
    enc = gpu.encoder()
    loss.record_depth(enc, gpu.upload(g1.astype(np.float32)), gpu.upload(T1.astype(np.float32)), table, 1, w, h, depth,
                      isect_total=gpu.upload(np.array([5001, 0, 0, 0], np.uint32)), isect_capacity=5000)
    loss.record(enc, gpu.upload(g0.astype(np.float32)), gpu.upload(T0.astype(np.float32)), depth, table, 0, 1, w, h,
                grad, lsum, 1.0)
    gpu.submit(enc)
    assert np.all(gpu.read(depth, np.float32) == 0)
    assert gpu.read(loss.count, np.uint32, 4)[0] == 0
    assert np.all(gpu.read(lsum, np.float32) == 0) and np.all(gpu.read(grad, np.float32) == 0)


def _camera(w2c, name="c"):
    return Camera(name=name, image_path=None, width=32, height=24, fx=30.0, fy=30.0, cx=16.0, cy=12.0,
                  w2c=w2c, image=np.zeros((24, 32, 3), np.uint8))


def test_neighbour_views_keep_overlapping_views_with_a_baseline():
    """A partial orbit of 24 cameras 14 degrees apart at distance 1, plus one looking away and
    one at the same place as camera 0: each camera's neighbours are the orbit cameras within 30
    degrees (up to two on each side), nearest first; the one looking away and the one with no
    baseline are nobody's; the picks are reproducible and spread over the list."""
    cams = []
    for k in range(24):
        a = np.radians(14 * k)
        cams.append(_camera(look_at_w2c(np.array([np.sin(a), 0.0, np.cos(a)]), np.zeros(3))))
    cams.append(_camera(look_at_w2c(np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, 3.0]))))  # looks away
    cams.append(_camera(cams[0].w2c.copy()))  # no baseline to camera 0
    views = neighbour_views(cams, list(range(26)), unit=1.0)
    assert views[24] == [] and 24 not in sum(views.values(), [])
    assert views[5] == [4, 6, 3, 7]  # 14 then 28 degrees (chords 0.24, 0.48), ties by index
    assert views[0] == [1, 2] and views[25] == [1, 2] and views[23] == [22, 21]
    nb = Neighbours(views, seed=3)
    picks = [nb.pick(5, s) for s in range(200)]
    assert picks == [Neighbours(views, seed=3).pick(5, s) for s in range(200)]
    assert set(picks) == {3, 4, 6, 7} and min(picks.count(i) for i in (3, 4, 6, 7)) > 25
    assert nb.pick(24, 0) is None


def test_training_steps_loss_matches_separate_renders_of_both_views(gpu):
    """Three geometry steps of a Trainer with the multi-view term alone (the first counted
    exactly, its neighbour in a submission of its own; the next two in one command buffer
    each, the neighbour's render reusing the rasterizer's buffers): each step's loss equals the
    NumPy loss of the reference and neighbour views rendered separately from the parameters the
    step started from. And Trainer.multiview_consistency (the evaluation's share of agreeing
    pixels) against the NumPy share on separate renders."""
    from spirula.engine.config import TrainConfig
    from spirula.engine.splat.render import Rasterizer
    from spirula.engine.splat.trainer import Trainer
    from tests.splat.scenes import tiny_dataset

    ds = tiny_dataset(seed=47, n_cams=16, w=48, h=40, n_points=1500)
    cfg = TrainConfig(steps=100, sh_degree=0, densify_from=1000, log_interval=1000, seed=3, strategy="adc",
                      checkpoint_every=0, geometry=True, geometry_from=0.0, lambda_normal=0.0, lambda_multiview=1.0,
                      init_opacity=0.6)
    t = Trainer(gpu, ds, list(range(16)), cfg)
    assert t.neighbours.coverage() == 1
    pairs = []
    record = t.multiview_loss.record
    t.multiview_loss.record = lambda enc, g, T, d, cams, ci, nb, *a, **k: (pairs.append((ci, nb)),
                                                                        record(enc, g, T, d, cams, ci, nb, *a, **k))
    # the blob's splats are round (their planes are arbitrary): errors of several px are common
    # here, so the bound is widened for the comparison to see many pixels
    bound = t.multiview_loss.max_error = 20.0
    raster = Rasterizer(gpu, cfg.sh_degree)

    view_map = geometry_map_reader(gpu, raster, t.cams, ds)
    cam = lambda i: camera_of(ds, i)

    for step in range(3):
        n = t.model.n
        params = gpu.upload(gpu.read(t.model.buf["params"], np.float32))
        before = gpu.read(t.loss_sum, np.float32, 8)[MV_LOSS_WORD]
        t.train_step(step)
        t.drain()
        got = gpu.read(t.loss_sum, np.float32, 8)[MV_LOSS_WORD] - before
        ci, nb = pairs[-1]
        (g0, T0), (g1, T1) = view_map(params, n, ci), view_map(params, n, nb)
        phi, ok = reprojection_np(g0, T0, plane_depth_np(g1, T1, cam(nb)[1]), cam(ci), cam(nb), max_error=bound)
        assert ok.sum() > 50, f"step {step}: only {ok.sum()} valid pixels"
        want = float(np.sum(np.exp(-phi) * phi * ok)) / ok.sum()
        print(f"step {step}: cameras {ci} -> {nb}, {ok.sum()} valid pixels, loss {got:.5f} (NumPy {want:.5f})")
        np.testing.assert_allclose(got, want, rtol=2e-3)
    # the evaluation's measure: camera 0's opaque pixels within 1 px of its nearest camera's surface
    (near,) = neighbour_views(ds.cameras, list(range(16)), t.world_unit(), count=1)[0]
    params = gpu.upload(gpu.read(t.model.buf["params"], np.float32))
    (g0, T0), (g1, T1) = view_map(params, t.model.n, 0), view_map(params, t.model.n, near)
    _, ok = reprojection_np(g0, T0, plane_depth_np(g1, T1, cam(near)[1]), cam(0), cam(near))
    share = t.multiview_consistency(0)
    print(f"camera 0 against {near}: {share:.4f} of the opaque pixels agree (NumPy {ok.sum() / (T0 <= 0.5).sum():.4f})")
    assert 0 < share < 1
    np.testing.assert_allclose(share, ok.sum() / (T0 <= 0.5).sum(), atol=2 / ok.size)
    t.release()
