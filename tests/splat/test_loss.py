"""GPU photometric loss (L1 + D-SSIM) and the evaluation metrics against a float64 reference.

The reference here is independent of the engine: a direct 2D zero-padded convolution
(scipy.signal.convolve2d, 'same', fill 0) with the 11x11 Gaussian window (sigma 1.5) built
in this file, SSIM per channel as in Wang et al. 2004 with C1 = 0.01^2, C2 = 0.03^2, and the
3DGS loss L = (1 - lambda) mean|x - y| + lambda (1 - mean SSIM) (Kerbl et al. 2023, eq. 7).

Tolerances (float32 GPU vs float64 reference):
  loss value     |L_gpu - L_ref| <= 2e-6 + 1e-5 |L_ref|
  gradient       |g_gpu - g_fd| <= 1e-4 max|g_fd| + 1e-4 |g_fd|  (central differences, h = 1e-4;
                 entries within 1e-3 of the L1 kink x == y are not sampled)
                 (measured on lavapipe: loss rel. error <= 4e-7, gradient <= 2e-6 of max|g|)
  metrics.ssim   1e-12 (both float64); GPU mean SSIM 1e-5, GPU PSNR 1e-3 dB.

The kernels work on 16 x 16 pixel tiles with a 5-pixel halo; the sizes below include
images smaller than a tile, exact multiples, one pixel past a tile, odd sizes and widths
that are a multiple of 16 but not of 32.
Besides finite differences on sampled entries, every entry of the gradient is compared
with an analytic float64 gradient (ref_grad), itself checked against finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import convolve2d

from spirula.engine.device import get_gpu
from spirula.engine.splat import metrics
from spirula.engine.splat.loss import PhotometricLoss

# ---- independent float64 reference -----------------------------------------------------


def _window2d() -> np.ndarray:
    d = np.arange(-5, 6, dtype=np.float64)
    g = np.exp(-d * d / (2 * 1.5 ** 2))
    w = np.outer(g, g)
    return w / w.sum()


_W2 = _window2d()


def _blur(img: np.ndarray) -> np.ndarray:
    return np.stack([convolve2d(img[..., c], _W2, mode="same", boundary="fill", fillvalue=0.0)
                     for c in range(img.shape[2])], axis=-1)


def ref_ssim_map(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    mx, my = _blur(x), _blur(y)
    sxx = _blur(x * x) - mx ** 2
    syy = _blur(y * y) - my ** 2
    sxy = _blur(x * y) - mx * my
    return (2 * mx * my + c1) * (2 * sxy + c2) / ((mx ** 2 + my ** 2 + c1) * (sxx + syy + c2))


def ref_loss(x: np.ndarray, y: np.ndarray, lam: float) -> float:
    return float((1 - lam) * np.abs(x - y).mean() + lam * (1 - ref_ssim_map(x, y).mean()))


def ref_grad(x: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """dL/dx of ref_loss, float64, every entry: quotient rule on the SSIM map in terms of the
    blurred moments, then the adjoint of the zero-padded blur (the window is symmetric, so
    the adjoint is the same convolution)."""
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    n = x.size
    mx, my = _blur(x), _blur(y)
    exx, eyy, exy = _blur(x * x), _blur(y * y), _blur(x * y)
    num_l, num_c = 2 * mx * my + c1, 2 * (exy - mx * my) + c2
    den_l, den_c = mx ** 2 + my ** 2 + c1, (exx - mx ** 2) + (eyy - my ** 2) + c2
    s = num_l * num_c / (den_l * den_c)
    # d num_l/dmx = 2 my, d num_c/dmx = -2 my, d den_l/dmx = 2 mx, d den_c/dmx = -2 mx;
    # d num_c/dexy = 2, d den_c/dexx = 1
    ds_dmx = (2 * my * num_c - 2 * my * num_l) / (den_l * den_c) - s * (2 * mx * den_c - 2 * mx * den_l) / (den_l * den_c)
    ds_dexx = -s / den_c
    ds_dexy = 2 * num_l / (den_l * den_c)
    dssim = _blur(ds_dmx) + 2 * x * _blur(ds_dexx) + y * _blur(ds_dexy)
    return -lam / n * dssim + (1 - lam) * np.sign(x - y) / n


# ---- helpers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu():
    return get_gpu()


@pytest.fixture(scope="module")
def loss_fn(gpu):
    return PhotometricLoss(gpu)


def make_pair(rng, h, w, correlated):
    """render float32 [H,W,3] in [0,1]; gt uint8 [H,W,4] (random alpha) and its float64 RGB."""
    if correlated:  # a render close to its target: SSIM near 1 in places, mixed signs of x - y
        base = rng.random((h, w, 3))
        gt8 = np.concatenate([np.round(base * 255), rng.integers(0, 256, (h, w, 1))], -1).astype(np.uint8)
        x = np.clip(base + rng.normal(0.0, 0.05, base.shape), 0.0, 1.0).astype(np.float32)
    else:
        gt8 = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
        x = rng.random((h, w, 3)).astype(np.float32)
    y = gt8[..., :3].astype(np.float64) / 255.0
    return x, gt8, y


def run_gpu(gpu, loss_fn, x, gt8, lam, repeats=1):
    h, w = x.shape[:2]
    packed = np.ascontiguousarray(gt8).view(np.uint32).reshape(h, w)
    rb, gb = gpu.upload(x), gpu.upload(packed)
    grad = gpu.upload(np.full(x.shape, 123.0, np.float32))  # garbage: must be overwritten
    ls = gpu.zeros(16)
    enc = gpu.encoder()
    for _ in range(repeats):
        loss_fn.record(enc, rb, gb, w, h, grad, ls, lambda_dssim=lam)
    gpu.submit(enc)
    return float(gpu.read(ls, np.float32, 1)[0]), gpu.read(grad, np.float32, shape=x.shape).astype(np.float64)


def fd_grad(x, y, lam, idx, h=1e-4):
    x = x.astype(np.float64).copy()
    out = []
    for i in idx:
        i = tuple(i)
        v = x[i]
        x[i] = v + h
        lp = ref_loss(x, y, lam)
        x[i] = v - h
        lm = ref_loss(x, y, lam)
        x[i] = v
        out.append((lp - lm) / (2 * h))
    return np.array(out)


def sample_entries(rng, x, y, n):
    """n (row, col, channel) indices away from the L1 kink; the 4 corners are always in."""
    h, w = x.shape[:2]
    corners = [(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1)]
    picks = []
    for r, c in corners:
        ch = int(rng.integers(3))
        if abs(x[r, c, ch] - y[r, c, ch]) > 1e-3:
            picks.append((r, c, ch))
    while len(picks) < n:
        i = (int(rng.integers(h)), int(rng.integers(w)), int(rng.integers(3)))
        if abs(x[i] - y[i]) > 1e-3 and i not in picks:
            picks.append(i)
    return np.array(picks)


def assert_grad_close(g_gpu, g_fd):
    err = np.abs(g_gpu - g_fd)
    tol = 1e-4 * np.abs(g_fd).max() + 1e-4 * np.abs(g_fd)
    worst = np.argmax(err / tol)
    assert np.all(err <= tol), f"worst entry {worst}: gpu {g_gpu[worst]:.6e} fd {g_fd[worst]:.6e}"


# ---- loss ------------------------------------------------------------------------------

# (H, W): partial tiles, exact tiles, tiny, one pixel past a tile, W a multiple of 16 but
# not of 32
SIZES = [(23, 37), (48, 64), (35, 50), (9, 13), (17, 33), (37, 80)]


@pytest.mark.parametrize("hw", SIZES)
@pytest.mark.parametrize("correlated", [False, True])
def test_loss_value(gpu, loss_fn, hw, correlated):
    rng = np.random.default_rng(100 * hw[0] + hw[1] + int(correlated))
    x, gt8, y = make_pair(rng, *hw, correlated)
    lam = 0.2
    l_gpu, _ = run_gpu(gpu, loss_fn, x, gt8, lam)
    l_ref = ref_loss(x.astype(np.float64), y, lam)
    assert abs(l_gpu - l_ref) <= 2e-6 + 1e-5 * abs(l_ref), (l_gpu, l_ref)


def test_loss_accumulates_and_grad_overwrites(gpu, loss_fn):
    rng = np.random.default_rng(7)
    x, gt8, y = make_pair(rng, 23, 37, False)
    l1, g1 = run_gpu(gpu, loss_fn, x, gt8, 0.2, repeats=1)
    l3, g3 = run_gpu(gpu, loss_fn, x, gt8, 0.2, repeats=3)
    assert abs(l3 - 3 * l1) <= 1e-5 * l3
    np.testing.assert_allclose(g3, g1, rtol=0, atol=1e-12)


@pytest.mark.parametrize("hw,correlated,lam", [((23, 37), False, 0.2), ((48, 64), True, 0.2),
                                                ((35, 50), True, 0.7)])
def test_gradient_fd(gpu, loss_fn, hw, correlated, lam):
    rng = np.random.default_rng(1000 + hw[0] + int(correlated))
    x, gt8, y = make_pair(rng, *hw, correlated)
    _, g = run_gpu(gpu, loss_fn, x, gt8, lam)
    idx = sample_entries(rng, x, y, 30)
    g_fd = fd_grad(x, y, lam, idx)
    assert_grad_close(g[tuple(idx.T)], g_fd)


def test_gradient_fd_full_tiny_image(gpu, loss_fn):
    """Every entry of an image smaller than the window (9 x 13): all pixels see the border."""
    rng = np.random.default_rng(5)
    x, gt8, y = make_pair(rng, 9, 13, True)
    _, g = run_gpu(gpu, loss_fn, x, gt8, 0.2)
    idx = np.argwhere(np.abs(x - y) > 1e-3)
    g_fd = fd_grad(x, y, 0.2, idx)
    assert_grad_close(g[tuple(idx.T)], g_fd)


@pytest.mark.parametrize("hw,correlated,lam", [((37, 80), False, 0.2), ((17, 33), True, 0.2),
                                                ((48, 64), True, 0.5)])
def test_gradient_every_entry(gpu, loss_fn, hw, correlated, lam):
    """Every entry of the GPU gradient against ref_grad (tile seams, borders, odd widths);
    ref_grad itself against central differences on sampled entries."""
    rng = np.random.default_rng(2000 + hw[0] * hw[1] + int(correlated))
    x, gt8, y = make_pair(rng, *hw, correlated)
    x64 = x.astype(np.float64)
    g_ref = ref_grad(x64, y, lam)
    idx = sample_entries(rng, x, y, 20)
    assert_grad_close(g_ref[tuple(idx.T)], fd_grad(x, y, lam, idx))
    _, g = run_gpu(gpu, loss_fn, x, gt8, lam)
    keep = np.abs(x64 - y) > 1e-5  # float32 vs float64 target: the L1 sign may differ closer to the kink
    assert keep.mean() > 0.9
    assert_grad_close(g[keep], g_ref[keep])


# ---- metrics ---------------------------------------------------------------------------


@pytest.mark.parametrize("hw", [(23, 37), (48, 64)])
def test_metrics_ssim_matches_reference(hw):
    rng = np.random.default_rng(11)
    a = rng.random((*hw, 3))
    b = np.clip(a + rng.normal(0, 0.1, a.shape), 0, 1)
    assert abs(metrics.ssim(a, b) - ref_ssim_map(a, b).mean()) < 1e-12
    np.testing.assert_allclose(metrics.ssim_map(a, b), ref_ssim_map(a, b), rtol=0, atol=1e-12)
    assert metrics.ssim(a, a) == pytest.approx(1.0, abs=1e-12)


def test_metrics_psnr_known_value():
    rng = np.random.default_rng(3)
    a = rng.random((23, 37, 3)) * 0.9
    b = a + 0.01  # MSE = 1e-4 exactly -> 40 dB
    assert metrics.psnr(a, b) == pytest.approx(40.0, abs=1e-9)
    assert metrics.psnr(a, a) == float("inf")


@pytest.mark.parametrize("hw", [(35, 50), (9, 13), (17, 33), (48, 64), (37, 80)])
def test_gpu_metrics_match_reference(gpu, hw):
    """Evaluation mode (MODE 1) of ssim_fwd, dispatched by GpuImageMetrics on its own grid."""
    h, w = hw
    rng = np.random.default_rng(13 + h * w)
    x, gt8, y = make_pair(rng, h, w, True)
    packed = np.ascontiguousarray(gt8).view(np.uint32).reshape(h, w)
    m = metrics.GpuImageMetrics(gpu)
    s, p = m.compute(gpu.upload(x), gpu.upload(packed), w, h)
    x64 = x.astype(np.float64)
    assert abs(s - ref_ssim_map(x64, y).mean()) < 1e-5
    assert abs(p - metrics.psnr(x64, y)) < 1e-3


# ---- "valid" SSIM padding (gsplat's trainer: fused_ssim padding="valid") -----------------


def ref_loss_valid(x: np.ndarray, y: np.ndarray, lam: float) -> float:
    """The loss with the SSIM mean over the window positions inside the image only: every
    moment blurred by scipy's convolve2d mode="valid" (no padding anywhere); L1 over all pixels."""
    c1, c2 = 0.01 ** 2, 0.03 ** 2

    def blur(img):
        return np.stack([convolve2d(img[..., c], _W2, mode="valid") for c in range(img.shape[2])], axis=-1)
    mx, my = blur(x), blur(y)
    sxx, syy, sxy = blur(x * x) - mx ** 2, blur(y * y) - my ** 2, blur(x * y) - mx * my
    s = (2 * mx * my + c1) * (2 * sxy + c2) / ((mx ** 2 + my ** 2 + c1) * (sxx + syy + c2))
    return float((1 - lam) * np.abs(x - y).mean() + lam * (1 - s.mean()))


