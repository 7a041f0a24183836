"""The training step's fused projection backward + Adam (project_backward_adam) against a
NumPy float64 Adam (Kingma & Ba 2015, Algorithm 1) applied to the gradients of the
stand-alone projection backward (which test_project_backward checks against finite
differences), on fresh random scenes, moments and screen-space gradients."""

import numpy as np
import pytest

from spirula.engine.splat.camera_table import camera_row
from spirula.engine.splat.param_layout import row_stride
from spirula.engine.splat.model import GaussianModel
from spirula.engine import device
from spirula.engine.device import dispatch_grid
from spirula.engine.splat.render import BWD_WG, pack_screen_grads
from tests.splat.scenes import random_camera, random_scene

LRS = dict(means=1e-3, scales=5e-3, quats=1e-3, opacities=5e-2, sh0=2.5e-3, shN=0.0)  # shN frozen


def lr_columns(D):
    return np.array([LRS["means"]] * 3 + [LRS["scales"]] * 3 + [LRS["quats"]] * 4 + [LRS["opacities"]]
                    + [LRS["sh0"]] * 3 + [LRS["shN"]] * (D - 14))


def bf16_ulp(x):
    """Spacing of bfloat16 numbers at |x| (8 significant bits)."""
    e = np.floor(np.log2(np.maximum(np.abs(x), 1e-38)))
    return 2.0 ** (e - 7)


