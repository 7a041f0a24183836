"""The compressed PLY of PlayCanvas / SuperSplat (``*.compressed.ply``; described in
SuperSplat's and splat-transform's documentation, developer.playcanvas.com, "Gaussian
splatting > formats"; read by SuperSplat, the PlayCanvas engine, splat-transform, gsplat).

An ordinary binary little-endian PLY with up to three elements:

- ``chunk``, one per 256 consecutive Gaussians (the last may hold fewer), 18 float
  properties: ``min_x min_y min_z max_x max_y max_z`` (the chunk's position bounds),
  ``min_scale_x .. max_scale_z`` (its log-scale bounds, clamped to [-20, 20]) and
  ``min_r min_g min_b max_r max_g max_b`` (its colour bounds, colour = 0.5 + SH_C0 * sh0;
  files without these six store the colour in [0, 1] directly);
- ``vertex``, one per Gaussian, four uint32: ``packed_position`` and ``packed_scale``
  (11, 10, 11 bits of x, y, z from the high bits down, each the value's place between the
  chunk's bounds), ``packed_rotation`` (bits 30-31: the index, order w, x, y, z, of the
  largest quaternion component; then three 10-bit fields, high bits first, for the other
  components in order, each ``c / sqrt(2) + 0.5`` as a 10-bit unorm), ``packed_color``
  (r, g, b, from the high byte down, between the chunk's colour bounds; the low byte is
  ``sigmoid(opacity)``);
- ``sh`` (only with SH degree >= 1), one per Gaussian, uchar ``f_rest_0 ..`` in the 3DGS
  PLY's channel-major order: ``trunc(256 * (c / 8 + 0.5))`` clipped to 0..255, read as
  ``8 * ((q + 0.5) / 256 - 0.5)`` (0 and 255 as the ends, -4 and +4).

Positions keep the PLY's (our) axes. The writer orders the Gaussians along a Morton curve
(:func:`spirula.engine.io.quantize.morton_order`) so each chunk's bounds are tight; the order of
the Gaussians is not kept.

Precision: position (chunk extent) / 2047 per axis (/1023 for y); log scale likewise in
the chunk's scale range; colour (chunk range) / 255; opacity 1/255 in sigmoid; rotation
components sqrt(2) / 1023; SH 8 / 256 within [-4, 4] (beyond is clipped).

Refused with :class:`spirula.engine.errors.SplatFileError` naming the file: a PLY without the
``chunk`` element or the four packed properties, a chunk count other than ceil(N / 256),
an ``sh`` element of another count or an f_rest count that is no SH degree, a property
declared of another type than the format's (chunk bounds ``float``, the packed fields
``uint``, SH ``uchar``, named ``f_rest_0 ..`` in order: a packed field read as another
type would decode to other splats), a truncated body or data beyond what the header's
elements take (spirula/engine/io/ply_format.py's checks).
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import PlyError, SplatFileError
from .ply import GaussianPly
from .ply_format import PLY_NAMES, open_ply, parse_header, read_binary
from .quantize import (SH_COUNT, from_smallest_three, from_unorm, logit, morton_order, rgb_from_sh0, sh0_from_rgb,
                       sigmoid, smallest_three, unorm)
from .splat_file import as_gaussians, check_finite, finish, need, write_bytes

__all__ = ["FORMAT", "CHUNK", "read_compressed_ply", "write_compressed_ply", "encode_compressed_ply",
           "is_compressed_ply", "header_bytes"]

FORMAT = "compressed PLY"
CHUNK = 256
_CHUNK_PROPS = ["min_x", "min_y", "min_z", "max_x", "max_y", "max_z",
                "min_scale_x", "min_scale_y", "min_scale_z", "max_scale_x", "max_scale_y", "max_scale_z",
                "min_r", "min_g", "min_b", "max_r", "max_g", "max_b"]
_PACKED = ["packed_position", "packed_rotation", "packed_scale", "packed_color"]
_SQRT2 = float(np.sqrt(2.0))


def _chunk_bounds(values: np.ndarray, n_chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-chunk min and max [C, D] of values [N, D] (the last chunk padded with its own
    last row, which changes neither bound)."""
    n, d = values.shape
    pad = np.concatenate([values, np.repeat(values[-1:], n_chunks * CHUNK - n, axis=0)])
    blocks = pad.reshape(n_chunks, CHUNK, d)
    return blocks.min(axis=1), blocks.max(axis=1)


