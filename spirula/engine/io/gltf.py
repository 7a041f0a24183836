"""3D Gaussian splats in glTF 2.0 with Khronos's ``KHR_gaussian_splatting`` extension, as
binary ``.glb`` or JSON ``.gltf`` (its buffer embedded as a base64 data URI).

Spec followed: KhronosGroup/glTF ``extensions/2.0/Khronos/KHR_gaussian_splatting/README.md``,
status "Release Candidate" (copyright 2026, the text after the April-2026 editorial pass that
made SCALE linear; earlier "Draft" / "Review Draft" texts of 2025 stored SCALE in log
space). The SPZ compression extension (``KHR_gaussian_splatting_compression_spz_2``) is
published only as a Draft; it is not written, and a file that requires it is refused.

One mesh primitive, ``mode`` POINTS (0), N points, every attribute its own tightly packed
bufferView (4-byte aligned) of the one buffer:

- ``POSITION``: VEC3 float, with min / max (glTF requires them);
- ``KHR_gaussian_splatting:ROTATION``: VEC4, unit quaternion in glTF order **x, y, z, w**;
- ``KHR_gaussian_splatting:SCALE``: VEC3, **linear** standard deviations (``exp`` of our
  log scales), never negative;
- ``KHR_gaussian_splatting:OPACITY``: SCALAR, **linear** opacity in [0, 1] (``sigmoid`` of
  our logits);
- ``KHR_gaussian_splatting:SH_DEGREE_0_COEF_0``: VEC3 float, the DC coefficients as they are
  (colour = 0.2820947917738781 * c + 0.5);
- ``KHR_gaussian_splatting:SH_DEGREE_l_COEF_n`` (l = 1..degree, n = 0..2l, i.e. m = n - l from
  lowest to highest): VEC3 float (r, g, b); this is the 3DGS / our ``shN`` order (coefficient
  l^2 - 1 + n) and the same real SH with the Condon-Shortley phase (spirula/engine/io/quantize.py
  ``sh_basis``);
- ``COLOR_0``: VEC4 float, the point-cloud fallback: the diffuse colour clamped to [0, 1]
  and decoded from sRGB to linear (COLOR_0 is linear in glTF), alpha the opacity.

The extension object: ``kernel`` "ellipse", ``colorSpace`` "srgb_rec709_display" (our
training renders display-referred sRGB), ``projection`` "perspective", ``sortingMethod``
"cameraDistance". ``KHR_gaussian_splatting`` is in extensionsUsed, not extensionsRequired (a
viewer without it shows the point cloud). Per-splat properties outside 3DGS (``extra``) are
not written.

Coordinates: glTF is right-handed, +Y up, +Z the asset's front (RUB, as three.js and
SPZ). Our world, like the 3DGS PLY's, is RDF (x right, y down, z forward, OpenCV/COLMAP), so
writing and reading negate y and z, as spirula/engine/io/spz.py does: positions ``(x, -y, -z)``;
quaternions ``(w, x, -y, -z)`` (a 180 degree turn about x); each SH coefficient times its
basis function's parity under the flip (``sh_axis_signs``). No node transform is written.

Reading accepts what the text allows: ROTATION float or normalized signed byte / short;
SCALE float, unsigned byte / short, normalized or not; OPACITY float or normalized unsigned
byte / short; POSITION float (or, with KHR_mesh_quantization, any integer type); SH float.
Normalized integers are dequantized as glTF says (``max(c / 127, -1)``, ``c / 255``, ...).
Interleaved bufferViews (byteStride) are read. Several splat primitives (of one mesh or of
several nodes) are concatenated; a lower SH degree is padded with zero coefficients (exact:
no view dependence). Each node's global transform (matrix or TRS down the scene's
hierarchy) is applied: translation, rotation and a uniform positive scale to positions,
rotations and (log) scales; the SH of a primitive turned by a rotation other than the
identity or a half turn about an axis are cut to degree 0 with a note (this reader does
not rotate SH); the scene graph is read by spirula/engine/io/gltf_nodes.py. Primitives without the
extension (meshes) are skipped with a note.

Refused with :class:`spirula.engine.errors.SplatFileError` naming the file, in one line:

- the container: GLB magic, version other than 2, a length field other than the file's, a
  chunk running past the file, a first chunk that is not JSON, a second that is not BIN,
  JSON that is not valid UTF-8 JSON or not an object, ``asset.version`` not 2.x;
- ``extensionsRequired`` naming anything but KHR_gaussian_splatting / KHR_mesh_quantization
  (e.g. the SPZ compression, meshopt, Draco);
- no primitive with KHR_gaussian_splatting; a splat primitive whose ``mode`` is not POINTS,
  whose ``kernel`` is not "ellipse", whose ``colorSpace`` is missing or not
  "srgb_rec709_display" ("lin_rec709_display" colours cannot be turned into our sRGB SH
  exactly), whose ``projection`` is not "perspective"; a missing POSITION, ROTATION, SCALE,
  OPACITY or SH_DEGREE_0_COEF_0; an SH degree partly defined or above 3; a node transform
  that is not translation, rotation and one positive scale;
- the header against the data, like our other readers: every accessor of a primitive has
  the POSITION's count (1 .. MAX_SPLATS), the type and a component type the text allows,
  no ``sparse`` and a bufferView; each element lies inside its bufferView (offset + stride
  x (count - 1) + element size), aligned to its component size; each bufferView inside its
  buffer; each buffer's bytes present (the GLB BIN chunk at least its byteLength and at most
  3 bytes longer; a data URI or a file beside a .gltf at least its byteLength; no other URI
  schemes and no path outside the .gltf's folder);
- values the text calls invalid: a negative scale, an opacity outside [0, 1].

Gaussians with non-finite values (or a zero scale, whose log is -inf) are dropped with a
note, as the other readers do. Precision: positions, rotations and SH round-trip exactly
(float32); scales through exp/log and opacities through sigmoid/logit in float32 (logits
beyond about +-15 saturate; the probability is kept to 1e-7).
"""

