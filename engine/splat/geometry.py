"""The geometry phase of training: flattened (surfel-like) Gaussians and depth-normal consistency.

Optional (TrainConfig.geometry, ``spirula train --geometry``), from step
``geometry_from x steps`` on, for splats whose depth is worth fusing into a mesh (2DGS, Huang
et al. 2024; PGSR, Chen et al. 2024; RaDe-GS, Zhang et al. 2024). Two terms join the
photometric loss:

* flattening: ``lambda_flat * mean_i min_k s_ik / unit`` (PGSR's scale loss; s the scales,
  ``unit`` the world length that counts as 1, as MCMC's scale regulariser), so each Gaussian
  becomes a disc whose shortest axis is its normal. Its gradient is added in the fused
  projection backward's Adam pass (shaders/project/project_backward.slang ``reg_flat``), to every
  Gaussian, seen or not.
* depth-normal consistency: the render of a geometry step composites each splat's surfel
  (camera-space normal of its shortest axis, turned towards the camera, and its plane offset
  d = n . p; shaders/common/surfel.slang) into an [H, W, 4] map (engine/splat/render.py with
  ``geometry=True``); the loss compares the rendered normal with the normal of the depth map
  the planes give, ``lambda_normal * mean_p w_p (1 - n_d . n)`` (2DGS eq. 14 with PGSR's
  unbiased plane depth and its image-edge weight w_p; the math is in
  shaders/loss/geometry.slang). Its gradient with respect to the map goes back through the
  rasterizer and the projection to the means and rotations.

Per geometry step: one clear and one dispatch more than a photometric step, recorded in the
same command buffer, no host read. The loss sum goes to word ``LOSS_WORD`` of the trainer's
loss accumulator and comes back with the photometric loss (engine/splat/trainer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import slangpy as spy

from ..device import Gpu
from .schedule import at_fraction

LOSS_WORD = 4  # float word of the loss accumulator the consistency loss is added to
_TILE = 16     # the loss kernel's workgroup side (shaders/loss/geometry.slang)


@dataclass
class GeometrySettings:
    """The geometry phase's settings (TrainConfig's geometry_* and lambda_* fields)."""
    start: int = 0                 # first step (from 0) that trains geometry
    lambda_normal: float = 0.05    # depth-normal consistency weight (2DGS's 0.05)
    lambda_flat: float = 100.0     # flattening weight, world unit = ``unit`` (PGSR's scale loss weight)

    def active(self, step: int) -> bool:
        return step >= self.start


def geometry_start(steps: int, fraction: float) -> int:
    """First geometry step of a run of ``steps`` steps: ``fraction`` of them (2DGS starts
    its normal loss at 7,000 of 30,000). ValueError outside [0, 1]."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"geometry_from must be a fraction of the steps in [0, 1], not {fraction}")
    return at_fraction(fraction, steps)


class DepthNormalLoss:
    """The depth-normal consistency loss and its gradient for one geometry render."""

    def __init__(self, gpu: Gpu):
        self.gpu = gpu
        self._k = gpu.kernel("loss/geometry", "depth_normal_loss")

    def record(self, enc, geom: spy.Buffer, final_T: spy.Buffer, gt: spy.Buffer, grad_geom: spy.Buffer,
               loss_sum: spy.Buffer, width: int, height: int, intrinsics, lambda_normal: float,
               loss_word: int = LOSS_WORD) -> None:
        """Record a clear of ``grad_geom`` and the loss (2 commands, no host sync).

        geom        float32 [H, W, 4] composited (N, d) (Rasterizer.geom_image)
        final_T     float32 [H, W] transmittance left after the splats (the forward's)
        gt          uint32 [H, W] packed RGBA8 training image (the edge weight)
        grad_geom   float32 [H, W, 4]; OVERWRITTEN with dL/d(geom)
        loss_sum    float32 buffer: L is ATOMICALLY ADDED to word ``loss_word``
        intrinsics  (fx, fy, cx, cy) of the view, px (pixel centres at +0.5)
        """
        w, h = int(width), int(height)
        if w < 3 or h < 3:
            raise ValueError(f"the depth-normal loss needs images of at least 3x3 pixels, got {w}x{h}")
        self.gpu.clear(enc, grad_geom)
        fx, fy, cx, cy = (float(v) for v in intrinsics)
        self._k.record(enc, [-(-w // _TILE) * _TILE, -(-h // _TILE) * _TILE, 1], geom=geom, final_T=final_T, gt=gt,
                       g_geom=grad_geom, loss_sum=loss_sum, width=w, height=h, intr=spy.float4(fx, fy, cx, cy),
                       weight=float(lambda_normal) / (w * h), loss_offset=4 * int(loss_word))

