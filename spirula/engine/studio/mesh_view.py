"""A textured triangle mesh for the viewport, read from the exported file itself (GLB,
OBJ + MTL + PNG, PLY) with trimesh: what the viewport shows is what was written. The
triangles are drawn by the viewport's triangle rasteriser (spirula/engine/studio/mesh_raster.py,
shaders/view/mesh.slang) with a depth test and the texture sampled per pixel.

Conventions: vertices in the file's world units, faces index vertices (counter-clockwise or
not: both sides are drawn), uv with v up (texture row = (1 - v) * height, as trimesh reads
GLB and OBJ), colours sRGB-encoded bytes as stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from ..optional import need

GREY = 160             # colour of a mesh with neither texture nor vertex colours (0..255)


@dataclass
class TexturedMesh:
    """vertices [V, 3] float32, faces [F, 3] uint32, uv [V, 2] float32 or None, texture
    [H, W, 3] uint8 or None, colors [V, 3] uint8 (white under a texture)."""

    vertices: np.ndarray
    faces: np.ndarray
    uv: np.ndarray | None
    texture: np.ndarray | None
    colors: np.ndarray
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.faces)

    def bounds(self) -> tuple[np.ndarray, float]:
        """(centre [3], radius) of the vertices: their median and 90th-percentile distance."""
        if len(self.vertices) == 0:
            return np.zeros(3), 1.0
        v = self.vertices.astype(np.float64)
        c = np.median(v, axis=0)
        return c, float(np.percentile(np.linalg.norm(v - c, axis=1), 90)) or 1.0


def read_textured_mesh(path: str | Path) -> TexturedMesh:
    """The mesh at ``path`` with its base-colour texture (PBR or MTL) or vertex colours.
    Raises SpirulaError naming the file when it cannot be read or has no triangles."""
    trimesh = need("trimesh")

    path = Path(path)
    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
    except Exception as exc:  # trimesh raises many kinds for a bad file
        raise SpirulaError(f"{path}: cannot read the mesh ({type(exc).__name__}: {exc})") from exc
    verts = np.asarray(getattr(mesh, "vertices", np.zeros((0, 3))), np.float32)
    faces = np.asarray(getattr(mesh, "faces", np.zeros((0, 3))), np.int64)
    if len(faces) == 0:
        raise SpirulaError(f"{path}: the mesh has no triangles")
    if faces.min() < 0 or faces.max() >= len(verts):
        raise SpirulaError(f"{path}: a face indexes a vertex that does not exist")
    if not np.isfinite(verts).all():
        raise SpirulaError(f"{path}: the mesh has non-finite vertex positions")
    vis = mesh.visual
    uv = getattr(vis, "uv", None)
    material = getattr(vis, "material", None)
    image = getattr(material, "baseColorTexture", None) or getattr(material, "image", None)
    texture = None
    if uv is not None and image is not None and len(uv) == len(verts):
        texture = np.ascontiguousarray(np.asarray(image.convert("RGB"), np.uint8))
        uv = np.asarray(uv, np.float32)
        colors = np.full((len(verts), 3), 255, np.uint8)
    else:
        uv = None
        vc = getattr(vis, "vertex_colors", None) if getattr(vis, "kind", None) == "vertex" else None
        if vc is not None and len(vc) == len(verts):
            colors = np.asarray(vc, np.uint8)[:, :3]
        else:
            colors = np.full((len(verts), 3), GREY, np.uint8)
    what = "textured" if texture is not None else "untextured"
    return TexturedMesh(verts, faces.astype(np.uint32), uv, texture, np.ascontiguousarray(colors),
                        [f"{path}: a {what} mesh of {len(faces):,} triangles"])
