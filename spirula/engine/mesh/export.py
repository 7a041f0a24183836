"""Mesh export: GLB (binary glTF 2.0, PBR base-colour texture embedded; written here),
OBJ + MTL + PNG (written here, the OBJ formatted column-wise in NumPy; Kd 1 so viewers
show the texture unscaled), and PLY with
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


def _int_chars(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[N] int64 >= 0 -> ([N, W] uint8 ASCII digits right-aligned, [N, W] bool: the columns
    that belong to each number (no leading zeros; "0" for zero))."""
    width = max(1, len(str(int(x.max())))) if len(x) else 1
    chars = np.empty((len(x), width), np.uint8)
    keep = np.empty((len(x), width), bool)
    rest = x.copy()
    for k in range(width):   # one pass per digit column
        chars[:, width - 1 - k] = 48 + rest % 10
        keep[:, width - 1 - k] = (rest > 0) | (k == 0)
        rest //= 10
    return chars, keep


def _fixed_chars(x: np.ndarray, decimals: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """[N] float -> (chars, keep) as :func:`_int_chars` of ``"%.{decimals}f" % x`` (sign,
    integer digits, point, ``decimals`` digits; rounded from x x 10^decimals in float64, so
    the last digit may differ from Python's exact rounding by one unit)."""
    scaled = np.rint(np.abs(x) * 10.0 ** decimals).astype(np.int64)
    whole, frac = np.divmod(scaled, 10 ** decimals)
    ic, ik = _int_chars(whole)
    fc = np.empty((len(x), decimals), np.uint8)
    for k in range(decimals):
        fc[:, decimals - 1 - k] = 48 + frac % 10
        frac //= 10
    sign = np.full((len(x), 1), ord("-"), np.uint8)
    point = np.full((len(x), 1), ord("."), np.uint8)
    return (np.hstack([sign, ic, point, fc]),
            np.hstack([np.signbit(x)[:, None], ik, np.ones((len(x), 1 + decimals), bool)]))


def _lines(prefix: bytes, fields: list[tuple[np.ndarray, np.ndarray]], seps: list[bytes]) -> bytes:
    """The text of N lines: ``prefix``, then each field's chars (:func:`_int_chars`) after its
    separator in ``seps``, then a newline; built as one char matrix, the unused columns dropped."""
    n = len(fields[0][0])
    parts, keeps = [np.frombuffer(prefix, np.uint8)[None].repeat(n, 0)], [np.ones((n, len(prefix)), bool)]
    for sep, (chars, keep) in zip(seps, fields):
        parts += [np.frombuffer(sep, np.uint8)[None].repeat(n, 0), chars]
        keeps += [np.ones((n, len(sep)), bool), keep]
    parts.append(np.full((n, 1), ord("\n"), np.uint8))
    keeps.append(np.ones((n, 1), bool))
    return np.hstack(parts)[np.hstack(keeps)].tobytes()


OBJ_LIMIT = 1e9   # coordinates at or beyond this (or not finite) are written by Python's formatting


def obj_text(vertices: np.ndarray, faces: np.ndarray, uvs: np.ndarray, mtl_name: str, material: str) -> bytes:
    """Wavefront OBJ bytes: ``v x y z`` ([V, 3], 8 decimals), ``vt u v`` ([V, 2], v up),
    ``f a/a b/b c/c`` (faces [F, 3], 1-based, each vertex its own uv), after ``mtllib`` and
    ``usemtl``. Formatted column-wise in NumPy (Python's formatting per number took ~5 s for
    a 500k-face mesh)."""
    head = f"# spirula\nmtllib {mtl_name}\nusemtl {material}\n".encode()
    v = np.asarray(vertices, np.float64)
    t = np.asarray(uvs, np.float64)
    f = np.asarray(faces, np.int64) + 1
    if not (np.isfinite(v).all() and np.isfinite(t).all()) or max(np.abs(v).max(initial=0), np.abs(t).max(initial=0)) >= OBJ_LIMIT:
        body = "".join("v %.8f %.8f %.8f\n" % tuple(r) for r in v.tolist())
        body += "".join("vt %.8f %.8f\n" % tuple(r) for r in t.tolist())
        body += "".join("f %d/%d %d/%d %d/%d\n" % (a, a, b, b, c, c) for a, b, c in f.tolist())
        return head + body.encode()
    out = [head]
    if len(v):
        out.append(_lines(b"v", [_fixed_chars(v[:, k]) for k in range(3)], [b" "] * 3))
        out.append(_lines(b"vt", [_fixed_chars(t[:, k]) for k in range(2)], [b" "] * 2))
    if len(f):
        cols = [_int_chars(f[:, k]) for k in range(3)]
        out.append(_lines(b"f", [cols[0], cols[0], cols[1], cols[1], cols[2], cols[2]], [b" ", b"/"] * 3))
    return b"".join(out)


def mtl_text(material: str, texture: str) -> bytes:
    """The MTL of one material: white ambient and diffuse (Kd 1: the texture unscaled), no
    specular, ``map_Kd`` the texture file."""
    return (f"newmtl {material}\nKa 1.00000000 1.00000000 1.00000000\nKd 1.00000000 1.00000000 1.00000000\n"
            f"Ks 0.00000000 0.00000000 0.00000000\nNs 1.00000000\nmap_Kd {texture}\n").encode()


def export_meshes(out_dir: Path, uv: UvMesh, texture: np.ndarray, verts: np.ndarray, faces: np.ndarray,
                  vertex_colors: np.ndarray, stem: str = "mesh", formats=("glb", "obj", "ply")) -> dict[str, Path]:
    """Write ``<stem>.glb``, ``<stem>.obj`` / ``.mtl`` / ``.png`` and ``<stem>.ply`` into
    ``out_dir``; returns {kind: path}. ``uv``: the seam-split textured mesh; ``texture``
    [S, S, 3] uint8 (row 0 = top); ``verts`` [V, 3], ``faces`` [F, 3], ``vertex_colors``
    [V, 3] uint8: the unsplit mesh for the PLY."""
    trimesh = need("trimesh")

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    png = encode_png(texture) if {"glb", "obj"} & set(formats) else b""
    if "glb" in formats:
        paths["glb"] = out_dir / f"{stem}.glb"
        _atomic_write(paths["glb"], glb_bytes(uv.vertices, uv.faces, uv.uvs, png, stem))
    if "obj" in formats:
        paths["png"], paths["mtl"], paths["obj"] = (out_dir / f"{stem}.{e}" for e in ("png", "mtl", "obj"))
        _atomic_write(paths["png"], png)   # texture, then material, then the OBJ
        _atomic_write(paths["mtl"], mtl_text(stem, paths["png"].name))
        _atomic_write(paths["obj"], obj_text(uv.vertices, uv.faces, uv.uvs, paths["mtl"].name, stem))
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
