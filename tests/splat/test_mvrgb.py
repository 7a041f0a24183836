"""The multi-view photometric consistency loss (spirula/engine/splat/geometry_phase.py
PhotometricMultiViewLoss, shaders/loss/mvrgb.slang) against a NumPy float64 reference and
central finite differences, on a textured plane seen by two cameras: the reference view's
geometry map of that plane warps its training image's patches onto the neighbour's training
image (NCC ~ 1); a plane moved or tilted in the map does worse."""

import numpy as np

from spirula.engine.splat.camera_table import camera_row
from spirula.engine.splat.geometry_phase import MVRGB_LOSS_WORD, PhotometricMultiViewLoss
from spirula.engine.splat.trainer import pack_rgba8
from tests.splat.scenes import camera_of, geometry_map_reader, look_at_w2c
from tests.splat.test_multiview import plane_map, rays

GREY = np.array([0.299, 0.587, 0.114])


def textured_views(rng, w=64, h=48):
    """A tilted plane nw . X = c through about the origin, painted with smooth sinusoids of its
    own coordinates, seen by two cameras about 12 degrees apart 3 units away: [(w2c, intr, w,
    h)] and their uint8 [H, W, 3] images; plus the plane (nw, c)."""
    nw = np.array([0.0, 0.0, -1.0]) + rng.normal(0, 0.15, 3)
    nw /= np.linalg.norm(nw)
    look = rng.normal(0, 0.05, 3)
    c = float(nw @ look)
    e1 = np.cross(nw, [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(nw, e1)
    freq = rng.uniform(8, 14, (3, 2)) * rng.choice([-1, 1], (3, 2))
    phase = rng.uniform(0, 2 * np.pi, (3, 2))
    cams, images = [], []
    for az in (0.0, np.radians(rng.uniform(10, 14))):
        eye = 3.0 * np.array([np.sin(az), rng.uniform(-0.1, 0.1), -np.cos(az)])
        f = w * rng.uniform(1.0, 1.2)
        intr = (f, f * rng.uniform(0.97, 1.03), w * rng.uniform(0.45, 0.55), h * rng.uniform(0.45, 0.55))
        w2c = look_at_w2c(eye, look)
        R, t = w2c[:3, :3], w2c[:3, 3]
        d = rays(w, h, intr) @ R  # world directions (R^T r as rows)
        o = -R.T @ t
        lam = (c - nw @ o) / (d @ nw)
        X = o + lam[..., None] * d
        u, v = X @ e1, X @ e2
        img = 0.5 + 0.2 * np.sin(freq[:, 0] * u[..., None] + phase[:, 0]) \
            + 0.2 * np.sin(freq[:, 1] * v[..., None] + phase[:, 1])
        images.append(np.clip(np.round(255 * img), 0, 255).astype(np.uint8))
        cams.append((w2c, intr, w, h))
    return cams, images, (nw, c)


def grey(img):
    return img.astype(np.float64) @ GREY / 255.0


def mvrgb_np(geom, final_T, img_r, img_n, cam_r, cam_n, radius=3, stride=4, offset=(0, 0), var_min=2.5e-4,
             max_cost=0.9):
    """NumPy float64 of mvrgb.slang: per patch centre (ys, xs), its cost 1 - NCC and validity."""
    (wr, ir, w, h), (wn, inn, wn_w, wn_h) = cam_r, cam_n
    xs = np.arange(radius + offset[0], w - radius, stride)
    ys = np.arange(radius + offset[1], h - radius, stride)
    cy, cx = [a.ravel() for a in np.meshgrid(ys, xs, indexing="ij")]
    g = geom[cy, cx]
    rc = np.stack([(cx + 0.5 - ir[2]) / ir[0], (cy + 0.5 - ir[3]) / ir[1], np.ones(len(cx))], -1)
    s = np.sum(g[:, :3] * rc, -1)
    ok = (1 - final_T[cy, cx] >= 0.5) & (s < -0.05 * np.linalg.norm(g[:, :3], axis=-1) * np.linalg.norm(rc, axis=-1))
    ok &= g[:, 3] != 0
    v = g[:, :3] / np.where(g[:, 3] != 0, g[:, 3], 1.0)[:, None]
    A = wn[:3, :3] @ wr[:3, :3].T
    b = wn[:3, 3] - A @ wr[:3, 3]
    oy, ox = [a.ravel() for a in np.mgrid[-radius:radius + 1, -radius:radius + 1]]
    px, py = cx[:, None] + ox, cy[:, None] + oy  # [P, K]
    rm = np.stack([(px + 0.5 - ir[2]) / ir[0], (py + 0.5 - ir[3]) / ir[1], np.ones(px.shape)], -1)
    hm = rm @ A.T + b * np.sum(v[:, None] * rm, -1)[..., None]
    ok &= np.all(hm[..., 2] > 1e-6, -1)
    z = np.where(hm[..., 2] > 1e-6, hm[..., 2], 1.0)
    fu, fv = inn[0] * hm[..., 0] / z + inn[2] - 0.5, inn[1] * hm[..., 1] / z + inn[3] - 0.5
    ok &= np.all((fu >= 0) & (fv >= 0) & (fu < wn_w - 1) & (fv < wn_h - 1), -1)
    i0 = np.clip(np.floor(fu), 0, wn_w - 2).astype(int)
    j0 = np.clip(np.floor(fv), 0, wn_h - 2).astype(int)
    tx, ty = fu - i0, fv - j0
    G = grey(img_n)
    bm = (1 - ty) * ((1 - tx) * G[j0, i0] + tx * G[j0, i0 + 1]) + ty * ((1 - tx) * G[j0 + 1, i0] + tx * G[j0 + 1, i0 + 1])
    am = grey(img_r)[py, px]
    da, db = am - am.mean(-1, keepdims=True), bm - bm.mean(-1, keepdims=True)
    vaa, vbb, vab = (da * da).mean(-1), (db * db).mean(-1), (da * db).mean(-1)
    ok &= vaa >= var_min
    cost = 1 - vab / np.sqrt(vaa * vbb + 1e-10)
    ok &= cost < max_cost
    return cy, cx, np.where(ok, cost, 0.0), ok


def run_gpu(gpu, cams, images, geom, T, lam, offset=(0, 0), **kw):
    """The GPU loss of reference camera 0 against neighbour 1: (loss, count, grad [H, W, 4])."""
    table = gpu.upload(np.stack([camera_row(w2c, *intr, ww, hh) for w2c, intr, ww, hh in cams]))
    w, h = cams[0][2], cams[0][3]
    loss = PhotometricMultiViewLoss(gpu, **kw)
    grad = gpu.upload(np.full((h, w, 4), 0.25, np.float32))  # added to: starts non-zero
    lsum = gpu.zeros(32)
    enc = gpu.encoder()
    loss.record(enc, gpu.upload(geom.astype(np.float32)), gpu.upload(T.astype(np.float32)),
                gpu.upload(pack_rgba8(images[0])), gpu.upload(pack_rgba8(images[1])), table, 0, 1, w, h, grad, lsum,
                lam, offset=offset)
    gpu.submit(enc)
    out = gpu.read(lsum, np.float32, 8)
    assert np.all(out[:MVRGB_LOSS_WORD] == 0) and np.all(out[MVRGB_LOSS_WORD + 1:] == 0)
    return (float(out[MVRGB_LOSS_WORD]), int(gpu.read(loss.count, np.uint32, 4)[0]),
            gpu.read(grad, np.float32, shape=(h, w, 4)) - 0.25)


def ref_map(rng, cams, plane, shift=0.0, tilt=0.0):
    """The reference camera's geometry map of the plane, moved by ``shift`` along its normal
    and tilted by ``tilt`` radians about a random in-plane axis, with random alpha."""
    nw, c = plane
    if tilt:
        axis = np.cross(nw, rng.normal(0, 1, 3))
        axis /= np.linalg.norm(axis)
        nw2 = np.cos(tilt) * nw + np.sin(tilt) * np.cross(axis, nw)
        c = c * (nw2 @ nw)  # still through about the same point
        nw = nw2
    w2c, intr, w, h = cams[0]
    alpha = rng.uniform(0.6, 1.0, (h, w))
    alpha[rng.uniform(size=(h, w)) < 0.05] = 0.2  # left out
    geom, T = plane_map(w2c, intr, w, h, nw, c + shift, alpha)
    return geom.astype(np.float32).astype(np.float64), T.astype(np.float32).astype(np.float64)


def test_mvrgb_ncc_near_one_at_the_true_plane_and_worse_off_it(gpu):
    """The map of the true plane: mean 1 - NCC small on the GPU and in NumPy; the same plane
    moved along its normal, or tilted, in the map: the loss grows with the error."""
    rng = np.random.default_rng(4711)
    cams, images, plane = textured_views(rng)
    got = {}
    for name, kw in [("true", {}), ("shift 0.05", dict(shift=0.05)), ("shift 0.15", dict(shift=0.15)),
                     ("tilt 10", dict(tilt=np.radians(10))), ("tilt 25", dict(tilt=np.radians(25)))]:
        geom, T = ref_map(np.random.default_rng(7), cams, plane, **kw)
        loss, count, _ = run_gpu(gpu, cams, images, geom, T, 1.0)
        _, _, cost, ok = mvrgb_np(geom, T, *images, *cams)
        got[name] = loss
        print(f"{name}: loss {loss:.4f} (NumPy {cost[ok].mean():.4f}), {count} patches (NumPy {ok.sum()})")
        assert count > 40 and abs(count - ok.sum()) <= 1
        np.testing.assert_allclose(loss, cost[ok].mean(), rtol=2e-3, atol=1e-5)
    assert got["true"] < 0.05
    assert got["shift 0.05"] > 2 * got["true"] and got["shift 0.15"] > 1.5 * got["shift 0.05"]
    assert got["tilt 10"] > 2 * got["true"] and got["tilt 25"] > 1.5 * got["tilt 10"]


def test_mvrgb_loss_and_gradient_match_numpy(gpu):
    """A map of the plane with noisy offsets and normals, a shifted grid of patches: the loss and
    the valid count against the NumPy float64 definition, and the gradient with respect to each
    patch centre's (N, dacc) (the mask and the count held constant) against central
    differences; nothing reaches a pixel that is no valid patch's centre."""
    rng = np.random.default_rng(4712)
    cams, images, plane = textured_views(rng)
    geom, T = ref_map(rng, cams, plane, shift=0.02)
    geom[..., 3] *= 1 + 0.03 * rng.normal(0, 1, geom.shape[:2])
    geom[..., :3] += 0.03 * rng.normal(0, 1, geom.shape[:2] + (3,))
    geom = geom.astype(np.float32).astype(np.float64)
    lam, offset = float(rng.uniform(0.5, 2)), (1, 2)
    loss, count, grad = run_gpu(gpu, cams, images, geom, T, lam, offset=offset)
    cy, cx, cost, ok = mvrgb_np(geom, T, *images, *cams, offset=offset)
    print(f"{ok.sum()} valid patches (GPU {count}) of {ok.size}; mean cost {cost[ok].mean():.4f}")
    assert ok.sum() > 40 and cost[ok].mean() > 0.02
    assert abs(count - ok.sum()) <= 1
    np.testing.assert_allclose(loss, lam * cost[ok].mean(), rtol=2e-3)
    k = lam / count
    num, ana, kinks = [], [], 0
    for pi in rng.permutation(np.flatnonzero(ok))[:30]:
        y, x = cy[pi], cx[pi]
        for c in range(4):
            e = 1e-6 * max(1.0, abs(geom[y, x, c]))
            old = geom[y, x, c]
            vals = []
            for d in (0.0, e, -e):
                geom[y, x, c] = old + d
                vals.append(k * mvrgb_np(geom, T, *images, *cams, offset=offset)[2][pi])
            geom[y, x, c] = old
            l0, lp, lm = vals
            fwd, bwd = (lp - l0) / e, (l0 - lm) / e
            if abs(fwd - bwd) > 0.1 * max(abs(fwd), abs(bwd), 1e-3 * k):
                kinks += 1  # a sample crossed a bilinear cell's edge: no derivative to check
                continue
            num.append((lp - lm) / (2 * e))
            ana.append(grad[y, x, c])
    num, ana = np.array(num), np.array(ana)
    big = np.abs(num).max()
    print(f"gradient: {len(num)} samples, {kinks} kinks, max |ana - num| / big {np.abs(ana - num).max() / big:.2e}")
    assert kinks < 0.2 * len(num) and big > 0 and np.count_nonzero(num) > 80
    np.testing.assert_allclose(ana, num, atol=2e-3 * big, rtol=1e-2)
    centres = np.zeros(grad.shape[:2], bool)
    centres[cy[ok], cx[ok]] = True
    assert np.all(grad[~centres] == 0)


def test_mvrgb_leaves_out_textureless_and_transparent_patches(gpu):
    """A flat grey neighbour-and-reference pair: every patch below the texture bound, no patch,
    no loss, no gradient; the textured pair with the map's alpha below 0.5: the same."""
    rng = np.random.default_rng(4713)
    cams, images, plane = textured_views(rng)
    geom, T = ref_map(rng, cams, plane)
    flat = [np.full_like(im, 128) for im in images]
    for imgs, TT in ((flat, T), (images, np.full_like(T, 0.6))):
        loss, count, grad = run_gpu(gpu, cams, imgs, geom, TT, 1.0)
        assert count == 0 and loss == 0 and np.all(grad == 0)


def test_training_steps_mvrgb_loss_matches_numpy_on_separate_renders(gpu):
    """Three geometry steps of a Trainer with the photometric multi-view term alone (no
    neighbour render is recorded): each step's loss equals the NumPy loss of the reference
    view rendered separately from the parameters the step started from, against the paired
    neighbour's training image, on the step's shifted grid of patches."""
    from spirula.engine.config import TrainConfig
    from spirula.engine.splat.render import Rasterizer
    from spirula.engine.splat.trainer import Trainer
    from tests.splat.scenes import tiny_dataset

    ds = tiny_dataset(seed=48, n_cams=16, w=48, h=40, n_points=1500)
    for c in ds.cameras:  # smooth images: the random ones are all texture and no bilinear structure
        ys, xs = np.mgrid[0:c.height, 0:c.width]
        c.image[:] = np.clip(c.image.astype(float) * 0.3 + 90 + 60 * np.sin(xs / 3.0)[..., None]
                             + 40 * np.cos(ys / 4.0)[..., None], 0, 255).astype(np.uint8)
    cfg = TrainConfig(steps=100, sh_degree=0, densify_from=1000, log_interval=1000, seed=3, strategy="adc",
                      checkpoint_every=0, geometry=True, geometry_from=0.0, lambda_normal=0.0, lambda_mvrgb=1.0,
                      init_opacity=0.6)
    t = Trainer(gpu, ds, list(range(16)), cfg)
    assert t.neighbours.coverage() == 1 and not hasattr(t, "multiview_loss")
    t._record_neighbour = None  # the photometric term renders no neighbour: a call would fail
    pairs = []
    record = t.mvrgb_loss.record
    t.mvrgb_loss.record = lambda enc, g, T, ir, inb, cams, ci, nb, *a, **k: (
        pairs.append((ci, nb, k["offset"])), record(enc, g, T, ir, inb, cams, ci, nb, *a, **k))
    raster = Rasterizer(gpu, cfg.sh_degree)

    view_map = geometry_map_reader(gpu, raster, t.cams, ds)
    cam = lambda i: camera_of(ds, i)

    offsets = set()
    for step in range(3):
        params = gpu.upload(gpu.read(t.model.buf["params"], np.float32))
        n = t.model.n
        before = gpu.read(t.loss_sum, np.float32, 8)[MVRGB_LOSS_WORD]
        t.train_step(step)
        t.drain()
        got = gpu.read(t.loss_sum, np.float32, 8)[MVRGB_LOSS_WORD] - before
        ci, nb, offset = pairs[-1]
        offsets.add(offset)
        g0, T0 = view_map(params, n, ci)
        _, _, cost, ok = mvrgb_np(g0, T0, ds.cameras[ci].image, ds.cameras[nb].image, cam(ci), cam(nb), offset=offset)
        assert ok.sum() > 10, f"step {step}: only {ok.sum()} valid patches"
        print(f"step {step}: cameras {ci} -> {nb}, offset {offset}, {ok.sum()} patches, loss {got:.5f} "
              f"(NumPy {cost[ok].mean():.5f})")
        np.testing.assert_allclose(got, cost[ok].mean(), rtol=5e-3)
    assert len(offsets) == 3
    t.release()


def test_mvrgb_leaves_out_patches_costlier_than_max_cost(gpu):
    """A map tilted 25 degrees off the plane: with max_cost 0.05 the patches whose 1 - NCC
    reaches it are left out (the NumPy count and mean of those below it); with 2 none are."""
    rng = np.random.default_rng(4714)
    cams, images, plane = textured_views(rng)
    geom, T = ref_map(rng, cams, plane, tilt=np.radians(25))
    counts = []
    for max_cost in (0.05, 2.0):
        loss, count, _ = run_gpu(gpu, cams, images, geom, T, 1.0, max_cost=max_cost)
        _, _, cost, ok = mvrgb_np(geom, T, *images, *cams, max_cost=max_cost)
        assert abs(count - ok.sum()) <= 1
        np.testing.assert_allclose(loss, cost[ok].mean(), rtol=2e-3)
        counts.append(count)
    print("patches kept with max_cost 0.05 and 2:", counts)
    assert 10 < counts[0] < 0.8 * counts[1]
