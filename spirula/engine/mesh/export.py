"""Mesh export: GLB (binary glTF 2.0, PBR base-colour texture embedded; written here),
OBJ + MTL + PNG (trimesh; Kd 1 so viewers show the texture unscaled), and PLY with
per-vertex RGBA colours (trimesh). Every file is written to a temporary name in its folder
and renamed into place (texture first, OBJ last), so a reader never sees a half-written set.

The texture is encoded to PNG once, at zlib level 1, and that one file goes into the GLB
and beside the OBJ: trimesh encoded the 4096^2 texture twice at PIL's default level 6
(1.6 s each on the chair video's; level 1: 0.6 s, a 20% larger file, still lossless).
"""

from __future__ import annotations

import io
import json
import os
import struct
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from .atlas import UvMesh
from ..optional import need


def _atomic_write(path: Path, data: bytes) -> None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        from ..fileio import write_error

        raise write_error(path, "mesh file", e) from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; exports are for other programs to read
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):  # full disk, read-only, permission: one line naming the file
            from ..fileio import write_error

            raise write_error(path, "mesh file", e) from e
        raise


PNG_LEVEL = 1   # zlib level of the texture's PNG (see the module docstring)


def encode_png(rgb: np.ndarray, level: int = PNG_LEVEL) -> bytes:
    """PNG bytes of an [H, W, 3|4] uint8 image."""
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG", compress_level=int(level))
    return buf.getvalue()


def glb_bytes(vertices: np.ndarray, faces: np.ndarray, uvs: np.ndarray, png: bytes, name: str = "mesh") -> bytes:
    """A binary glTF 2.0 file: one mesh (vertices [V, 3], faces [F, 3], uvs [V, 2] with v up,
    as trimesh's), one PBR material (metallic 0, roughness 1) whose base colour is the
    texture ``png`` (bytes, row 0 = top)."""
    pos = np.ascontiguousarray(vertices, np.float32)
    tex = np.ascontiguousarray(np.stack([uvs[:, 0], 1.0 - uvs[:, 1]], 1), np.float32)  # glTF: v down
    idx = np.ascontiguousarray(faces, np.uint32)
    blobs, views = [], []
    offset = 0
    for data, target in ((pos.tobytes(), 34962), (tex.tobytes(), 34962), (idx.tobytes(), 34963), (png, None)):
        view = {"buffer": 0, "byteOffset": offset, "byteLength": len(data)}
        if target:
            view["target"] = target
        views.append(view)
        pad = (-len(data)) % 4
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    tree = {
        "asset": {"version": "2.0", "generator": "spirula"},
        "scene": 0, "scenes": [{"nodes": [0]}], "nodes": [{"mesh": 0, "name": name}],
        "meshes": [{"name": name, "primitives": [{"attributes": {"POSITION": 0, "TEXCOORD_0": 1}, "indices": 2,
                                                  "material": 0, "mode": 4}]}],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": len(pos), "type": "VEC3",
             "min": pos.min(0).tolist() if len(pos) else [0, 0, 0], "max": pos.max(0).tolist() if len(pos) else [0, 0, 0]},
            {"bufferView": 1, "componentType": 5126, "count": len(tex), "type": "VEC2"},
            {"bufferView": 2, "componentType": 5125, "count": int(idx.size), "type": "SCALAR"}],
        "materials": [{"name": name, "pbrMetallicRoughness": {"baseColorTexture": {"index": 0},
                                                              "metallicFactor": 0.0, "roughnessFactor": 1.0}}],
        "textures": [{"sampler": 0, "source": 0}], "samplers": [{}],
        "images": [{"bufferView": 3, "mimeType": "image/png"}],
        "bufferViews": views, "buffers": [{"byteLength": offset}],
    }
    js = json.dumps(tree, separators=(",", ":")).encode("utf-8")
    js += b" " * ((-len(js)) % 4)
    body = b"".join(blobs)
    total = 12 + 8 + len(js) + 8 + len(body)
    return (struct.pack("<4sII", b"glTF", 2, total) + struct.pack("<I4s", len(js), b"JSON") + js
            + struct.pack("<I4s", len(body), b"BIN\0") + body)


def _obj_mesh(uv: UvMesh, name: str):
    """The trimesh mesh whose OBJ and MTL trimesh writes: its material's texture is a 1-texel
    stand-in (the PNG beside them is ours, encoded once)."""
    trimesh = need("trimesh")
    from trimesh.visual import TextureVisuals
    from trimesh.visual.material import SimpleMaterial

    mat = SimpleMaterial(name=name, image=Image.fromarray(np.zeros((1, 1, 3), np.uint8)),
                         diffuse=(255, 255, 255, 255), ambient=(255, 255, 255, 255), specular=(0, 0, 0, 255))
    return trimesh.Trimesh(uv.vertices, uv.faces, visual=TextureVisuals(uv=uv.uvs, material=mat), process=False)


def export_meshes(out_dir: Path, uv: UvMesh, texture: np.ndarray, verts: np.ndarray, faces: np.ndarray,
                  vertex_colors: np.ndarray, stem: str = "mesh", formats=("glb", "obj", "ply")) -> dict[str, Path]:
    """Write ``<stem>.glb``, ``<stem>.obj`` / ``.mtl`` / ``.png`` and ``<stem>.ply`` into
    ``out_dir``; returns {kind: path}. ``uv``: the seam-split textured mesh; ``texture``
    [S, S, 3] uint8 (row 0 = top); ``verts`` [V, 3], ``faces`` [F, 3], ``vertex_colors``
    [V, 3] uint8: the unsplit mesh for the PLY."""
    trimesh = need("trimesh")
    from trimesh.exchange.obj import export_obj

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    png = encode_png(texture) if {"glb", "obj"} & set(formats) else b""
    if "glb" in formats:
        paths["glb"] = out_dir / f"{stem}.glb"
        _atomic_write(paths["glb"], glb_bytes(uv.vertices, uv.faces, uv.uvs, png, stem))
    if "obj" in formats:
        text, files = export_obj(_obj_mesh(uv, stem), include_normals=False, include_texture=True,
                                 return_texture=True, mtl_name=f"{stem}.mtl")
        for name in sorted(files, key=lambda n: n.endswith(".mtl")):  # texture, then material
            _atomic_write(out_dir / name, files[name] if name.endswith(".mtl") else png)
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