from __future__ import annotations

import base64
import json
import os
import struct
from pathlib import Path

import numpy as np

from ..errors import SplatFileError
from .ply import GaussianPly
from .ply_points import SH_C0
from .quantize import SH_COUNT, logit, sh_axis_signs, sigmoid, unit_quats
from .gltf_nodes import decompose, instances, matrix_quat, need_index as _need_index, quat_mul
from .splat_file import MAX_SPLATS, check_finite, finish, read_bytes, write_bytes

__all__ = ["FORMAT", "EXTENSION", "read_gltf", "write_gltf", "encode_gltf", "is_glb", "RDF_TO_GLTF"]

FORMAT = "glTF"
EXTENSION = "KHR_gaussian_splatting"
PREFIX = EXTENSION + ":"
RDF_TO_GLTF = (1.0, -1.0, -1.0)
COLOR_SPACE = "srgb_rec709_display"
_OK_REQUIRED = {EXTENSION, "KHR_mesh_quantization"}
_GLB_MAGIC, _JSON, _BIN = 0x46546C67, 0x4E4F534A, 0x004E4942
_FLOAT, _BYTE, _UBYTE, _SHORT, _USHORT, _UINT = 5126, 5120, 5121, 5122, 5123, 5125
_DTYPES = {_BYTE: "i1", _UBYTE: "u1", _SHORT: "<i2", _USHORT: "<u2", _UINT: "<u4", _FLOAT: "<f4"}
_COMPONENTS = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT2": 4, "MAT3": 9, "MAT4": 16}
_NAMES = {_FLOAT: "float", _BYTE: "byte", _UBYTE: "unsigned byte", _SHORT: "short", _USHORT: "unsigned short",
          _UINT: "unsigned int"}
