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
  d = n . p; shaders/common/surfel.slang) into an [H, W, 4] map (spirula/engine/splat/render.py with
  ``geometry=True``); the loss compares the rendered normal with the normal of the depth map
  the planes give, ``lambda_normal * mean_p w_p (1 - n_d . n)`` (2DGS eq. 14 with PGSR's
  unbiased plane depth and its image-edge weight w_p; the math is in
  shaders/loss/geometry.slang). Its gradient with respect to the map goes back through the
  rasterizer and the projection to the means and rotations.
* multi-view geometric consistency (``lambda_multiview`` > 0; PGSR's multi-view geometric
  term): the step also renders the geometry of a neighbouring training view (forward only,
  before the step's own render, in the same command buffer), and each reference pixel's
  plane-depth point is sent into that view, takes the depth found there and comes back; the
  forward-backward reprojection error phi (px) is penalised as
  ``lambda_multiview * mean over valid pixels of exp(-phi) phi`` (the weight a constant;
  pixels with phi >= 1 px left out as occlusions). Its gradient joins the depth-normal
  loss's in the same map gradient (:class:`MultiViewLoss`; the math is in
  shaders/loss/multiview.slang). Neighbours: :func:`neighbour_views`, chosen once from the
  poses; one of them per step, by :meth:`Neighbours.pick`.
* multi-view photometric consistency (``lambda_mvrgb`` > 0; PGSR's multi-view photometric
  term): no neighbour render. Patches (7 x 7, centres every 4 px) of the reference's
  training image are warped into a neighbour's training image by the homography of the plane
  the reference render shows at each patch centre, and ``lambda_mvrgb * mean over valid
  patches of (1 - NCC)`` is penalised (patches of 1 - NCC >= 0.9 left out, as PGSR); its
  gradient reaches the centre pixels' (N, d) and joins the map gradient (:class:`PhotometricMultiViewLoss`; the math is in
  shaders/loss/mvrgb.slang). Neighbours as for the geometric term.

