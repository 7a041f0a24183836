"""Image quality metrics for evaluation: PSNR and SSIM.

Host versions work on NumPy arrays in float64 (evaluation, not the training loop). SSIM is
the definition used by the 3DGS training loss and its evaluation (Wang et al. 2004; as in
Kerbl et al. 2023): per colour channel, an 11x11 Gaussian window with sigma 1.5,
C1 = 0.01^2, C2 = 0.03^2, ZERO padding at the image border (the blurred moments near the
border see zeros outside, like ``conv2d(padding=5)``), and the SSIM map averaged over all
pixels and channels.

``GpuImageMetrics`` computes the same mean SSIM and the MSE on the GPU with the loss kernel
(``shaders/loss/ssim.slang``, evaluation mode), against an 8-bit packed ground truth.
"""

from __future__ import annotations

import math

import numpy as np

SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
SSIM_C1 = 0.01 ** 2
SSIM_C2 = 0.03 ** 2


def gaussian_window(size: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA) -> np.ndarray:
    """1D Gaussian weights, float64 [size], normalised to sum 1 (the 2D window is the outer product)."""
    d = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = np.exp(-(d * d) / (2.0 * sigma * sigma))
    return g / g.sum()


def ssim_window_constants() -> dict[str, float]:
    """Link-time constants G0..G5 of shaders/loss/ssim.slang (the training loss and
    GpuImageMetrics): the normalised 11-tap window, w[|offset|]."""
    g = gaussian_window()
    r = len(g) // 2
    if r != 5:
        raise ValueError("the SSIM kernel is built for an 11-tap window")
    return {f"G{d}": float(g[r + d]) for d in range(r + 1)}


def _blur(img: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Separable zero-padded 'same' correlation of img [H, W, C] with w (x then y); float64."""
    r = len(w) // 2
    h, wd = img.shape[:2]
    p = np.pad(img, ((0, 0), (r, r), (0, 0)))
    out = np.zeros_like(img)
    for k in range(len(w)):
        out += w[k] * p[:, k:k + wd]
    p = np.pad(out, ((r, r), (0, 0), (0, 0)))
    out = np.zeros_like(img)
    for k in range(len(w)):
        out += w[k] * p[k:k + h]
    return out


def ssim_map(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-pixel, per-channel SSIM, float64 [H, W, C], of images a, b [H, W, C] in [0, 1]."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 3:
        raise ValueError(f"ssim needs two [H, W, C] images of the same shape, got {x.shape} and {y.shape}")
    w = gaussian_window()
    mx, my = _blur(x, w), _blur(y, w)
    vx = _blur(x * x, w) - mx * mx
    vy = _blur(y * y, w) - my * my
    cxy = _blur(x * y, w) - mx * my
    return ((2 * mx * my + SSIM_C1) * (2 * cxy + SSIM_C2)) / ((mx * mx + my * my + SSIM_C1) * (vx + vy + SSIM_C2))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two [H, W, C] float images in [0, 1] (see module docstring)."""
    return float(ssim_map(a, b).mean())


def psnr(a: np.ndarray, b: np.ndarray, max_value: float = 1.0) -> float:
    """PSNR in dB, 10 log10(max^2 / MSE), MSE over all pixels and channels (float64); inf if equal."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"psnr needs images of the same shape, got {x.shape} and {y.shape}")
    mse = float(np.mean((x - y) ** 2))
    return psnr_from_mse(mse, max_value)


def psnr_from_mse(mse: float, max_value: float = 1.0) -> float:
    """10 log10(max^2 / mse); inf for mse == 0."""
    if mse <= 0.0:
        return math.inf
    return 10.0 * math.log10(max_value * max_value / mse)


class GpuImageMetrics:
    """Mean SSIM and MSE on the GPU (one dispatch), same SSIM definition as ``ssim``.

    ``record(enc, render, gt, width, height, out)``: ``render`` float32 [H, W, 3],
    ``gt`` uint32 [H, W] packed RGBA8 (r in the low byte, value/255, alpha ignored);
    atomically ADDS mean SSIM to ``out`` float32[0] and MSE to float32[1] (clear ``out``
    first for one image). PSNR = ``psnr_from_mse(out[1])``.
    """

    def __init__(self, gpu):
        self.gpu = gpu
        self._fwd = gpu.kernel("loss/ssim", "ssim_fwd", MODE=1, **ssim_window_constants())
        self._dummy = gpu.buffer(16, "metrics.dummy_partials")

    def record(self, enc, render, gt, width: int, height: int, out) -> None:
        w, h = int(width), int(height)
        self._fwd.dispatch(
            thread_count=[(w + 15) // 16 * 16, (h + 15) // 16 * 16, 1], command_encoder=enc,
            render=render, gt=gt, partials=self._dummy, loss_sum=out,
            width=w, height=h, lambda_dssim=1.0, inv_count=1.0 / (3.0 * w * h), inv_ssim_count=1.0 / (3.0 * w * h))

    def compute(self, render, gt, width: int, height: int) -> tuple[float, float]:
        """(mean SSIM, PSNR in dB) of one image; waits for the GPU (evaluation only)."""
        out = self.gpu.zeros(16, "metrics.out")
        enc = self.gpu.encoder()
        self.record(enc, render, gt, width, height, out)
        self.gpu.submit(enc)
        s, mse = self.gpu.read(out, np.float32, 2)
        return float(s), psnr_from_mse(float(mse))