# (type, {componentType: normalized allowed / required}) per attribute; None: either
_ANY_INT = {c: None for c in (_BYTE, _UBYTE, _SHORT, _USHORT)}
_RULES = {
    "POSITION": ("VEC3", {_FLOAT: False, **_ANY_INT}),
    PREFIX + "ROTATION": ("VEC4", {_FLOAT: False, _BYTE: True, _SHORT: True}),
    PREFIX + "SCALE": ("VEC3", {_FLOAT: False, _UBYTE: None, _USHORT: None}),
    PREFIX + "OPACITY": ("SCALAR", {_FLOAT: False, _UBYTE: True, _USHORT: True}),
}
_SH_RULE = ("VEC3", {_FLOAT: False})
_REQUIRED = ("POSITION", PREFIX + "ROTATION", PREFIX + "SCALE", PREFIX + "OPACITY", PREFIX + "SH_DEGREE_0_COEF_0")


def _sh_name(degree: int, n: int) -> str:
    return f"{PREFIX}SH_DEGREE_{degree}_COEF_{n}"


def _srgb_to_linear(c: np.ndarray) -> np.ndarray:
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def is_glb(head: bytes) -> bool:
    """True when the first 4 bytes are the GLB magic "glTF"."""
    return len(head) >= 4 and struct.unpack_from("<I", head)[0] == _GLB_MAGIC


