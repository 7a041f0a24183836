"""Depth and opacity maps of the splats on the GPU (kernel: shaders/mesh/depth.slang).

The rasterizer (spirula/engine/splat/render.py) projects, depth-sorts, bins and tile-sorts the
splats and composites the colour image; ``render_depth`` then reads its sorted tile
intersections in the same command buffer and writes, per pixel [H, W] float32:
expected depth (camera z, world units, of each splat's maximum-density point on the
pixel's ray, alpha-weighted and normalised by accumulated opacity; 0 where the opacity
is ~0), accumulated opacity in [0, 1], and median depth (z where transmittance
crosses 0.5; 0 where it never does).

Plane depth (``plane=True``, what the mesh stage fuses): the same render with the geometry
phase's surfel compositing (spirula/engine/splat/render.py ``geometry=True``; the rasterizer's
:attr:`~spirula.engine.splat.render.Rasterizer.geom_image` (N, dacc) = sum_i w_i (n_i, n_i . p_i),
n_i each splat's camera-space normal turned to the camera): the pixel's depth is where its
ray r = ((x + 0.5 - cx) / fx, (y + 0.5 - cy) / fy, 1) meets the composited plane,
D = dacc / (N . r) (PGSR, Chen et al. 2024: unbiased depth; the same as
shaders/loss/geometry.slang), 0 where the plane is seen edge-on (N . r > -COS_MIN |N| |r|)
or lies behind the camera. Unlike the alpha-blended (expected) depth it is not pulled towards
the splats behind a surface, and unlike the median depth it follows the splats' planes
between their centres instead of stepping from one splat to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import slangpy as spy

from ..device import Gpu
from ..splat.camera_table import TILE, View
from ..splat.render import Rasterizer

COS_MIN = 0.05  # plane depth: planes seen more edge-on than this cosine give no depth (geometry.slang's)


@dataclass
class DepthMap:
    """Host maps of one view, each [H, W] float32; ``image`` [H, W, 3] the colour render;
    ``plane`` the plane depth and ``normal`` [H, W, 3] the unit camera-space normal of the
    composited planes (zero where none), when rendered with ``plane=True``."""

    depth: np.ndarray
    alpha: np.ndarray
    median: np.ndarray
    image: np.ndarray | None = None
    plane: np.ndarray | None = None
    normal: np.ndarray | None = None


def plane_depth(geom: np.ndarray, fx: float, fy: float, cx: float, cy: float) -> tuple[np.ndarray, np.ndarray]:
    """(depth [H, W] float32, normal [H, W, 3] float32) of a composited surfel map ``geom``
    [H, W, 4] (N, dacc): D = dacc / (N . r) (module docstring), 0 where edge-on or behind;
    normal N / |N| (camera space, towards the camera), 0 where |N| = 0."""
    h, w = geom.shape[:2]
    u, v = np.meshgrid(np.arange(w, dtype=np.float32) + 0.5, np.arange(h, dtype=np.float32) + 0.5)
    r = np.stack([(u - cx) / fx, (v - cy) / fy, np.ones_like(u)], -1)
    N = geom[..., :3]
    s = (N * r).sum(-1)
    nlen = np.linalg.norm(N, axis=-1)
    ok = (s < -COS_MIN * nlen * np.linalg.norm(r, axis=-1)) & (nlen > 1e-12)
    d = np.where(ok, geom[..., 3] / np.where(ok, s, -1.0), 0.0)
    d = np.where(d > 0, d, 0.0).astype(np.float32)
    normal = np.where(nlen[..., None] > 1e-12, N / np.maximum(nlen, 1e-12)[..., None], 0.0).astype(np.float32)
    return d, normal


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
               with_image: bool = False, plane: bool = False, intrinsics=None) -> DepthMap:
        """Render view ``view`` of the ``n`` packed Gaussians in ``params`` (waits for the GPU).
        ``plane``: also the plane depth and normals (module docstring); needs ``intrinsics``
        (fx, fy, cx, cy) of the view."""
        r = self.raster
        r.prepare(params, n, cams, view, sh_degree, geometry=plane)
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
        pd = nd = None
        if plane:
            pd, nd = plane_depth(self.gpu.read(r.geom_image, np.float32, shape=shape + (4,)), *intrinsics[:4])
        return DepthMap(maps["depth"], maps["alpha"], maps["median"], img, pd, nd)
