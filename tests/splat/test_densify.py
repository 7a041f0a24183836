"""Adaptive density control on the GPU against the 3DGS rules computed in NumPy."""

import numpy as np

from engine.splat.layout import OFF_OPACITY, OFF_SCALE, row_stride
from engine.splat.model import GaussianModel
from tests.splat.scenes import random_scene


def test_densify_clone_split_prune(gpu):
    rng = np.random.default_rng(11)
    n = 5000
    _, rows = random_scene(rng, n, degree=3, scale=(-4.0, -1.0), opacity=(-6.0, 3.0))
    model = GaussianModel(gpu, rows, 3)
    grad_sum = rng.uniform(0, 4e-4, n).astype(np.float32)
    counts = rng.integers(0, 4, n).astype(np.float32)
    model.buf["grad2d_sum"].copy_from_numpy(np.pad(grad_sum, (0, model.capacity - n)).view(np.uint8))
    model.buf["vis_count"].copy_from_numpy(np.pad(counts, (0, model.capacity - n)).view(np.uint8))
    moments = rng.normal(0, 1, rows.shape).astype(np.float32)
    model.buf["exp_avg"].copy_from_numpy(np.pad(moments, ((0, model.capacity - n), (0, 0))).reshape(-1).view(np.uint8))
    thr, clone_scale, prune_op, prune_scale = 2e-4, 0.1, 0.005, 0.3
    before, after = model.densify(thr, clone_scale, prune_op, prune_scale, max_gaussians=10**7, seed=5)

    # independent expectation
    op = 1 / (1 + np.exp(-rows[:, OFF_OPACITY].astype(np.float64)))
    smax = np.exp(rows[:, OFF_SCALE:OFF_SCALE + 3].astype(np.float64).max(1))
    avg = np.where(counts > 0, grad_sum / np.maximum(counts, 1), 0)
    grow = avg > thr
    clone = grow & (smax <= clone_scale)
    split = grow & (smax > clone_scale)
    # 3DGS prunes after growing: split children (scales / 1.6) are judged, not the parent
    prune = (op < prune_op) | (np.where(split, smax / 1.6, smax) > prune_scale)
    keep = ~prune
    copies = np.where(prune, 0, np.where(clone | split, 2, 1))
    assert before == n and after == copies.sum()
    assert clone[keep].sum() > 50 and split[keep].sum() > 50 and prune.sum() > 50, "test scene must exercise all cases"
    rescued = split & (smax > prune_scale) & (smax / 1.6 <= prune_scale) & (op >= prune_op)
    assert rescued.sum() > 10, "test scene must have too-large parents whose split children survive"

    out = model.rows()
    D = row_stride(3)
    avg_out = gpu.read(model.buf["exp_avg"], np.float32, shape=(after, D))
    dst = np.concatenate([[0], np.cumsum(copies)[:-1]])
    plain = keep & ~clone & ~split
    np.testing.assert_array_equal(out[dst[plain]], rows[plain])
    np.testing.assert_array_equal(avg_out[dst[plain]], moments[plain])
    c = keep & clone
    np.testing.assert_array_equal(out[dst[c]], rows[c])
    np.testing.assert_array_equal(out[dst[c] + 1], rows[c])
    np.testing.assert_array_equal(avg_out[dst[c]], moments[c])
    assert np.all(avg_out[dst[c] + 1] == 0)
    s = keep & split
    for k in (0, 1):
        child = out[dst[s] + k]
        np.testing.assert_allclose(child[:, OFF_SCALE:OFF_SCALE + 3], rows[s, OFF_SCALE:OFF_SCALE + 3] - np.log(1.6), atol=1e-5)
        np.testing.assert_array_equal(child[:, OFF_OPACITY:], rows[s, OFF_OPACITY:])
        assert np.all(avg_out[dst[s] + k] == 0)
    # split children are drawn from N(mean, Sigma): offsets in units of the parent's scales
    offs = out[dst[s], :3] - rows[s, :3]
    assert np.all(np.linalg.norm(offs, axis=1) < 6 * smax[s])
    assert np.any(out[dst[s], :3] != out[dst[s] + 1, :3])
    # statistics are reset
    assert np.all(gpu.read(model.buf["vis_count"], np.float32, after) == 0)