def holds_splats(path: str | os.PathLike, limit: int = 64 << 20) -> bool:
    """True when the glTF file ``path`` (``.glb`` or ``.gltf``) names KHR_gaussian_splatting in
    ``extensionsUsed`` or ``extensionsRequired``: the studio opens it as splats, else as a
    mesh. Reads the JSON only (a GLB's first chunk, at most ``limit`` bytes); a file that
    cannot be read or parsed is not splats (opening it then says what is wrong)."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
            if is_glb(head):
                size, kind = struct.unpack_from("<II", head, 12)
                if kind != _JSON or size > limit:
                    return False
                text = head[20:] + f.read(max(0, size - len(head[20:])))
            else:
                text = head + f.read(limit)
        doc = json.loads(text.decode("utf-8"))
    except (OSError, ValueError, struct.error):
        return False
    if not isinstance(doc, dict):
        return False
    names = [n for key in ("extensionsUsed", "extensionsRequired") for n in (doc.get(key) or [])
             if isinstance(doc.get(key), list)]
    return EXTENSION in names


# ---------------------------------------------------------------------------- writing

def _attributes(g: GaussianPly) -> list[tuple[str, np.ndarray, str]]:
    """(semantic, [N, k] float32 array, glTF type) of every attribute, in the glTF frame."""
    flip = np.asarray(RDF_TO_GLTF)
    pos = np.asarray(g.means, np.float64) * flip
    q = unit_quats(g.quats)                                       # w, x, y, z in our frame
    xyzw = np.stack([q[:, 1] * flip[0], q[:, 2] * flip[1], q[:, 3] * flip[2], q[:, 0]], axis=1)
    opacity = sigmoid(g.opacities)
    rgb = np.clip(SH_C0 * np.asarray(g.sh0, np.float64) + 0.5, 0.0, 1.0)
    out = [("POSITION", pos, "VEC3"),
           ("COLOR_0", np.concatenate([_srgb_to_linear(rgb), opacity[:, None]], axis=1), "VEC4"),
           (PREFIX + "ROTATION", xyzw, "VEC4"),
           (PREFIX + "SCALE", np.exp(np.asarray(g.scales, np.float64)), "VEC3"),
           (PREFIX + "OPACITY", opacity[:, None], "SCALAR"),
           (_sh_name(0, 0), np.asarray(g.sh0, np.float64), "VEC3")]
    degree = g.sh_degree
    shn = np.asarray(g.shN, np.float64) * sh_axis_signs(RDF_TO_GLTF, degree)[None, :, None]
    for l in range(1, degree + 1):
        for n in range(2 * l + 1):
            out.append((_sh_name(l, n), shn[:, l * l - 1 + n], "VEC3"))
    return [(name, np.ascontiguousarray(a, np.float32), t) for name, a, t in out]


def encode_gltf(g: GaussianPly, binary: bool = True) -> list[bytes]:
    """The file's bytes (in pieces, to write in order) for N >= 1 Gaussians: a GLB when
    ``binary``, else a .gltf whose buffer is a base64 data URI. ValueError for N = 0 (a glTF
    accessor holds at least one element)."""
    n = len(g)
    if n == 0:
        raise ValueError("no Gaussians to write (a glTF accessor holds at least one element)")
    views, accessors, attributes, blobs, offset = [], [], {}, [], 0
    for name, a, t in _attributes(g):
        raw = a.tobytes()
        acc = {"bufferView": len(views), "componentType": _FLOAT, "count": n, "type": t}
        if name == "POSITION":
            acc["min"] = [float(v) for v in a.min(axis=0)]
            acc["max"] = [float(v) for v in a.max(axis=0)]
        views.append({"buffer": 0, "byteOffset": offset, "byteLength": len(raw), "target": 34962})
        attributes[name] = len(accessors)
        accessors.append(acc)
        blobs.append(raw)
        offset += len(raw)                     # float32 arrays: every length a multiple of 4
    total = offset
    doc = {
        "asset": {"version": "2.0", "generator": "Spirula Studio"},
        "extensionsUsed": [EXTENSION],
        "scene": 0, "scenes": [{"nodes": [0]}], "nodes": [{"mesh": 0, "name": "splats"}],
        "meshes": [{"primitives": [{"attributes": attributes, "mode": 0, "extensions": {EXTENSION: {
            "kernel": "ellipse", "colorSpace": COLOR_SPACE, "projection": "perspective",
            "sortingMethod": "cameraDistance"}}}]}],
        "accessors": accessors, "bufferViews": views, "buffers": [{"byteLength": total}],
    }
    if not binary:
        doc["buffers"][0]["uri"] = "data:application/octet-stream;base64," + base64.b64encode(b"".join(blobs)).decode()
        return [json.dumps(doc, indent=1).encode()]
    js = json.dumps(doc, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 4)
    length = 12 + 8 + len(js) + 8 + total
    return [struct.pack("<III", _GLB_MAGIC, 2, length), struct.pack("<II", len(js), _JSON), js,
            struct.pack("<II", total, _BIN), *blobs]


def write_gltf(path: str | os.PathLike, g: GaussianPly, binary: bool | None = None) -> int:
    """Write ``g`` ([N >= 1] Gaussians) as glTF with KHR_gaussian_splatting, atomically: a
    GLB when ``binary`` (default: unless the name ends in .gltf). Returns the byte count;
    SplatFileError naming the file for non-finite values or no Gaussians (nothing written)."""
    if binary is None:
        binary = Path(path).suffix.lower() != ".gltf"
    g = check_finite(path, FORMAT, g)
    try:
        parts = encode_gltf(g, binary)
    except ValueError as e:
        raise SplatFileError(path, FORMAT, f"not written: {e}") from None
    return write_bytes(path, parts)


# ---------------------------------------------------------------------------- reading

def _split_glb(data: bytes) -> tuple[bytes, bytes | None]:
    """(JSON chunk, BIN chunk or None) of a GLB; ValueError for a malformed container."""
    if len(data) < 20:
        raise ValueError(f"the GLB header is truncated ({len(data)} bytes; a header and a chunk header take 20)")
    _, version, length = struct.unpack_from("<III", data)
    if version != 2:
        raise ValueError(f"GLB version {version} (this reader knows glTF 2.0's GLB, version 2)")
    if length != len(data):
        raise ValueError(f"the GLB header says {length:,} bytes, the file has {len(data):,}"
                         + (" (truncated)" if length > len(data) else " (trailing data)"))
    chunks, at = [], 12
    while at < len(data):
        if at + 8 > len(data):
            raise ValueError(f"a chunk header at byte {at:,} is truncated")
        size, kind = struct.unpack_from("<II", data, at)
        if at + 8 + size > len(data):
            short = at + 8 + size - len(data)
            raise ValueError(f"the chunk at byte {at:,} claims {size:,} bytes; the file ends {short:,} bytes short")
        chunks.append((kind, data[at + 8:at + 8 + size]))
        at += 8 + size
    if chunks[0][0] != _JSON:
        raise ValueError(f"the first chunk is of type 0x{chunks[0][0]:08x}, not JSON")
    if len(chunks) > 1 and chunks[1][0] != _BIN:
        raise ValueError(f"the second chunk is of type 0x{chunks[1][0]:08x}, not BIN")
    return chunks[0][1], (chunks[1][1] if len(chunks) > 1 else None)


def _nonneg_int(obj: dict, key: str, where: str, default=None) -> int:
    v = obj.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError(f"{where}'s {key} is {json.dumps(v)}, not a whole number >= 0")
    return v


class _Buffers:
    """The bytes of each buffer, loaded on first use and checked against its byteLength."""

    def __init__(self, path: Path, doc: dict, bin_chunk: bytes | None):
        self.path, self.doc, self.bin, self.cache = path, doc, bin_chunk, {}

    def get(self, i: int) -> bytes:
        buf = _need_index(self.doc, "buffers", i, "a bufferView")
        if i in self.cache:
            return self.cache[i]
        length = _nonneg_int(buf, "byteLength", f"buffer {i}")
        uri = buf.get("uri")
        if uri is None:
            if i != 0 or self.bin is None:
                raise ValueError(f"buffer {i} has no uri and is not a GLB's BIN chunk")
            if len(self.bin) < length or len(self.bin) - length > 3:
                raise ValueError(f"buffer 0 declares {length:,} bytes; the BIN chunk holds {len(self.bin):,}")
            data = self.bin
        elif not isinstance(uri, str):
            raise ValueError(f"buffer {i}'s uri is {json.dumps(uri)}, not text")
        elif uri.startswith("data:"):
            head, _, body = uri.partition(",")
            if not head.endswith(";base64"):
                raise ValueError(f"buffer {i}'s data URI is not base64")
            try:
                data = base64.b64decode(body, validate=True)
            except ValueError:
                raise ValueError(f"buffer {i}'s data URI is not valid base64") from None
        else:
            from urllib.parse import unquote

            rel = unquote(uri)
            if ":" in rel.split("/")[0] or rel.startswith("/") or ".." in Path(rel).parts:
                raise ValueError(f"buffer {i}'s uri {uri!r} is not a file beside the .gltf")
            try:
                data = (self.path.parent / rel).read_bytes()
            except OSError as e:
                raise ValueError(f"buffer {i}'s file {rel} cannot be read ({e.strerror or e})") from None
        if len(data) < length:
            raise ValueError(f"buffer {i} declares {length:,} bytes and holds {len(data):,} (truncated)")
        self.cache[i] = data
        return data


def _read_accessor(doc: dict, bufs: _Buffers, index, semantic: str, rule, count: int | None) -> np.ndarray:
    """[count, k] float64 values of accessor ``index`` for ``semantic`` checked against
    ``rule`` (type, {componentType: normalized}) and the header's count."""
    where = f"{semantic} (accessor {index})"
    acc = _need_index(doc, "accessors", index, f"attribute {semantic}")
    want_type, types = rule
    ctype, atype, norm = acc.get("componentType"), acc.get("type"), acc.get("normalized", False)
    if atype != want_type:
        raise ValueError(f"{where} is of type {json.dumps(atype)}; the extension says {want_type}")
    if ctype not in types:
        allowed = ", ".join(_NAMES[c] for c in types)
        raise ValueError(f"{where} has componentType {json.dumps(ctype)}; the extension allows {allowed}")
    if types[ctype] is not None and bool(norm) != types[ctype]:
        raise ValueError(f"{where}: {_NAMES[ctype]} components must {'' if types[ctype] else 'not '}be normalized")
    n = _nonneg_int(acc, "count", where)
    if n < 1 or n > MAX_SPLATS:
        raise ValueError(f"{where} claims {n:,} elements (1 to {MAX_SPLATS:,})")
    if count is not None and n != count:
        raise ValueError(f"{where} holds {n:,} elements; POSITION holds {count:,} (the counts must agree)")
    if "sparse" in acc:
        raise ValueError(f"{where} is sparse (not supported for splat attributes)")
    if "bufferView" not in acc:
        raise ValueError(f"{where} has no bufferView (no data)")
    view = _need_index(doc, "bufferViews", acc["bufferView"], where)
    vwhere = f"bufferView {acc['bufferView']}"
    buf = bufs.get(view.get("buffer"))
    v_off, v_len = _nonneg_int(view, "byteOffset", vwhere, 0), _nonneg_int(view, "byteLength", vwhere)
    blen = _nonneg_int(doc["buffers"][view["buffer"]], "byteLength", f"buffer {view['buffer']}")
    if v_off + v_len > blen:
        raise ValueError(f"{vwhere} spans bytes {v_off:,}..{v_off + v_len:,} of buffer {view['buffer']}, "
                         f"which has {blen:,}")
    dt = np.dtype(_DTYPES[ctype])
    k = _COMPONENTS[want_type]
    elem = dt.itemsize * k
    stride = view.get("byteStride", elem)
    if not isinstance(stride, int) or isinstance(stride, bool) or stride < elem or stride % dt.itemsize:
        raise ValueError(f"{vwhere}'s byteStride {json.dumps(stride)} does not fit {where}'s {elem}-byte elements")
    a_off = _nonneg_int(acc, "byteOffset", where, 0)
    if (v_off + a_off) % dt.itemsize:
        raise ValueError(f"{where} starts at byte {v_off + a_off:,}, not aligned to its {dt.itemsize}-byte components")
    need = a_off + stride * (n - 1) + elem
    if need > v_len:
        raise ValueError(f"{where}: {n:,} elements of {elem} bytes (stride {stride}) need {need:,} bytes of "
                         f"{vwhere}, which has {v_len:,} (wrong count or truncated data)")
    raw = np.ndarray((n, k), dt, buffer=buf, offset=v_off + a_off, strides=(stride, dt.itemsize))
    with np.errstate(invalid="ignore"):       # a signalling NaN: dropped later with a note (finish)
        vals = raw.astype(np.float64)
    if norm and ctype != _FLOAT:
        top = {_BYTE: 127.0, _UBYTE: 255.0, _SHORT: 32767.0, _USHORT: 65535.0}[ctype]
        vals = np.maximum(vals / top, -1.0)
    return vals


