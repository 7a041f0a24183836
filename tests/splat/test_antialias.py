"""Anti-aliasing (Mip-Splatting, TrainConfig.antialias): the 3D smoothing filter kernel
against its closed form, the anti-aliased projection against the float64 reference, its
backward against finite differences, the PLY bake, and a short real run on book."""

import numpy as np
import pytest

from spirula.engine.splat.antialias import SmoothingFilter, bake_smoothing_filter
from spirula.engine.splat.camera_table import View, camera_row
from spirula.engine.splat.param_layout import OFF_OPACITY, OFF_SCALE, row_stride
from spirula.engine.splat.model import GaussianModel
from spirula.engine.splat.render import pack_screen_grads
from tests.splat import reference as ref
from tests.splat.scenes import random_camera, random_scene

PROJ_BUFS = ["means2d", "conic_opac", "rgb", "depths", "radii", "tiles", "keys", "ids"]


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def project_gpu(gpu, rows, cam, width, height, degree, filter3d):
    """project_forward (ANTIALIAS = 1 with a filter, classic without); host arrays."""
    n = len(rows)
    b = {k: gpu.buffer(16 * n) for k in PROJ_BUFS}
    view = View(0, width, height)
    extra = {} if filter3d is None else {"filter3d": gpu.upload(np.asarray(filter3d, np.float32))}
    gpu.kernel("project/project", "project_forward", MAX_SH_DEGREE=3, **({"ANTIALIAS": 1} if extra else {})).dispatch(
        thread_count=[n, 1, 1], params=gpu.upload(rows), cams=gpu.upload(camera_row(*cam, width, height)[None]),
        means2d=b["means2d"], conic_opac=b["conic_opac"], rgb=b["rgb"], depths=b["depths"], radii=b["radii"],
        tiles_touched=b["tiles"], depth_keys=b["keys"], depth_ids=b["ids"], n=n, cam_index=0, sh_degree=degree,
        tiles_x=view.tiles_x, tiles_y=view.tiles_y, **extra)
    return {"radii": gpu.read(b["radii"], np.int32, shape=(n, 2)), "conic_opac": gpu.read(b["conic_opac"], np.float32,
            shape=(n, 4)), "means2d": gpu.read(b["means2d"], np.float32, shape=(n, 2)), "bufs": b}


def random_filter(rng, n):
    """3D filter variances of the size of the Gaussians' own (s^2 of e^-6 .. e^-3)."""
    return np.exp(rng.uniform(np.log(1e-4), np.log(0.05), n)).astype(np.float32)


