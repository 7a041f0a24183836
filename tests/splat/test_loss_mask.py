"""The masked photometric loss (masks' "ignore" mode: the ground truth's alpha byte weighs
each pixel) against an independent float64 reference and finite differences.

Reference (written from the definition, not from the shader): with m = alpha / 255 per
pixel, x' = m x and y' = m y,
    L = (1 - lambda) mean(m |x - y|) + lambda mean(m (1 - SSIM(x', y')))
means over every pixel and channel (3N), SSIM by tests/splat/test_loss.py's zero-padded
reference. Masks mix masked-out blocks (a whole 16 x 16 tile and its neighbours' edges), kept
pixels and fractional weights. Tolerances as in test_loss.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.splat.loss import PhotometricLoss
from tests.splat.test_loss import (assert_grad_close, gpu, make_pair, ref_loss, ref_ssim_map,  # noqa: F401
                                   run_gpu, sample_entries)


def ref_loss_masked(x: np.ndarray, y: np.ndarray, m: np.ndarray, lam: float) -> float:
    """x, y [H, W, 3] float64; m [H, W] weights in [0, 1]."""
    mm = m[..., None]
    s = ref_ssim_map(mm * x, mm * y)
    n = x.size
    return float((1 - lam) * (mm * np.abs(x - y)).sum() / n + lam * (mm * (1 - s)).sum() / n)


def make_mask(rng, h, w) -> np.ndarray:
    """[H, W] uint8: a masked-out block over the first tile and beyond, a few random holes,
    a band of fractional weights, the rest kept."""
    a = np.full((h, w), 255, np.uint8)
    a[: min(h, 20), : min(w, 19)] = 0
    holes = rng.random((h, w)) < 0.1
    a[holes] = 0
    band = slice(h // 2, h // 2 + 3)
    a[band] = rng.integers(1, 255, a[band].shape)
    return a


@pytest.fixture(scope="module")
def masked_fn(gpu):  # noqa: F811
    return PhotometricLoss(gpu, masked=True)


def _pair(seed, hw, correlated):
    rng = np.random.default_rng(seed)
    x, gt8, y = make_pair(rng, *hw, correlated)
    gt8[..., 3] = make_mask(rng, *hw)
    return rng, x, gt8, y, gt8[..., 3].astype(np.float64) / 255.0


@pytest.mark.parametrize("hw,correlated,lam", [((23, 37), False, 0.2), ((48, 64), True, 0.2),
                                                ((37, 80), True, 0.6)])
def test_masked_loss_value_and_gradient(gpu, masked_fn, hw, correlated, lam):  # noqa: F811
    rng, x, gt8, y, m = _pair(4000 + hw[0] * hw[1] + int(correlated), hw, correlated)
    x64 = x.astype(np.float64)
    l_gpu, g = run_gpu(gpu, masked_fn, x, gt8, lam)
    l_ref = ref_loss_masked(x64, y, m, lam)
    assert abs(l_gpu - l_ref) <= 2e-6 + 1e-5 * abs(l_ref), (l_gpu, l_ref)
    assert abs(l_ref - ref_loss(x64, y, lam)) > 1e-3  # the mask matters on these inputs
    # central differences of the reference on kept pixels (near mask edges included)
    kept = np.argwhere((m[..., None] > 0).repeat(3, -1) & (np.abs(x64 - y) > 1e-3))
    idx = kept[rng.choice(len(kept), 30, replace=False)]
    g_fd = []
    for i in map(tuple, idx):
        xp, xm = x64.copy(), x64.copy()
        xp[i] += 1e-4
        xm[i] -= 1e-4
        g_fd.append((ref_loss_masked(xp, y, m, lam) - ref_loss_masked(xm, y, m, lam)) / 2e-4)
    assert_grad_close(g[tuple(idx.T)], np.array(g_fd))


def test_masked_pixels_get_zero_gradient_and_do_not_change_the_loss(gpu, masked_fn):  # noqa: F811
    """Ignore mode's promise: a masked-out pixel's render takes no part at all."""
    _, x, gt8, y, m = _pair(77, (48, 64), True)
    l0, g = run_gpu(gpu, masked_fn, x, gt8, 0.2)
    out = m == 0
    assert out.sum() > 400
    assert np.all(g[out] == 0.0)
    assert np.abs(g[~out]).max() > 0
    x2 = x.copy()
    x2[out] = np.random.default_rng(78).random((int(out.sum()), 3)).astype(np.float32)  # anything there
    l1, g1 = run_gpu(gpu, masked_fn, x2, gt8, 0.2)
    assert l1 == pytest.approx(l0, rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(g1, g, rtol=0, atol=1e-9)


def test_all_kept_mask_is_the_unmasked_loss(gpu, masked_fn):  # noqa: F811
    """Alpha 255 everywhere: the masked kernels give the unmasked loss and gradient."""
    rng = np.random.default_rng(12)
    x, gt8, y = make_pair(rng, 23, 37, True)
    gt8[..., 3] = 255
    l_m, g_m = run_gpu(gpu, masked_fn, x, gt8, 0.2)
    l_u, g_u = run_gpu(gpu, PhotometricLoss(gpu), x, gt8, 0.2)
    assert l_m == pytest.approx(l_u, rel=1e-6)
    np.testing.assert_allclose(g_m, g_u, rtol=1e-5, atol=1e-9)