Per geometry step: one clear and one dispatch more than a photometric step, recorded in the
same command buffer, no host read; with the multi-view term, the neighbour's forward render
(projection, sorts, raster) and four commands more. The loss sums go to words ``LOSS_WORD``
and ``MV_LOSS_WORD`` of the trainer's loss accumulator and come back with the photometric
loss (spirula/engine/splat/trainer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import slangpy as spy

from ..device import Gpu
from .schedule import geometry_start  # noqa: F401  (its old home)

LOSS_WORD = 4  # float word of the loss accumulator the consistency loss is added to
MV_LOSS_WORD = 5  # ... and the one the multi-view consistency loss is added to
MVRGB_LOSS_WORD = 6  # ... and the one the multi-view photometric consistency loss is added to
_TILE = 16     # the loss kernel's workgroup side (shaders/loss/geometry.slang)


@dataclass
class GeometrySettings:
    """The geometry phase's settings (TrainConfig's geometry_* and lambda_* fields)."""
    start: int = 0                 # first step (from 0) that trains geometry
    lambda_normal: float = 0.05    # depth-normal consistency weight (2DGS's 0.05)
    lambda_flat: float = 100.0     # flattening weight, world unit = ``unit`` (PGSR's scale loss weight)
    lambda_multiview: float = 0.0  # multi-view geometric consistency weight (0: off; PGSR's 0.03)
    lambda_mvrgb: float = 0.0      # multi-view photometric consistency weight (0: off; PGSR's 0.2)

    def active(self, step: int) -> bool:
        return step >= self.start


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



class MultiViewLoss:
    """The multi-view geometric consistency loss (module docstring; shaders/loss/multiview.slang)
    of a reference geometry render against a neighbour view's depth, and its gradient."""

    def __init__(self, gpu: Gpu, max_error: float = 1.0):
        """``max_error``: pixels whose forward-backward error (px) reaches it are left out
        (PGSR's 1 px)."""
        self.gpu, self.max_error = gpu, float(max_error)
        self._k_depth = gpu.kernel("loss/multiview", "plane_depth")
        self._k_count = gpu.kernel("loss/multiview", "multiview_count")
        self._k_loss = gpu.kernel("loss/multiview", "multiview_loss")
        self.count = gpu.zeros(16, "geometry.multiview_count")  # word 0: the valid pixels of the last record
        self._no_total = gpu.zeros(16, "geometry.multiview_total")  # an intersection count that never overflows

    def record_depth(self, enc, geom: spy.Buffer, final_T: spy.Buffer, cams: spy.Buffer, cam_index: int,
                     width: int, height: int, depth: spy.Buffer, isect_total: spy.Buffer | None = None,
                     isect_capacity: int = 0xFFFFFFFF) -> None:
        """Record the neighbour's plane depth map (1 dispatch).

        geom, final_T  float32 [H, W, 4] composited (N, d) and [H, W] transmittance of a geometry
                       render of camera ``cam_index`` of ``cams`` (camera table, W x H its size)
        depth          float32 [H, W]; OVERWRITTEN with D = d / (N . ray) (camera z, world
                       units), 0 where the pixel is invalid (too transparent, edge-on, D <= 0)
        isect_total, isect_capacity  the render's intersection count and capacity
                       (Rasterizer.overflow_guard): an overflowed render gives an all-0 map
        """
        self._k_depth.record(enc, [-(-int(width) // _TILE) * _TILE, -(-int(height) // _TILE) * _TILE, 1], geom=geom,
                             final_T=final_T, cams=cams, isect_total=self._no_total if isect_total is None else isect_total,
                             depth=depth, cam_index=int(cam_index), isect_capacity=int(isect_capacity),
                             width=int(width), height=int(height))

    def record(self, enc, geom: spy.Buffer, final_T: spy.Buffer, depth_n: spy.Buffer, cams: spy.Buffer,
               ref_index: int, nb_index: int, width: int, height: int, grad_geom: spy.Buffer,
               loss_sum: spy.Buffer, lambda_multiview: float, loss_word: int = MV_LOSS_WORD) -> None:
        """Record the loss and its gradient (3 commands, no host sync).

        geom, final_T  the reference render's float32 [H, W, 4] (N, d) and [H, W] transmittance,
                       H x W = the size of camera ``ref_index`` in ``cams``
        depth_n        float32 [Hn, Wn] plane depth of camera ``nb_index`` (:meth:`record_depth`)
        grad_geom      float32 [H, W, 4]: dL/d(geom) is ADDED to it (clear it first when
                       nothing else writes it)
        loss_sum       float32 buffer: L is ATOMICALLY ADDED to word ``loss_word``
        The valid pixels' count is left in word 0 of :attr:`count` (uint32).
        """
        grid = [-(-int(width) // _TILE) * _TILE, -(-int(height) // _TILE) * _TILE, 1]
        self.gpu.clear(enc, self.count)
        common = dict(geom=geom, final_T=final_T, depth_n=depth_n, cams=cams, ref_index=int(ref_index),
                      nb_index=int(nb_index), max_error=self.max_error, count_offset=0)
        self._k_count.record(enc, grid, count=self.count, **common)
        self._k_loss.record(enc, grid, count=self.count, g_geom=grad_geom, loss_sum=loss_sum,
                            lambda_mv=float(lambda_multiview), loss_offset=4 * int(loss_word), **common)


class PhotometricMultiViewLoss:
    """PGSR's multi-view photometric consistency (shaders/loss/mvrgb.slang): patches of the
    reference TRAINING IMAGE warped into a neighbour's TRAINING IMAGE by the homography of the
    plane the reference render shows at each patch centre, scored 1 - NCC, and its gradient to
    that plane (the centre pixel's (N, dacc)). Needs no neighbour render."""

    def __init__(self, gpu: Gpu, radius: int = 3, stride: int = 4, var_min: float = 2.5e-4, max_cost: float = 0.9):
        """``radius``: patches of (2 radius + 1)^2 pixels (3: 7 x 7; at most 7); ``stride``:
        pixels between patch centres; ``var_min``: reference patches whose grey variance
        (grey in [0, 1]) is below it are left out as textureless; ``max_cost``: patches whose
        1 - NCC reaches it are left out as occluded or mismatched (PGSR's 0.9; 2: none)."""
        if not 0 <= int(radius) <= 7 or int(stride) < 1:
            raise ValueError(f"patch radius must be 0..7 and stride >= 1, not {radius} and {stride}")
        self.gpu, self.radius, self.stride = gpu, int(radius), int(stride)
        self.var_min, self.max_cost = float(var_min), float(max_cost)
        self._k_count = gpu.kernel("loss/mvrgb", "mvrgb_count")
        self._k_loss = gpu.kernel("loss/mvrgb", "mvrgb_loss")
        self.count = gpu.zeros(16, "geometry.mvrgb_count")  # word 0: the valid patches of the last record

    def grid(self, width: int, height: int) -> tuple[int, int]:
        """The number of patch centres across and down an image of ``width`` x ``height``
        (offset 0): centres at radius + k stride up to size - 1 - radius."""
        span = lambda n: max(0, (int(n) - 1 - 2 * self.radius) // self.stride + 1)
        return span(width), span(height)

    def record(self, enc, geom: spy.Buffer, final_T: spy.Buffer, image_r: spy.Buffer, image_n: spy.Buffer,
               cams: spy.Buffer, ref_index: int, nb_index: int, width: int, height: int, grad_geom: spy.Buffer,
               loss_sum: spy.Buffer, lambda_mvrgb: float, offset: tuple[int, int] = (0, 0),
               loss_word: int = MVRGB_LOSS_WORD) -> None:
        """Record the loss and its gradient (3 commands, no host sync).

        geom, final_T  the reference render's float32 [H, W, 4] (N, d) and [H, W] transmittance,
                       H x W = the size of camera ``ref_index`` in ``cams``
        image_r, image_n  the training images of cameras ``ref_index`` and ``nb_index``, packed
                       RGBA8 uint32 [H, W] and [Hn, Wn] (spirula/engine/splat/trainer.py pack_rgba8)
        offset         (ox, oy) pixels the grid of patch centres is shifted by (0 <= o < stride)
        grad_geom      float32 [H, W, 4]: dL/d(geom) is ADDED to it (clear it first when
                       nothing else writes it)
        loss_sum       float32 buffer: L is ATOMICALLY ADDED to word ``loss_word``
        The valid patches' count is left in word 0 of :attr:`count` (uint32).
        """
        nx, ny = self.grid(width, height)
        grid = [max(1, -(-nx // _TILE)) * _TILE, max(1, -(-ny // _TILE)) * _TILE, 1]
        self.gpu.clear(enc, self.count)
        common = dict(geom=geom, final_T=final_T, img_r=image_r, img_n=image_n, cams=cams, ref_index=int(ref_index),
                      nb_index=int(nb_index), radius=self.radius, stride=self.stride,
                      offset=spy.int2(int(offset[0]), int(offset[1])), var_min=self.var_min,
                      max_cost=self.max_cost, count_offset=0)
        self._k_count.record(enc, grid, count=self.count, **common)
        self._k_loss.record(enc, grid, count=self.count, g_geom=grad_geom, loss_sum=loss_sum,
                            lambda_mv=float(lambda_mvrgb), loss_offset=4 * int(loss_word), **common)


def neighbour_views(cameras, indices: list[int], unit: float, max_angle: float = 30.0,
                    baseline: tuple[float, float] = (0.02, 1.5), count: int = 8) -> dict[int, list[int]]:
    """Each camera's neighbours for the multi-view term, from the poses alone (PGSR's rule):
    the other cameras of ``indices`` whose optical axis is within ``max_angle`` degrees of its
    own and whose centre lies between ``baseline`` (x ``unit``, world units) from its centre,
    the ``count`` nearest first (ties by angle, then index). ``cameras``: the dataset's
    (spirula.engine.ingest.dataset.Camera, w2c OpenCV). Returns {index: [neighbour indices]}; a camera
    with none maps to []."""
    idx = np.asarray(indices, np.int64)
    if len(idx) == 0:
        return {}
    R = np.stack([cameras[i].w2c[:3, :3] for i in idx])
    t = np.stack([cameras[i].w2c[:3, 3] for i in idx])
    centres = -np.einsum("nji,nj->ni", R, t)
    axes = R[:, 2, :]  # the camera z axis in world coordinates
    axes = axes / np.linalg.norm(axes, axis=1, keepdims=True)
    dist = np.linalg.norm(centres[:, None] - centres[None], axis=-1) / max(unit, 1e-12)
    angle = np.degrees(np.arccos(np.clip(axes @ axes.T, -1.0, 1.0)))
    dist, angle = np.round(dist, 9), np.round(angle, 6)  # ties of equal spacing stay ties, broken by index
    ok = (angle <= max_angle) & (dist >= baseline[0]) & (dist <= baseline[1])
    np.fill_diagonal(ok, False)
    out = {}
    for a in range(len(idx)):  # once per run, over cameras (not Gaussians or pixels)
        cand = np.flatnonzero(ok[a])
        order = np.lexsort((idx[cand], angle[a, cand], dist[a, cand]))
        out[int(idx[a])] = [int(idx[cand[o]]) for o in order[:count]]
    return out


class Neighbours:
    """The neighbour a geometry step of camera ``ci`` at ``step`` pairs with: one of
    :func:`neighbour_views`' list, drawn by a hash of (seed, step), so a resumed run draws the
    same ones without saving any state."""

    def __init__(self, views: dict[int, list[int]], seed: int):
        self.views, self.seed = views, int(seed)

    def pick(self, ci: int, step: int) -> int | None:
        """A neighbour index of camera ``ci``, or None when it has none."""
        cand = self.views.get(int(ci), [])
        if not cand:
            return None
        h = ((int(step) + 1) * 0x9E3779B1 + self.seed * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 15
        return cand[((h * 0x2C1B3C6D & 0xFFFFFFFF) >> 16) % len(cand)]

    def coverage(self) -> float:
        """Fraction of the cameras that have a neighbour."""
        return sum(1 for v in self.views.values() if v) / max(len(self.views), 1)
