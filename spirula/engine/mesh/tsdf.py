"""GPU TSDF fusion of depth maps on a sparse brick grid (kernels: shaders/mesh/tsdf.slang).

Use: ``mark`` every depth map (flags the bricks within the truncation band of a surface),
``allocate`` (host compaction of the flags into a brick table; refuses more than
``max_voxels``), ``integrate`` every depth map, ``read`` the pool back. Memory on the GPU is
12 bytes per allocated voxel (tsdf, weight, support: float32) plus 4 bytes per brick of the
brick grid, so it follows the surface area, not the bounding volume.

Depth maps are [H, W] float32 camera z (OpenCV axes, world units) with an [H, W] float32
accumulated opacity; the camera is a row of the camera table (spirula/engine/splat/camera_table.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import slangpy as spy

from ..device import Gpu, dispatch_grid
from ..errors import SpirulaError
from .grid import BRICK, GridSpec

VOXEL_BYTES = 12


class GridTooLarge(SpirulaError):
    """The surface band needs more voxels than the budget allows."""


@dataclass
class TsdfVolume:
    """Host copy of a fused volume.

    table: [BX, BY, BZ] int32 slot of each brick in the pool, -1 where unallocated.
    tsdf, weight, support: [S, 8, 8, 8] float32 per slot, local index (i, j, k).
    """

    spec: GridSpec
    table: np.ndarray
    tsdf: np.ndarray
    weight: np.ndarray
    support: np.ndarray


class SparseTsdf:
    def __init__(self, gpu: Gpu, spec: GridSpec, cams: spy.Buffer, max_voxels: int = 48_000_000,
                 alpha_min: float = 0.5, alpha_empty: float = 0.1, carve_weight: float = 1.0):
        """cams: the uploaded camera table; alpha_min: opacity above which a pixel's depth is
        used; alpha_empty: opacity below which a pixel is free space (carving, weight
        ``carve_weight``; 0 turns carving off)."""
        self.gpu, self.spec, self.cams = gpu, spec, cams
        self.max_voxels = int(max_voxels)
        self.alpha_min, self.alpha_empty, self.carve_weight = alpha_min, alpha_empty, carve_weight
        self.k_mark = gpu.kernel("mesh/tsdf", "mark_bricks")
        self.k_integrate = gpu.kernel("mesh/tsdf", "integrate")
        nb = int(np.prod(spec.bricks))
        self.flags = gpu.zeros(4 * nb, "tsdf.flags")
        self.slots = 0
        self.pool: dict[str, spy.Buffer] = {}

    def _grid_args(self) -> dict:
        s = self.spec
        return dict(origin=spy.float3(*s.origin), voxel=float(s.voxel))

    def nbytes(self) -> int:
        return self.flags.size + sum(b.size for b in self.pool.values())

    def mark(self, enc, cam_index: int, width: int, height: int, depth: spy.Buffer, alpha: spy.Buffer) -> None:
        """Record flagging of the bricks near the surface seen by one depth map."""
        self.k_mark.dispatch(thread_count=[width, height, 1], command_encoder=enc, cams=self.cams,
                             depth=depth, alpha=alpha, flags=self.flags, cam_index=cam_index,
                             width=width, height=height, bricks=spy.int3(*self.spec.bricks),
                             trunc=float(self.spec.trunc), alpha_min=float(self.alpha_min), **self._grid_args())

    def flagged(self) -> int:
        """Number of flagged bricks so far (waits for the GPU)."""
        return int(self.gpu.read(self.flags, np.uint32, int(np.prod(self.spec.bricks))).sum())

    def allocate(self) -> int:
        """Give every flagged brick a pool slot; returns the number of voxels allocated.
        Raises GridTooLarge when that exceeds ``max_voxels``."""
        flags = self.gpu.read(self.flags, np.uint32, int(np.prod(self.spec.bricks)))
        idx = np.flatnonzero(flags)
        voxels = len(idx) * BRICK ** 3
        if voxels > self.max_voxels:
            raise GridTooLarge(f"the surface band needs {voxels:,} voxels at voxel size {self.spec.voxel:.4g}, "
                               f"over the budget of {self.max_voxels:,}")
        table = np.full(len(flags), -1, np.int32)
        table[idx] = np.arange(len(idx), dtype=np.int32)
        coords = np.stack(np.unravel_index(idx, self.spec.bricks), axis=1).astype(np.int32)
        self.table = table.reshape(self.spec.bricks)
        self.slots = len(idx)
        self.coords = self.gpu.upload(coords.reshape(-1) if len(idx) else np.zeros(3, np.int32), "tsdf.coords")
        n = max(voxels, 1)
        self.pool = {name: self.gpu.zeros(4 * n, f"tsdf.{name}") for name in ("tsdf", "weight", "support")}
        return voxels

    def integrate(self, enc, cam_index: int, width: int, height: int, depth: spy.Buffer, alpha: spy.Buffer) -> None:
        """Record the fusion of one depth map into every allocated voxel."""
        voxels = self.slots * BRICK ** 3
        if voxels == 0:
            return
        threads, groups_x = dispatch_grid(voxels, 256)  # 2D past 16.7M voxels
        self.k_integrate.dispatch(
            thread_count=threads, command_encoder=enc, groups_x=groups_x, cams=self.cams, depth=depth, alpha=alpha,
            brick_coords=self.coords, tsdf=self.pool["tsdf"], weight=self.pool["weight"],
            support=self.pool["support"], cam_index=cam_index, voxels=voxels, width=width, height=height,
            trunc=float(self.spec.trunc), alpha_min=float(self.alpha_min), alpha_empty=float(self.alpha_empty),
            carve_weight=float(self.carve_weight), **self._grid_args())

    def read(self) -> TsdfVolume:
        """Host copy of the volume (waits for the GPU)."""
        shape = (self.slots, BRICK, BRICK, BRICK)
        get = lambda name: self.gpu.read(self.pool[name], np.float32, shape=shape) if self.slots else np.zeros(shape, np.float32)
        return TsdfVolume(self.spec, self.table, get("tsdf"), get("weight"), get("support"))


def fuse_depth_maps(gpu: Gpu, spec: GridSpec, cams: spy.Buffer, sizes: list[tuple[int, int]], get_depth,
                    max_voxels: int = 48_000_000, on_progress=None, trunc_voxels: float | None = None,
                    **options) -> TsdfVolume:
    """Fuse depth maps into a TSDF on the GPU and read it back.

    sizes: (width, height) of each camera-table row to fuse; get_depth(i) -> (depth [H, W],
    alpha [H, W]) float32 host arrays for row i; on_progress(phase, done, total).
    When the band exceeds ``max_voxels`` the voxel size is doubled (and the grid
    re-marked) until it fits (the truncation kept, unless under ``trunc_voxels`` voxels;
    None: doubled with the voxel); the spec used is in the result.
    """
    while True:
        vol = SparseTsdf(gpu, spec, cams, max_voxels, **options)
        for phase in ("mark", "integrate"):
            if phase == "integrate":
                try:
                    vol.allocate()
                except GridTooLarge:
                    break
            for i, (w, h) in enumerate(sizes):
                depth, alpha = get_depth(i)
                d = gpu.upload(np.ascontiguousarray(depth, np.float32), "tsdf.depth")
                a = gpu.upload(np.ascontiguousarray(alpha, np.float32), "tsdf.alpha")
                enc = gpu.encoder()
                (vol.mark if phase == "mark" else vol.integrate)(enc, i, w, h, d, a)
                gpu.submit(enc)
                gpu.device.wait_for_idle()  # the uploaded maps must outlive the dispatch
                if on_progress is not None:
                    on_progress(phase, i + 1, len(sizes))
        else:
            return vol.read()
        spec = spec.coarser(2, trunc_voxels)
        if on_progress is not None:
            on_progress(f"coarsen:{spec.voxel:.4g}", 0, len(sizes))
