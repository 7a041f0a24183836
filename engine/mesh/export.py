"""Mesh export with trimesh: GLB (binary glTF 2.0, PBR base-colour texture embedded),
OBJ + MTL + PNG (Kd 1 so viewers show the texture unscaled), and PLY with per-vertex RGBA
colours. Every file is written to a temporary name in its folder and renamed into place
(texture first, OBJ last), so a reader never sees a half-written set.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from .atlas import UvMesh


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; exports are for other programs to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _textured(uv: UvMesh, texture: np.ndarray, pbr: bool, name: str):
    import trimesh
    from trimesh.visual import TextureVisuals
    from trimesh.visual.material import PBRMaterial, SimpleMaterial

    img = Image.fromarray(texture)
    if pbr:
        mat = PBRMaterial(name=name, baseColorTexture=img, metallicFactor=0.0, roughnessFactor=1.0)
    else:
        mat = SimpleMaterial(name=name, image=img, diffuse=(255, 255, 255, 255), ambient=(255, 255, 255, 255),
                             specular=(0, 0, 0, 255))
    return trimesh.Trimesh(uv.vertices, uv.faces, visual=TextureVisuals(uv=uv.uvs, material=mat), process=False)


def export_meshes(out_dir: Path, uv: UvMesh, texture: np.ndarray, verts: np.ndarray, faces: np.ndarray,
                  vertex_colors: np.ndarray, stem: str = "mesh", formats=("glb", "obj", "ply")) -> dict[str, Path]:
    """Write ``<stem>.glb``, ``<stem>.obj`` / ``.mtl`` / ``.png`` and ``<stem>.ply`` into
    ``out_dir``; returns {kind: path}. ``uv``: the seam-split textured mesh; ``texture``
    [S, S, 3] uint8 (row 0 = top); ``verts`` [V, 3], ``faces`` [F, 3], ``vertex_colors``
    [V, 3] uint8: the unsplit mesh for the PLY."""
    import trimesh
    from trimesh.exchange.obj import export_obj

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    if "glb" in formats:
        paths["glb"] = out_dir / f"{stem}.glb"
        _atomic_write(paths["glb"], _textured(uv, texture, True, stem).export(file_type="glb"))
    if "obj" in formats:
        text, files = export_obj(_textured(uv, texture, False, stem), include_normals=False, include_texture=True,
                                 return_texture=True, mtl_name=f"{stem}.mtl")
        for name in sorted(files, key=lambda n: n.endswith(".mtl")):  # texture, then material
            _atomic_write(out_dir / name, files[name])
            paths["mtl" if name.endswith(".mtl") else "png"] = out_dir / name
        paths["obj"] = out_dir / f"{stem}.obj"
        _atomic_write(paths["obj"], text.encode("utf-8"))
    if "ply" in formats:
        rgba = np.concatenate([vertex_colors, np.full((len(vertex_colors), 1), 255, np.uint8)], 1)
        m = trimesh.Trimesh(verts, faces, vertex_colors=rgba, process=False)
        paths["ply"] = out_dir / f"{stem}.ply"
        _atomic_write(paths["ply"], m.export(file_type="ply", encoding="binary"))
    return paths


def save_png(path: Path, rgb: np.ndarray) -> None:
    """Atomic PNG write of an [H, W, 3|4] uint8 image."""
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    _atomic_write(Path(path), buf.getvalue())