def bf16_exact(x):
    """float32 values that bfloat16 holds exactly (low 16 bits cleared)."""
    return (np.asarray(x, np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)


class Scene:
    """A projected random scene with screen-space gradients, ready for either backward."""

    def __init__(self, gpu, rng, n=300, degree=3, width=120, height=90, antialias=False):
        """antialias: the kernels specialised with ANTIALIAS = 1 and a random 3D filter."""
        self.gpu, self.n, self.degree = gpu, n, degree
        self.aa = dict(filter3d=gpu.upload(rng.uniform(1e-4, 0.02, n).astype(np.float32))) if antialias else {}
        self.consts = dict(MAX_SH_DEGREE=3, **({"ANTIALIAS": 1} if antialias else {}))
        _, self.rows = random_scene(rng, n, degree=degree, max_degree=3, spread=0.6)
        self.rows[::7, 10] = -10.0  # opacity below 1/255: culled (Adam still steps them, with gradient 0)
        w2c, fx, fy, cx, cy = random_camera(rng, width, height, dist=3.0)
        self.cams = gpu.upload(camera_row(w2c, fx, fy, cx, cy, width, height)[None])
        params = gpu.upload(self.rows)
        b = {k: gpu.buffer(16 * n) for k in ["means2d", "conic_opac", "rgb", "depths", "radii", "tiles", "keys", "ids"]}
        gpu.kernel("project/project", "project_forward", **self.consts).dispatch(
            thread_count=[n, 1, 1], **self.aa, params=params, cams=self.cams, means2d=b["means2d"], conic_opac=b["conic_opac"],
            rgb=b["rgb"], depths=b["depths"], radii=b["radii"], tiles_touched=b["tiles"], depth_keys=b["keys"],
            depth_ids=b["ids"], n=n, cam_index=0, sh_degree=degree, tiles_x=8, tiles_y=6)
        self.b = b
        self.vis = gpu.read(b["radii"], np.int32, shape=(n, 2))[:, 0] > 0
        assert 0 < self.vis.sum() < n, "the scene must have visible and culled Gaussians"
        g_opacity = rng.normal(0, 1, n).astype(np.float32)
        # the guard: a visible Gaussian's opacity gradient always reaches its logit column
        # (an rgb gradient does not where the colour is clamped at 0)
        bad = self.bad = np.flatnonzero(self.vis)[:2]
        g_opacity[bad[0]] = np.nan
        g_opacity[bad[1]] = np.inf
        self.screen = dict(g_screen=gpu.upload(pack_screen_grads(
            g_rgb=rng.normal(0, 1, (n, 3)), g_means2d=rng.normal(0, 1, (n, 2)),
            g_conic=rng.normal(0, 1, (n, 3)) * 100, g_opacity=g_opacity)))
        self.isect_total = gpu.zeros(16)  # count 0: never overflowed

    def common(self, stats):
        return dict(thread_count=[self.n, 1, 1], cams=self.cams, radii=self.b["radii"],
                    conic_opac=self.b["conic_opac"], grad2d_sum=stats[0], vis_count=stats[1], n=self.n, cam_index=0,
                    sh_degree=self.degree, accumulate_stats=1, isect_total=self.isect_total,
                    isect_capacity=0xFFFFFFFF, **self.screen, **self.aa)

    def gradients(self):
        """The stand-alone backward's gradients [N, D] and statistic [N]."""
        gpu, D = self.gpu, row_stride(3)
        grads, stats = gpu.buffer(4 * self.n * D), (gpu.zeros(4 * self.n), gpu.zeros(4 * self.n))
        gpu.kernel("project/project_backward", "project_backward", **self.consts).dispatch(
            params=gpu.upload(self.rows), grads=grads, **self.common(stats))
        return gpu.read(grads, np.float32, shape=(self.n, D)), gpu.read(stats[0], np.float32, self.n)

    def fused_step(self, model, flags, step, **reg):
        """One project_backward_adam dispatch on ``model`` (``reg``: the MCMC regularisers of
        adam_args); returns the statistic [N]."""
        gpu = self.gpu
        stats = gpu.zeros(4 * self.n), gpu.zeros(4 * self.n)
        args = model.adam_args(flags=flags, step=step, seed=11, **reg)
        threads, groups_x = dispatch_grid(self.n, BWD_WG)
        common = {**self.common(stats), "thread_count": threads}
        gpu.kernel("project/project_backward", "project_backward_adam", **self.consts,
                   MOMENTS_BF16=int(args.pop("moments_bf16"))).dispatch(params=model.buf["params"], **args,
                                                                        groups_x=groups_x, **common)
        return gpu.read(stats[0], np.float32, self.n)


def reference_adam(p, m, v, g, lr, t, b1=0.9, b2=0.999, eps=1e-15):
    """float64 Adam step t (from 1); columns with lr 0 keep parameters and moments. The
    betas and 1 - beta are the float32 values the kernel holds (1 - 0.999 in float32 is
    1.3e-5 off the decimal value)."""
    g = np.where(np.isfinite(g), g, 0.0).astype(np.float64)
    f1, f2 = np.float32(b1), np.float32(b2)
    m1 = float(f1) * m + float(np.float32(1) - f1) * g
    v1 = float(f2) * v + float(np.float32(1) - f2) * g * g
    p1 = p - lr * (m1 / (1 - b1 ** t)) / (np.sqrt(v1 / (1 - b2 ** t)) + eps)
    frozen = np.broadcast_to(lr == 0, p.shape)
    return np.where(frozen, p, p1), np.where(frozen, m, m1), np.where(frozen, v, v1)


@pytest.mark.parametrize("bf16,groups_x,reg,aa", [(False, None, False, False), (True, None, False, False),
                                                   (False, 2, False, False), (False, None, True, False),
                                                   (False, None, False, True), (False, None, "flatten", False)],
                         ids=["fp32-moments", "bf16-moments", "2d-grid", "mcmc-regularisers", "antialias",
                              "flatten"])
def test_fused_backward_adam_matches_numpy(gpu, bf16, groups_x, reg, aa, monkeypatch, rng):
    """groups_x: workgroups per grid row forced to 2 (300 Gaussians: 5 workgroups in 3 rows,
    the last row half empty), as a dispatch of more than 65,535 workgroups would be laid out.
    aa: both backwards anti-aliased (test_antialias.py checks project_backward's).
    reg: MCMC's L1 regularisers, whose gradients reach every Gaussian, culled ones too:
    d/d logit of r_o * mean(sigmoid) is r_o / N * s (1 - s), d/d log-scale of r_s *
    mean(exp) is r_s / (3 N) * exp (scaled up here to the size of the image gradients).
    flatten: the same and the geometry phase's flattening, d/d log-scale of r_f * mean_i
    min_k exp(log_scale_ik) is r_f / N * exp on each row's shortest axis only."""
    if groups_x:
        monkeypatch.setattr(device, "MAX_DISPATCH_GROUPS", groups_x)
        assert dispatch_grid(300, BWD_WG) == ([128, 3, 1], 2)
    sc = Scene(gpu, rng, antialias=aa)
    n, D = sc.n, row_stride(3)
    g, stat = sc.gradients()
    nonfinite = int((~np.isfinite(g)).sum())
    assert np.all(g[~sc.vis] == 0)
    if aa:  # the opacity factors reach the geometry: the two rows' geometry turns non-finite too
        assert nonfinite > 2 and np.isfinite(np.delete(g, sc.bad, axis=0)).all()
    else:
        assert nonfinite == 2  # the two injected opacity gradients
    m0 = rng.normal(0, 1e-2, (n, D)).astype(np.float32)
    v0 = rng.uniform(1e-6, 1e-2, (n, D)).astype(np.float32)
    if bf16:
        m0, v0 = bf16_exact(m0), bf16_exact(v0)
    model = GaussianModel(gpu, sc.rows, 3, moments_bf16=bf16)
    model.load_state_dict(dict(params=sc.rows, exp_avg=m0, exp_avg_sq=v0, grad2d_sum=np.zeros(n, np.float32),
                               vis_count=np.zeros(n, np.float32), adam_step=4))
    model.set_learning_rates(**LRS)
    flags = gpu.zeros(16)
    regs = dict(reg_opacity=float(rng.uniform(1, 5) * n), reg_scale=float(rng.uniform(1, 5) * 3 * n)) if reg else {}
    if reg == "flatten":
        regs["reg_flat"] = float(rng.uniform(1, 5) * n)
    got_stat = sc.fused_step(model, flags, step=41, **regs)

    lr = lr_columns(D)
    if reg:
        rows = sc.rows.astype(np.float64)
        sig = 1.0 / (1.0 + np.exp(-rows[:, 10]))
        g = np.where(np.isfinite(g), g, 0.0)  # the guard zeroes a NaN before the regulariser adds
        reg_part = np.zeros_like(g)
        reg_part[:, 10] = regs["reg_opacity"] / n * sig * (1 - sig)
        reg_part[:, 3:6] = regs["reg_scale"] / (3 * n) * np.exp(rows[:, 3:6])
        if reg == "flatten":
            k = np.argmin(rows[:, 3:6], axis=1)
            reg_part[np.arange(n), 3 + k] += regs["reg_flat"] / n * np.exp(rows[np.arange(n), 3 + k])
        parts = np.abs(g) + reg_part  # the float32 sum's error scales with its parts, not with g
        g = g + reg_part
        assert np.all(g[~sc.vis][:, 10] != 0), "culled Gaussians get the regulariser's gradient"
    p, m, v = reference_adam(sc.rows.astype(np.float64), m0.astype(np.float64), v0.astype(np.float64), g, lr, t=5)
    st = model.state_dict()
    # parameters step with the exact moments (rounding to bfloat16 happens after the update)
    np.testing.assert_allclose(st["params"], p, rtol=1e-5, atol=2e-6)
    assert np.abs(st["params"] - sc.rows).max() > 1e-3, "parameters did not move"
    np.testing.assert_allclose(got_stat, stat, rtol=1e-6)
    w = gpu.read(flags, np.uint32, 4)
    assert w[1] == nonfinite and w[2] == 42 and 0xFFFFFFFF - int(w[3]) == 41, w
    frozen = np.broadcast_to(lr == 0, (n, D))
    g0 = np.where(np.isfinite(g), g, 0.0).astype(np.float64)
    # the regularisers' float32 sigmoid, exp and sum: ~1e-6 of the gradient's parts
    g_err = 1e-6 * parts if reg else 0.0
    for name, want, terms, from_g in (("exp_avg", m, 0.9 * np.abs(m0) + 0.1 * np.abs(g0), 0.1 * g_err),
                                      ("exp_avg_sq", v, 0.999 * v0 + 0.001 * g0 ** 2, 0.002 * (np.abs(g0) + g_err) * g_err)):
        got = st[name].astype(np.float64)
        np.testing.assert_array_equal(got[frozen], want[frozen])  # frozen: untouched
        if not bf16:  # float32 rounding of the two terms (m can cancel to far below them)
            assert np.all(np.abs(got - want) <= 8 * 2.0 ** -24 * terms + from_g + 1e-30)
            continue
        # stochastic rounding: one of the two bfloat16 neighbours of the exact value...
        err = (got - want)[~frozen] / bf16_ulp(want[~frozen])
        assert np.all(np.abs(err) < 1.0), np.abs(err).max()
        # ...unbiased (the mean rounding error of ~5,000 values is ~0 +- 0.004 ulp)
        assert abs(err.mean()) < 0.02, err.mean()
        assert np.all(got == bf16_exact(got)), "stored values are bfloat16"


def test_bf16_moments_are_rounded_stochastically_not_to_nearest(gpu, rng):
    """Adam's second moment moves by (1 - beta2) = 0.1% of (g^2 - v) per step, below
    bfloat16's resolution: round-to-nearest would freeze it, stochastic rounding follows
    the exact value on average. Many steps of a constant gradient on a small moment."""
    sc = Scene(gpu, rng, n=128)
    g, _ = sc.gradients()
    n, D = sc.n, row_stride(3)
    v0 = bf16_exact(np.full((n, D), 1.0, np.float32))
    model = GaussianModel(gpu, sc.rows, 3, moments_bf16=True)
    model.load_state_dict(dict(params=sc.rows, exp_avg=np.zeros((n, D), np.float32), exp_avg_sq=v0,
                               grad2d_sum=np.zeros(n, np.float32), vis_count=np.zeros(n, np.float32), adam_step=0))
    model.set_learning_rates(**{k: 0.0 if k != "opacities" else 1e-9 for k in LRS})  # only the opacity column steps
    steps = 200
    for t in range(steps):
        sc.fused_step(model, gpu.zeros(16), step=t)
    got = model.state_dict()["exp_avg_sq"][:, 10].astype(np.float64)
    gop = np.where(np.isfinite(g[:, 10]), g[:, 10], 0.0).astype(np.float64)
    want = 0.999 ** steps * 1.0 + (1 - 0.999 ** steps) * gop ** 2  # the exact recurrence
    # the exact values moved by ~0.18; round-to-nearest would have kept 1.0
    assert abs(want.mean() - 1.0) > 0.1
    # each step adds an independent rounding error (~0.3 ulp = 0.001 rms): a random walk
    # of ~0.017 rms after 200 steps, zero-mean (mean of 128 values: 0 +- 0.0015)
    err = got - want
    assert np.abs(err).mean() < 0.04 and abs(err.mean()) < 0.008, (np.abs(err).mean(), err.mean())