def _primitive(path, doc, bufs, prim, where, notes) -> dict:
    ext = prim["extensions"][EXTENSION]
    if not isinstance(ext, dict):
        raise ValueError(f"{where}'s {EXTENSION} is not an object")
    if prim.get("mode", 4) != 0:
        raise ValueError(f"{where} has mode {json.dumps(prim.get('mode', 4))}; splats must be POINTS (0)")
    if ext.get("kernel") != "ellipse":
        raise ValueError(f"{where}'s kernel is {json.dumps(ext.get('kernel'))}; this reader knows \"ellipse\"")
    if ext.get("colorSpace") != COLOR_SPACE:
        raise ValueError(f"{where}'s colorSpace is {json.dumps(ext.get('colorSpace'))}; this reader takes "
                         f"\"{COLOR_SPACE}\" (the display sRGB our renderer and training use)")
    if ext.get("projection", "perspective") != "perspective":
        raise ValueError(f"{where}'s projection is {json.dumps(ext.get('projection'))}; this reader knows "
                         "\"perspective\"")
    attrs = prim.get("attributes")
    if not isinstance(attrs, dict):
        raise ValueError(f"{where} has no attributes")
    for name in _REQUIRED:
        if name not in attrs:
            raise ValueError(f"{where} lacks the attribute {name}, which the extension requires")
    pos = _read_accessor(doc, bufs, attrs["POSITION"], "POSITION", _RULES["POSITION"], None)
    n = len(pos)
    out = {"means": pos}
    for key, name in (("rot", "ROTATION"), ("scale", "SCALE"), ("opacity", "OPACITY")):
        out[key] = _read_accessor(doc, bufs, attrs[PREFIX + name], PREFIX + name, _RULES[PREFIX + name], n)
    out["sh0"] = _read_accessor(doc, bufs, attrs[_sh_name(0, 0)], _sh_name(0, 0), _SH_RULE, n)
    if np.any(out["scale"] < 0):
        raise ValueError(f"{where}: {int(np.sum(np.any(out['scale'] < 0, axis=1))):,} Gaussians have a negative "
                         "SCALE (the extension's scales are linear and never negative)")
    op = out["opacity"][:, 0]
    if np.any((op < 0) | (op > 1)):
        raise ValueError(f"{where}: {int(np.sum((op < 0) | (op > 1))):,} Gaussians have an OPACITY outside [0, 1]")
    degree = 0
    for l in range(1, 5):
        have = [_sh_name(l, k) in attrs for k in range(2 * l + 1)]
        if not any(have):
            break
        if not all(have) or l > 3:
            raise ValueError(f"{where}: SH degree {l} is " + ("above 3 (the extension defines 0..3)" if l > 3 else
                             f"partly defined ({sum(have)} of {2 * l + 1} coefficients)"))
        degree = l
    higher = [k for k in attrs if k.startswith(PREFIX + "SH_DEGREE_")
              and not any(k == _sh_name(l, c) for l in range(degree + 1) for c in range(2 * l + 1))]
    if higher:
        raise ValueError(f"{where}: the attribute {higher[0]} needs every lower SH degree, which is not all there")
    shn = np.zeros((n, SH_COUNT[degree], 3))
    for l in range(1, degree + 1):
        for k in range(2 * l + 1):
            shn[:, l * l - 1 + k] = _read_accessor(doc, bufs, attrs[_sh_name(l, k)], _sh_name(l, k), _SH_RULE, n)
    out["shN"] = shn
    return out


