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

    def coarser(self, factor: int = 2, trunc_voxels: float | None = None) -> "GridSpec":
        """The same bounds at ``factor`` x the voxel size; the truncation scaled alike, or,
        with ``trunc_voxels``, kept (it is set by the depths' error, not the voxel) unless
        under ``trunc_voxels`` of the new voxels."""
        hi = np.asarray(self.origin) + np.asarray(self.dims) * self.voxel
        voxel = self.voxel * factor
        trunc = self.trunc * factor if trunc_voxels is None else max(self.trunc, trunc_voxels * voxel)
        return grid_for_bounds(np.asarray(self.origin), hi, voxel=voxel, trunc=trunc)

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
