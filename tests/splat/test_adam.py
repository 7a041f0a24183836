"""Adam kernel against a NumPy float64 implementation of Kingma & Ba 2015, Algorithm 1."""

import numpy as np

from spirula.engine.splat.param_layout import row_stride
from spirula.engine.splat.model import GaussianModel
from tests.splat.scenes import random_scene


def test_adam_matches_numpy(gpu):
    rng = np.random.default_rng(21)
    n = 300
    _, rows = random_scene(rng, n, degree=3)
    model = GaussianModel(gpu, rows, 3)
    lrs = dict(means=1e-3, scales=5e-3, quats=1e-3, opacities=5e-2, sh0=2.5e-3, shN=1.25e-4)
    model.set_learning_rates(**lrs)
    D = row_stride(3)
    lr_col = np.array([lrs["means"]] * 3 + [lrs["scales"]] * 3 + [lrs["quats"]] * 4 + [lrs["opacities"]]
                      + [lrs["sh0"]] * 3 + [lrs["shN"]] * (D - 14))
    p = rows.astype(np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    b1, b2, eps = 0.9, 0.999, 1e-15
    flags = gpu.zeros(16)
    grads = gpu.buffer(4 * model.capacity * D)
    bad = [(5, 0), (77, 13), (299, D - 1)]  # NaN, +Inf, -Inf at steps 1 and 2 (from 0)
    for t in range(1, 5):
        g = rng.normal(0, 1, (n, D)).astype(np.float32)
        pad = np.zeros((model.capacity, D), np.float32)
        pad[:n] = g
        if t in (2, 3):
            for (i, c), val in zip(bad, (np.nan, np.inf, -np.inf)):
                pad[i, c] = val
                g[i, c] = 0.0  # the guard: a non-finite gradient counts as 0
        grads.copy_from_numpy(pad.reshape(-1).view(np.uint8))
        enc = gpu.encoder()
        model.record_adam(enc, grads, flags=flags, step=t - 1)
        gpu.submit(enc)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g.astype(np.float64) ** 2
        p = p - lr_col * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    # flags: 6 non-finite values, last seen at step 2 (stored + 1), first at step 1
    w = gpu.read(flags, np.uint32, 4)
    assert w[1] == 6 and w[2] == 3 and 0xFFFFFFFF - int(w[3]) == 1, w
    got = model.rows()
    # float32 vs float64: a step moves a parameter by about lr (up to 0.05) times a ratio that
    # float32 gets to ~1e-5 relative; four steps stay within 1e-4 of the largest lr
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=5e-6)
    assert np.abs(got - rows).max() > 1e-3, "parameters did not move"
