"""The viewport's triangle rasteriser: a TexturedMesh (spirula/engine/studio/mesh_view.py) on the
GPU and the three compute passes of shaders/view/mesh.slang (depth, visible triangle id,
per-pixel resolve with perspective-correct uv, bilinear texture, optional headlight).

Its output is what spirula/engine/splat/render.Rasterizer leaves for the viewer: ``image`` [h, w, 3]
float32 RGB over black and ``final_T`` [h, w] float32 (1 where no triangle covers a pixel),
so the viewer composes it over its background the same way. Cost: one GPU thread per
triangle walks its pixel box (twice), one per pixel resolves; nothing per triangle or pixel
in Python."""

from __future__ import annotations

import numpy as np
import slangpy as spy

from ..device import Gpu
from ..splat.buffers import BufferSet

SHADINGS = ("texture", "shaded", "clay")   # shaders/view/mesh.slang SHADE_* in this order
AMBIENT = 0.3          # the headlight's floor: faces seen edge-on keep this much of their colour


def pack_rgba8(rgb: np.ndarray) -> np.ndarray:
    """[..., 3] uint8 -> [...] uint32, R in the low byte, alpha 255."""
    rgb = np.asarray(rgb, np.uint32)
    return rgb[..., 0] | (rgb[..., 1] << 8) | (rgb[..., 2] << 16) | np.uint32(0xFF000000)


class MeshGpu:
    """A mesh's buffers on the device (uploaded once, drawn every frame)."""

    def __init__(self, gpu: Gpu, mesh):
        self.n = mesh.n
        self.verts = gpu.upload(np.ascontiguousarray(mesh.vertices, np.float32), "viewer.mesh.vertices")
        self.faces = gpu.upload(np.ascontiguousarray(mesh.faces, np.uint32), "viewer.mesh.faces")
        self.colors = gpu.upload(pack_rgba8(mesh.colors), "viewer.mesh.colors")
        if mesh.texture is not None:
            self.uvs = gpu.upload(np.ascontiguousarray(mesh.uv, np.float32), "viewer.mesh.uv")
            self.tex = gpu.upload(pack_rgba8(mesh.texture), "viewer.mesh.texture")
            self.tex_h, self.tex_w = mesh.texture.shape[:2]
        else:
            self.uvs = self.tex = gpu.zeros(16, "viewer.mesh.none")
            self.tex_h = self.tex_w = 0


class MeshRasterizer:
    def __init__(self, gpu: Gpu):
        self.gpu = gpu
        self.k_tris = gpu.kernel("view/mesh", "raster_tris")
        self.k_resolve = gpu.kernel("view/mesh", "resolve")
        self.bufs = BufferSet(gpu, "viewer.mesh")

    @property
    def image(self) -> spy.Buffer:
        return self.bufs["image"]

    @property
    def final_t(self) -> spy.Buffer:
        return self.bufs["final_T"]

    def record(self, enc, mesh: MeshGpu, cams: spy.Buffer, cam_index: int, width: int, height: int,
               shading: str = "texture") -> None:
        """Record the three passes for camera row ``cam_index`` of ``cams`` at ``width`` x
        ``height`` pixels into ``enc``. ValueError for an unknown ``shading``."""
        if shading not in SHADINGS:
            raise ValueError(f"mesh shading {shading!r}: expected one of {SHADINGS}")
        self.bufs.trim()
        npx = width * height
        depth, ids = self.bufs.get("depth", 4 * npx), self.bufs.get("ids", 4 * npx)
        image, final_t = self.bufs.get("image", 12 * npx), self.bufs.get("final_T", 4 * npx)
        self.gpu.clear(enc, depth)
        self.gpu.clear(enc, ids)
        for pass_index in (0, 1):
            self.k_tris.dispatch(thread_count=[max(mesh.n, 1), 1, 1], command_encoder=enc, verts=mesh.verts,
                                 faces=mesh.faces, cams=cams, depth=depth, ids=ids, cam_index=cam_index,
                                 num_faces=mesh.n, pass_index=pass_index, out_w=width, out_h=height)
        self.k_resolve.dispatch(thread_count=[width, height, 1], command_encoder=enc, verts=mesh.verts,
                                faces=mesh.faces, uvs=mesh.uvs, colors=mesh.colors, tex=mesh.tex, cams=cams, ids=ids,
                                image=image, final_T=final_t, cam_index=cam_index,
                                has_texture=int(mesh.tex_w > 0), tex_w=max(mesh.tex_w, 1), tex_h=max(mesh.tex_h, 1),
                                shading=SHADINGS.index(shading), ambient=AMBIENT, out_w=width, out_h=height)