@pytest.fixture(scope="module")
def valid_loss_fn(gpu):
    return PhotometricLoss(gpu, ssim_padding="valid")


@pytest.mark.parametrize("hw,correlated,lam", [((23, 37), False, 0.2), ((48, 64), True, 0.2),
                                                ((17, 33), True, 0.6), ((12, 40), False, 0.2)])
def test_valid_padding_value_and_gradient(gpu, valid_loss_fn, hw, correlated, lam):
    """Loss value and sampled gradient entries (corners and border rows, whose pixels feed
    only some windows, included) against central differences of ref_loss_valid."""
    rng = np.random.default_rng(3000 + hw[0] * hw[1] + int(correlated))
    x, gt8, y = make_pair(rng, *hw, correlated)
    x64 = x.astype(np.float64)
    l_gpu, g = run_gpu(gpu, valid_loss_fn, x, gt8, lam)
    l_ref = ref_loss_valid(x64, y, lam)
    assert abs(l_gpu - l_ref) <= 2e-6 + 1e-5 * abs(l_ref), (l_gpu, l_ref)
    assert abs(l_ref - ref_loss(x64, y, lam)) > 1e-4  # the two paddings differ on these inputs
    idx = sample_entries(rng, x, y, 30)
    g_fd = []
    for i in map(tuple, idx):
        xp, xm = x64.copy(), x64.copy()
        xp[i] += 1e-4
        xm[i] -= 1e-4
        g_fd.append((ref_loss_valid(xp, y, lam) - ref_loss_valid(xm, y, lam)) / 2e-4)
    assert_grad_close(g[tuple(idx.T)], np.array(g_fd))


def test_valid_padding_refuses_small_images_and_unknown_names(gpu, valid_loss_fn):
    rng = np.random.default_rng(9)
    x, gt8, _ = make_pair(rng, 9, 13, False)
    with pytest.raises(ValueError, match="larger than 10"):
        run_gpu(gpu, valid_loss_fn, x, gt8, 0.2)
    with pytest.raises(ValueError, match="ssim_padding"):
        PhotometricLoss(gpu, ssim_padding="reflect")