def read_gltf(path: str | os.PathLike) -> GaussianPly:
    """Read the KHR_gaussian_splatting primitives of a .glb or .gltf into [N] Gaussians in
    our RDF frame (float32; see GaussianPly and the module docstring for the conventions,
    the transforms applied and every refusal). SplatFileError naming the file for anything
    malformed or outside the extension."""
    path = Path(path)
    data = read_bytes(path, FORMAT)
    notes: list[str] = []
    try:
        if is_glb(data):
            text, bin_chunk = _split_glb(data)
        else:
            text, bin_chunk = data, None
        try:
            doc = json.loads(bytes(text).decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError("the JSON is not UTF-8 text" if bin_chunk is not None or is_glb(data) else
                             "neither a GLB (magic 'glTF') nor glTF JSON") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"the JSON is invalid ({e.msg} at line {e.lineno} column {e.colno})") from None
        if not isinstance(doc, dict):
            raise ValueError("the JSON is not an object")
        version = (doc.get("asset") or {}).get("version") if isinstance(doc.get("asset"), dict) else None
        if not isinstance(version, str) or not version.startswith("2."):
            raise ValueError(f"asset.version is {json.dumps(version)}; this reader knows glTF 2.x")
        required = doc.get("extensionsRequired") or []
        bad = [e for e in required if not isinstance(e, str) or e not in _OK_REQUIRED] \
            if isinstance(required, list) else [required]
        if bad:
            raise ValueError(f"it requires the extension {bad[0]}, which this reader does not implement"
                             + (" (SPZ-compressed splats: export to .spz instead)" if "spz" in str(bad[0]) else ""))
        bufs = _Buffers(path, doc, bin_chunk)
        parts, skipped = [], 0
        for mesh_i, m, where_node in instances(doc):
            mesh = _need_index(doc, "meshes", mesh_i, where_node)
            prims = mesh.get("primitives")
            for j, prim in enumerate(prims if isinstance(prims, list) else []):
                exts = prim.get("extensions") if isinstance(prim, dict) else None
                if not isinstance(exts, dict) or EXTENSION not in exts:
                    skipped += 1
                    continue
                where = f"mesh {mesh_i} primitive {j}"
                p = _primitive(path, doc, bufs, prim, where, notes)
                p["matrix"], p["where"] = m, f"{where} ({where_node})"
                parts.append(p)
        if not parts:
            raise ValueError(f"no mesh primitive of the scene has {EXTENSION} (a mesh or point cloud, not splats)")
        if skipped:
            notes.append(f"{path}: {FORMAT} file: {skipped} primitive(s) without {EXTENSION} (meshes) skipped")
        return _assemble(path, parts, notes)
    except ValueError as e:
        raise SplatFileError(path, FORMAT, str(e)) from None


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # non-finite results are dropped with a note (finish)
def _assemble(path, parts: list[dict], notes: list[str]) -> GaussianPly:
    cols = {k: [] for k in ("means", "scales", "quats", "opacities", "sh0", "shN")}
    for p in parts:
        r, s, t = decompose(p["matrix"], p["where"])
        q = unit_quats(np.stack([p["rot"][:, 3], p["rot"][:, 0], p["rot"][:, 1], p["rot"][:, 2]], axis=1))
        shn = p["shN"]
        if not np.allclose(r, np.eye(3), atol=1e-9):
            q = quat_mul(matrix_quat(r), q)
            if shn.shape[1] and not np.allclose(np.abs(r), np.diag(np.abs(np.diag(r))), atol=1e-9):
                notes.append(f"{path}: {FORMAT} file: {p['where']}: SH cut to degree 0 (its node rotates the "
                             "splats and this reader does not rotate SH)")
                shn = np.zeros((len(q), 0, 3))
            elif shn.shape[1]:
                deg = {3: 1, 8: 2, 15: 3}[shn.shape[1]]
                shn = shn * sh_axis_signs(tuple(np.round(np.diag(r))), deg)[None, :, None]
        cols["means"].append(p["means"] @ r.T * s + t)
        cols["scales"].append(np.log(p["scale"] * s))
        cols["quats"].append(q)
        cols["opacities"].append(p["opacity"][:, 0])
        cols["sh0"].append(p["sh0"])
        cols["shN"].append(shn)
    m = max(a.shape[1] for a in cols["shN"])
    if any(a.shape[1] != m for a in cols["shN"]):
        notes.append(f"{path}: {FORMAT} file: primitives of lower SH degree padded with zero coefficients")
        cols["shN"] = [np.concatenate([a, np.zeros((len(a), m - a.shape[1], 3))], axis=1) for a in cols["shN"]]
    c = {k: np.concatenate(v) for k, v in cols.items()}
    flip = np.asarray(RDF_TO_GLTF)
    sh_deg = {0: 0, 3: 1, 8: 2, 15: 3}[m]
    q = c["quats"]
    quats = np.stack([q[:, 0], q[:, 1] * flip[0], q[:, 2] * flip[1], q[:, 3] * flip[2]], axis=1)
    shn = c["shN"] * sh_axis_signs(RDF_TO_GLTF, sh_deg)[None, :, None]
    return finish(path, FORMAT, c["means"] * flip, c["scales"], quats, logit(c["opacities"], 1e-7), c["sh0"], shn,
                  notes)
