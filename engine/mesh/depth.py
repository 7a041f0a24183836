"""Depth and opacity maps of the splats on the GPU (kernel: shaders/mesh/depth.slang).

The rasterizer (engine/splat/render.py) projects, depth-sorts, bins and tile-sorts the
splats and composites the colour image; ``render_depth`` then reads its sorted tile
intersections in the same command buffer and writes, per pixel [H, W] float32:
expected depth (camera z, world units, of each splat's maximum-density point on the
pixel's ray, alpha-weighted and normalised by accumulated opacity; 0 where the opacity
is ~0), accumulated opacity in [0, 1], and median depth (z where transmittance
crosses 0.5; 0 where it never does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import slangpy as spy

from ..device import Gpu
from ..splat.camera_table import TILE, View
from ..splat.render import Rasterizer


@dataclass
class DepthMap:
    """Host maps of one view, each [H, W] float32; ``image`` [H, W, 3] the colour render."""

    depth: np.ndarray
    alpha: np.ndarray
    median: np.ndarray
    image: np.ndarray | None = None


class DepthRenderer:
    def __init__(self, gpu: Gpu, raster: Rasterizer):
        self.gpu, self.raster = gpu, raster
        self.k_depth = gpu.kernel("mesh/depth", "render_depth", MAX_SH_DEGREE=raster.max_sh_degree)
        self.k_coeffs = gpu.kernel("mesh/depth", "ray_coeffs", MAX_SH_DEGREE=raster.max_sh_degree)
        self._out: dict[str, spy.Buffer] = {}

    def _buf(self, name: str, nbytes: int) -> spy.Buffer:
        b = self._out.get(name)
        if b is None or b.size < nbytes:
            b = self._out[name] = self.gpu.buffer(nbytes, f"depth.{name}")
        return b

    def nbytes(self) -> int:
        return sum(b.size for b in self._out.values()) + self.raster.bufs.nbytes()

    def render(self, params: spy.Buffer, n: int, cams: spy.Buffer, view: View, sh_degree: int,
               with_image: bool = False) -> DepthMap:
        """Render view ``view`` of the ``n`` packed Gaussians in ``params`` (waits for the GPU)."""
        r = self.raster
        r.prepare(params, n, cams, view, sh_degree)
        if r.bands:  # render_depth reads one pass's tile lists
            raise NotImplementedError(f"depth maps of {r.m:,} intersections need the rasterizer's banded large path, "
                                      f"which render_depth does not follow (per-pass limit {r.max_intersections_per_pass:,})")
        npix = view.width * view.height
        out = {k: self._buf(k, 4 * npix) for k in ("depth", "alpha", "median")}
        coeffs = self._buf("coeffs", 48 * max(n, 1))
        enc = self.gpu.encoder()
        r.record_forward(enc)
        self.k_coeffs.dispatch(thread_count=[max(n, 1), 1, 1], command_encoder=enc, params=params, cams=cams,
                               coeffs=coeffs, n=n, cam_index=view.cam_index)
        self.k_depth.dispatch(
            thread_count=[view.tiles_x * TILE, view.tiles_y * TILE, 1], command_encoder=enc,
            ranges=r.bufs["ranges"], isect_ids=r.bufs["isect_ids"], means2d=r.bufs["means2d"],
            conic_opac=r.bufs["conic_opac"], coeffs=coeffs, cams=cams, out_depth=out["depth"],
            out_alpha=out["alpha"], out_median=out["median"], cam_index=view.cam_index,
            width=view.width, height=view.height,
            tiles_x=view.tiles_x)
        self.gpu.submit(enc)
        shape = (view.height, view.width)
        maps = {k: self.gpu.read(b, np.float32, shape=shape) for k, b in out.items()}
        img = self.gpu.read(r.image, np.float32, shape=shape + (3,)) if with_image else None
        return DepthMap(maps["depth"], maps["alpha"], maps["median"], img)