def _place(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """Where each value lies between its chunk's bounds, in [0, 1] (0 for an empty range)."""
    span = hi[chunk] - lo[chunk]
    return np.where(span > 0, (values - lo[chunk]) / np.where(span > 0, span, 1.0), 0.0)


def _pack_111011(t: np.ndarray) -> np.ndarray:
    return (unorm(t[:, 0], 11) << np.uint32(21)) | (unorm(t[:, 1], 10) << np.uint32(11)) | unorm(t[:, 2], 11)


def _unpack_111011(v: np.ndarray) -> np.ndarray:
    return np.stack([from_unorm(v >> np.uint32(21), 11), from_unorm((v >> np.uint32(11)) & np.uint32(0x3FF), 10),
                     from_unorm(v & np.uint32(0x7FF), 11)], axis=1)


def encode_compressed_ply(g: GaussianPly) -> list[bytes]:
    """The file's parts (header, chunks, vertices, SH) for N >= 1 Gaussians, Morton-ordered."""
    g = as_gaussians(g)
    need(len(g) > 0, "<memory>", FORMAT, "no Gaussians to write (a compressed PLY needs at least one chunk)")
    g = g.subset(morton_order(g.means))
    n, m = len(g), g.shN.shape[1]
    nc = -(-n // CHUNK)
    chunk = np.arange(n) // CHUNK
    means = np.asarray(g.means, np.float64)
    scales = np.clip(np.asarray(g.scales, np.float64), -20.0, 20.0)
    rgb = rgb_from_sh0(g.sh0)
    bounds = [_chunk_bounds(a, nc) for a in (means, scales, rgb)]
    table = np.concatenate([np.concatenate(b, axis=1) for b in bounds], axis=1).astype("<f4")
    (plo, phi), (slo, shi), (clo, chi) = [(lo.astype(np.float32).astype(np.float64), hi.astype(np.float32).astype(
        np.float64)) for lo, hi in bounds]
    idx, rest = smallest_three(g.quats)
    rot = idx.astype(np.uint32) << np.uint32(30)
    for j in range(3):
        rot |= unorm(rest[:, j] / _SQRT2 + 0.5, 10) << np.uint32(10 * (2 - j))
    c = _place(rgb, clo, chi, chunk)
    color = ((unorm(c[:, 0], 8) << np.uint32(24)) | (unorm(c[:, 1], 8) << np.uint32(16))
             | (unorm(c[:, 2], 8) << np.uint32(8)) | unorm(sigmoid(g.opacities), 8))
    vert = np.stack([_pack_111011(_place(means, plo, phi, chunk)), rot,
                     _pack_111011(_place(scales, slo, shi, chunk)), color], axis=1).astype("<u4")
    parts = [header_bytes(n, m), table.tobytes(), vert.tobytes()]
    if m:
        channel_major = np.asarray(g.shN, np.float64).transpose(0, 2, 1).reshape(n, 3 * m)
        parts.append(np.clip(np.trunc((channel_major / 8.0 + 0.5) * 256.0), 0, 255).astype(np.uint8).tobytes())
    return parts


def header_bytes(n: int, m: int) -> bytes:
    """The PLY header of n Gaussians with m SH coefficients per channel beyond the DC."""
    lines = ["ply", "format binary_little_endian 1.0", "comment written by Spirula Studio",
             f"element chunk {-(-n // CHUNK)}", *[f"property float {p}" for p in _CHUNK_PROPS],
             f"element vertex {n}", *[f"property uint {p}" for p in _PACKED]]
    if m:
        lines += [f"element sh {n}", *[f"property uchar f_rest_{i}" for i in range(3 * m)]]
    lines.append("end_header")
    return ("\n".join(lines) + "\n").encode("ascii")


def write_compressed_ply(path: str | os.PathLike, g: GaussianPly) -> int:
    """Write ``g`` as a compressed PLY atomically; returns the byte count."""
    g = check_finite(path, FORMAT, g)
    try:
        parts = encode_compressed_ply(g)
    except SplatFileError as e:
        raise SplatFileError(path, FORMAT, e.what) from None
    return write_bytes(path, parts)


def is_compressed_ply(path: str | os.PathLike) -> bool:
    """True for a PLY whose header has a ``chunk`` element and a ``packed_position`` vertex
    property (False for any other file, readable or not)."""
    try:
        with open_ply(path) as f:
            _, elements = parse_header(f, str(path))
    except PlyError:
        return False
    names = {e.name: e for e in elements}
    return "chunk" in names and "vertex" in names and "packed_position" in dict(names["vertex"].props)


def _check_types(path, element, props: list[str], code: str) -> None:
    """SplatFileError unless each of ``props`` of ``element`` is declared of type ``code``
    (a packed field read as another type would decode to other splats)."""
    types = dict(element.props)
    wrong = [p for p in props if types[p] != code]
    if wrong:
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise SplatFileError(path, FORMAT, f"property {wrong[0]} of element {element.name} is declared "
                             f"{PLY_NAMES[types[wrong[0]]]}; the compressed PLY's is {PLY_NAMES[code]}{more}")


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # non-finite results are dropped with a note (finish)
def read_compressed_ply(path: str | os.PathLike) -> GaussianPly:
    """Read a compressed PLY into [N] Gaussians (float32, our axes; see GaussianPly and the
    module docstring). SplatFileError naming the file for anything malformed."""
    where = str(path)
    try:
        with open_ply(path) as f:
            fmt, elements = parse_header(f, where)
            names = {e.name: e for e in elements}
            need(fmt == "binary_little_endian", path, FORMAT, f"format {fmt} (a compressed PLY is binary_little_endian)")
            need("chunk" in names and "vertex" in names, path, FORMAT,
                 "no 'chunk' and 'vertex' elements (not a compressed PLY)")
            vprops = dict(names["vertex"].props)
            missing = [p for p in _PACKED if p not in vprops]
            need(not missing, path, FORMAT, f"the vertex element lacks {', '.join(missing)}")
            cprops = dict(names["chunk"].props)
            missing = [p for p in _CHUNK_PROPS[:12] if p not in cprops]
            need(not missing, path, FORMAT, f"the chunk element lacks {', '.join(missing)}")
            _check_types(path, names["chunk"], [p for p in _CHUNK_PROPS if p in cprops], "f4")
            _check_types(path, names["vertex"], _PACKED, "u4")
            if "sh" in names:
                shp = [p for p, _ in names["sh"].props]
                need(shp == [f"f_rest_{i}" for i in range(len(shp))], path, FORMAT,
                     "the sh element's properties are not f_rest_0, f_rest_1, ... in order")
                _check_types(path, names["sh"], shp, "u1")
            n, nc = names["vertex"].count, names["chunk"].count
            need(nc == -(-n // CHUNK), path, FORMAT,
                 f"{nc} chunks for {n} Gaussians (wrong count: expected ceil({n} / {CHUNK}) = {-(-n // CHUNK)})")
            if "sh" in names:
                need(names["sh"].count == n, path, FORMAT,
                     f"the sh element has {names['sh'].count} rows for {n} Gaussians")
            body = f.tell()
            chunks = read_binary(f, where, fmt, elements, names["chunk"])
            f.seek(body)  # read_binary counts from the position it is given
            vert = read_binary(f, where, fmt, elements, names["vertex"])
            sh = None
            if "sh" in names:
                f.seek(body)
                sh = read_binary(f, where, fmt, elements, names["sh"])
    except PlyError as e:
        raise SplatFileError(path, FORMAT, str(e).removeprefix(f"{where}: ")) from None
    chunk = np.arange(n) // CHUNK
    col = lambda a, ps: np.stack([np.asarray(a[p], np.float64) for p in ps], axis=1)  # noqa: E731
    pos, scl = col(chunks, _CHUNK_PROPS[0:6]), col(chunks, _CHUNK_PROPS[6:12])
    v = {p: np.asarray(vert[p]).astype(np.uint32) for p in _PACKED}
    lerp = lambda t, lo, hi: lo[chunk] + t * (hi[chunk] - lo[chunk])  # noqa: E731
    means = lerp(_unpack_111011(v["packed_position"]), pos[:, :3], pos[:, 3:])
    scales = lerp(_unpack_111011(v["packed_scale"]), scl[:, :3], scl[:, 3:])
    r = v["packed_rotation"]
    rest = np.stack([(from_unorm((r >> np.uint32(10 * (2 - j))) & np.uint32(0x3FF), 10) - 0.5) * _SQRT2
                     for j in range(3)], axis=1)
    quats = from_smallest_three(r >> np.uint32(30), rest)
    c = v["packed_color"]
    t = np.stack([from_unorm((c >> np.uint32(s)) & np.uint32(0xFF), 8) for s in (24, 16, 8)], axis=1)
    if all(p in cprops for p in _CHUNK_PROPS[12:]):
        cb = col(chunks, _CHUNK_PROPS[12:])
        t = lerp(t, cb[:, :3], cb[:, 3:])
    opacity = logit(from_unorm(c & np.uint32(0xFF), 8), 0.5 / 255.0)
    shn, notes = np.zeros((n, 0, 3)), []
    if sh is not None:
        k = len(sh.dtype.names)
        degree = next((d for d, mm in SH_COUNT.items() if 3 * mm == k), None)
        need(degree is not None and degree <= 3, path, FORMAT, f"{k} SH properties (expected 9, 24 or 45)")
        q = np.stack([np.asarray(sh[name], np.float64) for name in sh.dtype.names], axis=1)  # file order
        u = np.where(q <= 0, 0.0, np.where(q >= 255, 1.0, (q + 0.5) / 256.0))
        shn = ((u - 0.5) * 8.0).reshape(n, 3, k // 3).transpose(0, 2, 1)
    return finish(path, FORMAT, means, scales, quats, opacity, sh0_from_rgb(t), shn, notes)
