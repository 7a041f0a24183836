"""The voxel grid of the TSDF: bounds, voxel size, truncation, bricks.

Conventions (shared with shaders/mesh/tsdf.slang): the grid axes are the world axes;
voxel (i, j, k) has its centre at ``origin + (i + 0.5, j + 0.5, k + 0.5) * voxel``; voxels
are grouped in bricks of ``BRICK``^3, only bricks near observed surfaces are allocated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BRICK = 8  # brick edge in voxels, as B in shaders/mesh/tsdf.slang


@dataclass(frozen=True)
class GridSpec:
    """origin: [3] world position of the grid's min corner; voxel: edge length (world units);
    bricks: brick grid size (BX, BY, BZ); trunc: truncation distance (world units)."""

    origin: tuple[float, float, float]
    voxel: float
    bricks: tuple[int, int, int]
    trunc: float

    @property
    def dims(self) -> tuple[int, int, int]:
        """Voxel grid size (NX, NY, NZ)."""
        return tuple(b * BRICK for b in self.bricks)

    def coarser(self, factor: int = 2) -> "GridSpec":
        """The same bounds at ``factor`` x the voxel size (truncation scaled alike)."""
        hi = np.asarray(self.origin) + np.asarray(self.dims) * self.voxel
        return grid_for_bounds(np.asarray(self.origin), hi, voxel=self.voxel * factor,
                               trunc=self.trunc * factor)

    def to_world(self, ijk: np.ndarray) -> np.ndarray:
        """Voxel-index coordinates [..., 3] (voxel centres at integers) -> world [..., 3]."""
        return np.asarray(self.origin) + (np.asarray(ijk, np.float64) + 0.5) * self.voxel


def grid_for_bounds(lo, hi, resolution: int = 512, voxel: float | None = None,
                    trunc: float | None = None, trunc_voxels: float = 4.0) -> GridSpec:
    """Grid covering the box [lo, hi] (world units): the longest side gets ``resolution``
    voxels unless ``voxel`` is given; truncation ``trunc`` or ``trunc_voxels`` x voxel."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    size = np.maximum(hi - lo, 1e-9)
    if voxel is None:
        voxel = float(size.max()) / max(int(resolution), 8)
    bricks = tuple(int(max(1, math.ceil(s / (voxel * BRICK)))) for s in size)
    centre = (lo + hi) / 2
    origin = centre - np.asarray(bricks) * BRICK * voxel / 2  # keep the box centred
    return GridSpec(tuple(float(v) for v in origin), float(voxel), bricks,
                    float(trunc if trunc is not None else trunc_voxels * voxel))


def opaque_cut(opacity_logits: np.ndarray, min_opacity: float = 0.2, quantile: float = 0.9,
               share: float = 0.5) -> float:
    """The opacity from which a splat counts as opaque: ``min_opacity``, or ``share`` x the
    ``quantile`` of the splats' opacities when that is lower (the most opaque splats of the
    model set the scale).

    Why: a training that ends soon after an opacity reset (the default 7000 steps reset every
    3000: the last at 6000) leaves nearly every splat translucent, the surfaces' included:
    the office chair video's splats at 1000 px had a median opacity of 0.04 and 4% over 0.2,
    so the subject finder saw 1437 centres (the backrest alone), no floor and no base.
    A fixed cut is a fact about one training schedule; the relative one keeps 0.2 for a
    model with more than a tenth of its splats over 0.4."""
    a = 1.0 / (1.0 + np.exp(-np.asarray(opacity_logits, np.float64).reshape(-1)))
    if len(a) == 0:
        return float(min_opacity)
    return float(min(min_opacity, share * np.quantile(a, quantile)))


def splat_bounds(means: np.ndarray, opacity_logits: np.ndarray, min_opacity: float = 0.2,
                 quantile: float = 0.005, pad: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(lo [3], hi [3]): per-axis ``quantile`` .. 1 - ``quantile`` range of the centres of
    Gaussians with opacity >= ``min_opacity`` (all if none are), padded by ``pad`` x size.
    The quantiles drop the few far-away background splats that would stretch the grid. (The
    fixed cut, not :func:`opaque_cut`: with translucent splats it keeps the fewer, surer ones
    and a smaller box; the book's mesh came out the same either way.)"""
    means = np.asarray(means, np.float64)
    keep = 1.0 / (1.0 + np.exp(-np.asarray(opacity_logits, np.float64))) >= min_opacity
    pts = means[keep] if keep.sum() >= 8 else means
    lo = np.quantile(pts, quantile, axis=0)
    hi = np.quantile(pts, 1.0 - quantile, axis=0)
    size = np.maximum(hi - lo, 1e-6)
    return lo - pad * size, hi + pad * size


def splat_trunc(means: np.ndarray, scales: np.ndarray, opacity_logits: np.ndarray, lo, hi, voxel: float,
                trunc_voxels: float = 4.0, max_trunc_voxels: float = 16.0, min_opacity: float = 0.2) -> float:
    """TSDF truncation distance (world units) for these splats: twice the median largest
    standard deviation of the opaque splats (opacity >= :func:`opaque_cut`) whose centres lie in
    the box [lo, hi], clamped to ``trunc_voxels`` .. ``max_trunc_voxels`` x ``voxel``.

    Why: fusion averages the views' depths only within the band. Where the splats are wide
    and not flat (no geometry phase in training), the depth each view renders of the same
    surface lies anywhere within about a standard deviation of the splat's centre, and a
    band narrower than that spread (2 sigma) leaves each view's surface as its own sheet:
    the book's table (7 photos, splats of median sigma 0.67) came out as a field of torn
    sheets at 4 voxels (0.2) and as one surface at 12 (0.6). The upper clamp bounds the
    band's memory (it grows with the band) and how much thin parts merge."""
    means = np.asarray(means, np.float64)
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    keep = 1.0 / (1.0 + np.exp(-np.asarray(opacity_logits, np.float64))) >= opaque_cut(opacity_logits, min_opacity)
    keep &= ((means >= lo) & (means <= hi)).all(1)
    floor = float(trunc_voxels) * voxel
    if keep.sum() < 8:
        return floor
    sigma = float(np.median(np.exp(np.asarray(scales, np.float64)[keep]).max(1)))
    return float(np.clip(2.0 * sigma, floor, max(floor, float(max_trunc_voxels) * voxel)))
