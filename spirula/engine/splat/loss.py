"""Training photometric loss on the GPU: L = (1 - lambda) L1 + lambda (1 - SSIM).

Kerbl et al. 2023 (3D Gaussian Splatting), eq. 7, lambda = 0.2. SSIM as in
``spirula.engine.splat.metrics`` (11x11 Gaussian window, sigma 1.5, C1 = 0.01^2, C2 = 0.03^2, zero
padding, mean over pixels and channels) or, with ``ssim_padding="valid"``, the mean over
the pixels whose window lies inside the image (gsplat's trainer: fused_ssim's
padding="valid"). The math of the forward and backward pass is written out in
``shaders/loss/ssim.slang``.

With ``masked`` (masks' "ignore" mode, spirula/engine/splat/mask_targets.py) the ground truth's alpha byte
weighs each pixel (value / 255; 0: the pixel takes no part in the loss and gets no gradient);
the normalisation stays per pixel of the whole image (the formula is in the shader).

Two dispatches per call, both recorded into the caller's encoder, no host sync:
``ssim_fwd`` (blurred moments, SSIM map, loss, SSIM partials) and ``ssim_bwd`` (blur of
the partials, gradient with respect to the render).
"""

from __future__ import annotations

from .buffers import BufferSet
from .metrics import ssim_window_constants

_TILE = 16  # must match T in shaders/loss/ssim.slang
_RADIUS = 5  # the SSIM window's radius (R in shaders/loss/ssim.slang)
SSIM_PADDINGS = ("zero", "valid")


class PhotometricLoss:
    """L1 + D-SSIM loss and its gradient for one rendered image.

    Scratch (9 float32 planes of H x W: the SSIM partials) is kept by capacity and reused;
    with ``arena`` (an spirula.engine.profile.PhaseArena) it is the arena's ``loss`` phase instead,
    sharing memory with the rasterizer's other phases.
    """

    def __init__(self, gpu, arena=None, ssim_padding: str = "zero", masked: bool = False):
        if ssim_padding not in SSIM_PADDINGS:
            raise ValueError(f"ssim_padding must be one of {', '.join(SSIM_PADDINGS)}, not {ssim_padding!r}")
        self.gpu = gpu
        self.valid = ssim_padding == "valid"
        self.masked = bool(masked)
        consts = ssim_window_constants()
        mask = {"MASKED": 1} if self.masked else {}  # unmasked: the kernels exactly as before
        self._fwd = gpu.kernel("loss/ssim", "ssim_fwd", MODE=0, SSIM_VALID=int(self.valid), **mask, **consts)
        self._bwd = gpu.kernel("loss/ssim", "ssim_bwd", **mask, **consts)
        self.scratch = BufferSet(gpu, "loss", category="image")
        self.arena = arena

    def record(self, enc, render, gt, width: int, height: int, grad_render, loss_sum,
               lambda_dssim: float = 0.2) -> None:
        """Record the loss and its gradient into ``enc`` (2 dispatches, no host sync).

        render       float32 buffer [H, W, 3], RGB in [0, 1], row-major
        gt           uint32 buffer [H, W], packed RGBA8 (r in the low byte; value / 255;
                     alpha: the pixel's weight when ``masked``, else ignored)
        grad_render  float32 buffer [H, W, 3]; OVERWRITTEN with dL/d(render)
        loss_sum     float32 buffer; the scalar L of this image is ATOMICALLY ADDED to
                     element 0 (clear it yourself when you start accumulating)
        lambda_dssim weight of the D-SSIM term (0.2 in 3DGS)
        """
        w, h = int(width), int(height)
        if w <= 0 or h <= 0:
            raise ValueError(f"image size must be positive, got {w}x{h}")
        if self.valid and min(w, h) <= 2 * _RADIUS:
            raise ValueError(f"ssim_padding 'valid' needs images larger than {2 * _RADIUS} pixels a side, got {w}x{h}")
        if self.arena is None:
            self._record(enc, self.scratch.get("ssim_partials", 9 * 4 * w * h), render, gt, w, h, grad_render,
                         loss_sum, lambda_dssim)
        else:
            with self.arena.phase(enc, "loss") as s:
                self._record(enc, s.get("ssim_partials", 9 * 4 * w * h), render, gt, w, h, grad_render,
                             loss_sum, lambda_dssim)

    def _record(self, enc, partials, render, gt, w, h, grad_render, loss_sum, lambda_dssim) -> None:
        tc = [(w + _TILE - 1) // _TILE * _TILE, (h + _TILE - 1) // _TILE * _TILE, 1]
        common = dict(width=w, height=h, lambda_dssim=float(lambda_dssim), inv_count=1.0 / (3.0 * w * h))
        n_ssim = (w - 2 * _RADIUS) * (h - 2 * _RADIUS) if self.valid else w * h
        self._fwd.record(enc, tc, render=render, gt=gt, partials=partials, loss_sum=loss_sum,
                         inv_ssim_count=1.0 / (3.0 * n_ssim), **common)
        self._bwd.record(enc, tc, render=render, gt=gt,
                           partials=partials, grad_render=grad_render, **common)