def test_filter3d_matches_closed_form(gpu, rng):
    """Half the centres near the origin (every camera sees them), half far out in random
    directions (most unseen: they take the largest filter of the seen ones); cameras of
    the table outside the training list must not count."""
    n = 4000
    _, rows = random_scene(rng, n)
    far = rng.normal(0, 1, (n // 2, 3))
    rows[n // 2:, :3] = 40.0 * far / np.linalg.norm(far, axis=1, keepdims=True)
    sizes = [(97, 61), (64, 80), (120, 90), (77, 77), (50, 40), (88, 66)]
    cams = [(*random_camera(rng, w, h, dist=rng.uniform(3, 6)), w, h) for w, h in sizes]
    table = np.stack([camera_row(w2c, fx, fy, cx, cy, w, h) for w2c, fx, fy, cx, cy, w, h in cams])
    train = [0, 2, 3, 5]
    model = GaussianModel(gpu, rows, 3)
    filt = SmoothingFilter(gpu, model, gpu.upload(table), train)
    filt.update()
    got = filt.read().astype(np.float64)
    means = rows[:, :3].astype(np.float64)
    want, seen = ref.smoothing_filter(means, [cams[i] for i in train], return_seen=True)
    assert not np.allclose(want, ref.smoothing_filter(means, cams)), "the test cameras would change it"
    assert 0.2 * n < (~seen).sum() < 0.5 * n, (~seen).sum()
    # a centre within float32 rounding of an image's widened edge may flip: a few at most
    close = np.isclose(got, want, rtol=1e-5, atol=0)
    assert close.mean() > 0.998, (~close).sum()
    assert got.min() > 0 and np.isclose(got.max(), want.max(), rtol=1e-5)
    assert np.all(got[~seen & close] == got.max())  # the unseen: the largest filter of the seen
    # no training camera sees anything (all centres behind camera 0): every filter is 0
    r = np.asarray(cams[0][0])[:3, :3]
    behind = -r.T @ np.asarray(cams[0][0])[:3, 3] - 5.0 * r[2]
    rows[:, :3] = behind + rng.normal(0, 0.5, (n, 3))
    f2 = SmoothingFilter(gpu, GaussianModel(gpu, rows, 3), gpu.upload(table), [0])
    f2.update()
    assert np.all(f2.read() == 0)


@pytest.mark.parametrize("degree", [0, 3])
def test_project_forward_antialias_matches_reference(gpu, degree, rng):
    n, width, height = 3000, 97, 61
    f, rows = random_scene(rng, n, degree=degree, max_degree=3)
    cam = random_camera(rng, width, height)
    filt = random_filter(rng, n)
    got = project_gpu(gpu, rows, cam, width, height, degree, filt)
    r = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], *cam, width, height, degree,
                    filter3d=filt.astype(np.float64))
    classic = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], *cam, width, height, degree)
    vis = r["radii"][:, 0] > 0
    gv = got["radii"][:, 0] > 0
    assert np.mean(gv == vis) > 0.995 and vis.sum() > n // 4
    both = vis & gv
    # the filters change what is rendered: opacity down, footprint up
    assert np.all(r["opacities"][both] < classic["opacities"][both])
    assert np.all(r["conics"][both, 0] <= classic["conics"][both, 0])  # cov2d grows by f T T^T
    assert np.median(r["conics"][both, 0] / classic["conics"][both, 0]) < 0.95
    co = got["conic_opac"]
    np.testing.assert_allclose(co[both, :3], r["conics"][both], rtol=2e-3, atol=1e-5 * np.abs(r["conics"][both]).max())
    # rho2 = sqrt(det / det_blur): float32 cancellation in det of thin splats
    np.testing.assert_allclose(co[both, 3], r["opacities"][both], rtol=2e-3, atol=1e-5)
    assert np.mean(np.abs(got["radii"][both] - r["radii"][both]) <= 1) == 1.0


@pytest.mark.parametrize("opacity_only", [False, True], ids=["all", "opacity-only"])
def test_project_backward_antialias_matches_finite_differences(gpu, opacity_only, rng):
    """As test_project_backward.py, through the anti-aliased projection: L = weighted sum of
    means2d, conics, opacities (now o rho2 rho3) and colours; the 3D filter is a constant.
    opacity_only: only the opacity has an upstream gradient, on small splats (rho2 well
    below 1), so the geometry's gradients are those of the two opacity factors alone."""
    degree, n, width, height = 3, 40, 120, 90
    f, rows = random_scene(rng, n, degree=degree, max_degree=3, spread=0.6,
                           **(dict(scale=(-5.0, -3.5), opacity=(1.0, 4.0)) if opacity_only else {}))
    cam = random_camera(rng, width, height, dist=3.0)
    filt = random_filter(rng, n) * (0.01 if opacity_only else 1.0)  # small splats, small filters
    args = (*cam, width, height, degree)
    r0 = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], *args, filter3d=filt)
    vis = r0["radii"][:, 0] > 0
    assert vis.sum() > n // 2
    w2, wc, wo, wr = (rng.normal(0, 1, (n, 2)), rng.normal(0, 1, (n, 3)) * 100, rng.normal(0, 1, n) * 10,
                      rng.normal(0, 1, (n, 3)))
    if opacity_only:
        w2, wc, wr = 0 * w2, 0 * wc, 0 * wr
        rho2 = r0["opacities"][vis] / sigmoid(f["logits"][vis]) / np.sqrt(np.prod(
            np.exp(2 * f["log_scales"][vis]) / (np.exp(2 * f["log_scales"][vis]) + filt[vis, None]), axis=1))
        assert np.median(rho2) < 0.85, np.median(rho2)
    assert not np.any((r0["rgb"][vis] > 0) & (r0["rgb"][vis] < 1e-4))

    def loss(ff):
        r = ref.project(ff["means"], ff["log_scales"], ff["quats"], ff["logits"], ff["sh"], *args, footprint=False,
                        filter3d=filt)
        return float(np.sum(vis[:, None] * (w2 * r["means2d"])) + np.sum(vis[:, None] * wc * r["conics"])
                     + np.sum(vis * wo * r["opacities"]) + np.sum(vis[:, None] * wr * r["rgb"]))

    fwd = project_gpu(gpu, rows, cam, width, height, degree, filt)
    assert ((fwd["radii"][:, 0] > 0) == vis).all()
    D = row_stride(3)
    grads = gpu.buffer(4 * n * D)
    up = lambda a: a * (vis[:, None] if a.ndim > 1 else vis)
    b = fwd["bufs"]
    gpu.kernel("project/project_backward", "project_backward", MAX_SH_DEGREE=3, ANTIALIAS=1).dispatch(
        thread_count=[n, 1, 1], params=gpu.upload(rows), cams=gpu.upload(camera_row(*cam, width, height)[None]),
        radii=b["radii"], conic_opac=b["conic_opac"], filter3d=gpu.upload(filt),
        g_screen=gpu.upload(pack_screen_grads(g_rgb=up(wr), g_means2d=up(w2), g_conic=up(wc), g_opacity=up(wo))),
        grads=grads, grad2d_sum=gpu.zeros(4 * n), vis_count=gpu.zeros(4 * n), isect_total=gpu.zeros(16),
        isect_capacity=0xFFFFFFFF, n=n, cam_index=0, sh_degree=degree, accumulate_stats=1)
    g = gpu.read(grads, np.float32, shape=(n, D))
    assert np.all(g[~vis] == 0)
    groups = {"means": (0, 3), "log_scales": (3, 6), "quats": (6, 10), "logits": (10, 11), "sh": (11, 11 + 48)}
    if opacity_only:
        del groups["sh"]
    picked = np.flatnonzero(vis)[:12]
    for key, (c0, c1) in groups.items():
        arr = f[key].reshape(n, -1)
        num, ana = [], []
        for i in picked:
            for c in range(c1 - c0):
                old = arr[i, c]
                arr[i, c] = old + 1e-6
                lp = loss(f)
                arr[i, c] = old - 1e-6
                lm = loss(f)
                arr[i, c] = old
                num.append((lp - lm) / 2e-6)
                ana.append(g[i, c0 + c])
        num, ana = np.array(num), np.array(ana)
        scale = np.abs(num).max()
        assert scale > 1e-6, key
        np.testing.assert_allclose(ana, num, atol=1e-2 * scale, rtol=1e-2, err_msg=key)
    # the opacity logit's gradient is the filters' share of the classic one: wo rho o (1 - o)
    o = sigmoid(f["logits"][picked])
    rho = r0["opacities"][picked] / o
    np.testing.assert_allclose(g[picked, OFF_OPACITY], wo[picked] * rho * o * (1 - o), rtol=2e-3)


def test_bake_renders_what_was_trained(gpu, rng):
    """Rows baked with the 3D filter f, projected with the anti-aliased kernel and a zero
    filter, give the same splats as the raw rows with f; f = 0 changes nothing; extreme
    logits and tiny scales stay finite and match float64 closed forms."""
    n, width, height = 2000, 97, 61
    _, rows = random_scene(rng, n, degree=3, max_degree=3)
    cam = random_camera(rng, width, height)
    filt = random_filter(rng, n)
    baked = bake_smoothing_filter(rows, filt)
    a = project_gpu(gpu, rows, cam, width, height, 3, filt)
    b = project_gpu(gpu, baked, cam, width, height, 3, np.zeros(n, np.float32))
    vis = (a["radii"][:, 0] > 0) & (b["radii"][:, 0] > 0)
    assert vis.sum() > n // 4 and np.mean((a["radii"][:, 0] > 0) == (b["radii"][:, 0] > 0)) > 0.995
    np.testing.assert_allclose(b["conic_opac"][vis], a["conic_opac"][vis], rtol=2e-3, atol=1e-6)
    np.testing.assert_array_equal(bake_smoothing_filter(rows, np.zeros(n)), rows)
    # closed forms in float64, far from the GPU's range
    logs = np.array([[-30.0, -1.0, 2.0], [0.0, 0.0, 0.0], [-5.0, -6.0, -7.0]])
    logit = np.array([40.0, -30.0, 3.0])
    f = np.array([1e-3, 0.5, 1e-9])
    r = np.zeros((3, row_stride(0)), np.float32)
    r[:, OFF_SCALE:OFF_SCALE + 3], r[:, OFF_OPACITY] = logs, logit
    out = bake_smoothing_filter(r, f).astype(np.float64)
    s2 = np.exp(2 * r[:, OFF_SCALE:OFF_SCALE + 3].astype(np.float64))
    np.testing.assert_allclose(np.exp(2 * out[:, OFF_SCALE:OFF_SCALE + 3]), s2 + f[:, None], rtol=2e-6)
    rho = np.sqrt(s2.prod(1) / (s2 + f[:, None]).prod(1))
    want = sigmoid(r[:, OFF_OPACITY]) * rho
    np.testing.assert_allclose(sigmoid(out[:, OFF_OPACITY]), want, rtol=1e-5)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("strategy", ["adc", "mcmc"])
def test_short_antialiased_run_on_book_trains_and_exports_what_it_trained(gpu, shared_data, tmp_path, strategy, rng):
    """A short real run with --antialias (200 steps at 96 px): the loss falls and held-out PSNR rises; the filter
    is positive and follows the refines (the model grows); the exported PLY (3D filter baked
    in) rendered with a zero 3D filter is the trainer's own anti-aliased render."""
    from spirula.engine.config import TrainConfig
    from spirula.engine.ingest import load_dataset
    from spirula.engine.io.ply import read_ply
    from spirula.engine.splat.evaluate import evaluate
    from spirula.engine.splat.param_layout import pack
    from spirula.engine.splat.camera_table import View
    from spirula.engine.splat.render import Rasterizer
    from spirula.engine.splat.trainer import Trainer
    from spirula.engine.jobs.train import export_ply

    ds = load_dataset(shared_data / "book", 96)
    train, test = ds.split(8)
    cfg = TrainConfig(steps=200, seed=int(rng.integers(1000)), strategy=strategy, antialias=True,
                      mcmc_budget=1000, densify_from=50, densify_interval=50, log_interval=50, checkpoint_every=0)
    t = Trainer(gpu, ds, train, cfg)
    start = evaluate(t, test)["psnr"]
    t.train()
    end = evaluate(t, test)["psnr"]
    losses = [h["loss"] for h in t.state.history]
    assert end > start + (3.0 if strategy == "adc" else 1.0), (start, end)  # MCMC starts slower (test_mcmc.py)
    assert losses[-1] < (0.8 if strategy == "adc" else 0.95) * losses[0], losses
    assert t.model.n > 699  # book's SfM points: the filter was resized and recomputed with the model
    f = t.filter.read()
    assert np.all(f > 0) and np.isfinite(f).all()
    # a checkpoint keeps the filter in force (it is recomputed only on schedule)
    from spirula.engine import checkpoint
    from spirula.engine.config import RunConfig

    checkpoint.save(tmp_path / "c.npz", t, RunConfig(train=cfg), checkpoint.dataset_identity(ds, train))
    t2 = Trainer(gpu, ds, train, cfg)
    checkpoint.restore(t2, checkpoint.load(tmp_path / "c.npz"))
    np.testing.assert_array_equal(t2.filter.read(), f)
    del t2
    # the baked PLY through the anti-aliased projection with no 3D filter of its own
    path = tmp_path / "splat.ply"
    count = export_ply(t, path)
    g = read_ply(path)
    assert count == len(g) == t.model.n
    rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, cfg.sh_degree)
    raster = Rasterizer(gpu, cfg.sh_degree)
    i = test[0]
    cam = ds.cameras[i]
    baked = raster.render(gpu.upload(rows), len(rows), t.cams, View(i, cam.width, cam.height), t.sh_degree_at(t.state.step),
                          filter3d=gpu.zeros(4 * len(rows)))
    own = t.render(i)
    assert np.abs(baked - own).max() < 2e-3, np.abs(baked - own).max()
    classic = raster.render(gpu.upload(rows), len(rows), t.cams, View(i, cam.width, cam.height),
                            t.sh_degree_at(t.state.step))
    assert np.abs(classic - own).mean() > 10 * np.abs(baked - own).mean()  # the 2D filter is not a no-op
