"""Niantic's SPZ splat file (github.com/nianticlabs/spz: README "File Format" and
docs/SPZ.md for versions 2 and 3; the reference library's ``load-spz.cc`` for version 4,
whose container is described only there).

Containers:

- **versions 1-3**: the whole file is one gzip stream (RFC 1952) holding a 16-byte header
  (little-endian: uint32 magic 0x5053474e "NGSP", uint32 version, uint32 N, uint8 SH degree,
  uint8 fractional bits, uint8 flags, uint8 reserved) followed by the attribute arrays.
- **version 4** (the current one): a 32-byte plaintext header (magic, version, N, SH
  degree, fractional bits, flags, uint8 stream count, uint32 TOC offset, 12 reserved
  bytes), optional extension records (flags bit 0x2) up to the TOC offset, a table of
  contents of (uint64 compressed size, uint64 uncompressed size) per stream, then one
  Zstandard frame per attribute array.

The attribute arrays, in order (structure of arrays; the v4 streams are the same arrays):

1. positions, N x 3 x 24-bit two's-complement fixed point, ``fractional bits`` of fraction
   (version 1: N x 3 float16 instead);
2. alphas, N uint8: ``round(255 * sigmoid(opacity))``;
3. colours, N x 3 uint8: ``round(255 * (0.15 * sh0 + 0.5))`` (the DC coefficient, scaled
   by 0.15 rather than SH_C0 so a little of the range beyond [0, 1] survives);
4. scales, N x 3 uint8: ``round(16 * (log sigma + 10))``, log sigma in [-10, 5.94];
5. rotations: version 2 stores x, y, z of the unit quaternion with w >= 0 as
   ``round(127.5 * c + 127.5)`` (3 bytes); versions 3 and 4 store smallest-three in one
   little-endian uint32 (4 bytes): bits 30-31 the index (order x, y, z, w) of the largest
   component, then for each other component in that order, from the high bits down, a sign
   bit and a 9-bit magnitude ``round(511 * |c| * sqrt(2))``;
6. SH beyond the DC term, N x M x 3 uint8 (coefficient-major, channel fastest, i.e. our
   ``shN`` layout): ``q = round(128 * c) + 128`` rounded to a multiple of 8 (5 bits) for
   degree 1 and of 16 (4 bits) for degrees 2-3, clipped to 0..255; read back as
   ``(q - 128) / 128``.

Coordinates: SPZ stores RUB (x right, y up, z back: OpenGL, three.js). Our world, like the
3DGS PLY's, is the RDF (x right, y down, z forward: OpenCV/COLMAP) convention, so reading
and writing negate y and z: positions ``(x, -y, -z)``; quaternion ``(w, x, -y, -z)`` (a
180 degree turn about x, which commutes with the diagonal scale matrix); each SH
coefficient times its basis function's parity under that flip
(:func:`spirula.engine.io.quantize.sh_axis_signs`).

Precision (the round-trip tolerances the tests hold to): position step 2^-fractional bits
(12 by default, ~0.24 mm; fewer when a coordinate exceeds 2^11 so it fits in 24 bits);
colour step 1 / (0.15 * 255) in sh0 (under 1/255 after SH_C0); opacity 1/255 in sigmoid;
log scale 1/16; rotation components 1/(511 sqrt 2); SH 8/128 or 16/128.

Refused with :class:`spirula.engine.errors.SplatFileError` naming the file: neither gzip nor the
NGSP magic, a bad magic inside the gzip stream, a version other than 1-4, an SH degree
above 4, fractional bits above 24, a truncated stream or body, a wrong stream count, a
corrupt gzip or zstd stream. SH degree 4 is cut to 3 with a note. Extension records of
v4 are skipped with a note.

The header is checked against the data, and nothing is inflated beyond what the header's
count allows (a decompression bomb costs at most that, never its own size):

- the six arrays of N Gaussians of SH degree d have fixed sizes (the list above); a
  header whose arrays would outweigh the file more than :data:`MAX_RATIO` (256) times is
  refused before inflating anything (real SPZ files inflate about 4 times; a count that
  high is wrong or a bomb);
- versions 1-3: the gzip stream (one member or several, RFC 1952) is inflated in pieces
  up to one byte past the header and the arrays: more is a count lower than the data,
  less a truncated body, and bytes after the last member that are no gzip member are
  trailing data; all refused;
- version 4: each table-of-contents entry's inflated size must be its array's size for
  N, the streams must end exactly at the end of the file (no trailing data), each
  stream's zstd frame must declare that size or none (zstd would allocate what the frame
  declares) and inflate to exactly it, with nothing after the frame; bytes between the
  header and the table are refused unless the flags announce extension records.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import numpy as np

from ..errors import SplatFileError
from .ply import GaussianPly
from .quantize import SH_COUNT, from_smallest_three, logit, sh_axis_signs, sigmoid, smallest_three, unit_quats
from .splat_file import MAX_SPLATS, as_gaussians, check_finite, finish, read_bytes, write_bytes

__all__ = ["FORMAT", "VERSIONS", "read_spz", "write_spz", "encode_spz", "RDF_TO_RUB"]

FORMAT = "SPZ"
MAGIC = 0x5053474E
VERSIONS = (2, 3, 4)          # written; 1 is also read
RDF_TO_RUB = (1.0, -1.0, -1.0)
COLOR_SCALE = 0.15
_FLAG_ANTIALIASED, _FLAG_EXTENSIONS = 0x1, 0x2
_V4_HEADER = struct.Struct("<IIIBBBBI12x")
_LEGACY_HEADER = struct.Struct("<IIIBBBB")
_SH1_BUCKET, _SH_REST_BUCKET = 8, 16
MAX_RATIO = 256   # the most the arrays may outweigh the file (real SPZ: about 4); more is a wrong count or a bomb


def _fractional_bits(means: np.ndarray) -> int:
    """12, or fewer so that the largest |coordinate| fits a signed 24-bit integer."""
    big = float(np.max(np.abs(means))) if len(means) else 0.0
    fb = 12
    while fb > 0 and big * (1 << fb) >= (1 << 23) - 1:
        fb -= 1
    return fb


def _quantize_sh(shn: np.ndarray) -> np.ndarray:
    """[N, M, 3] -> uint8 with the per-degree buckets of the module docstring."""
    q = np.rint(np.asarray(shn, np.float64) * 128.0) + 128.0
    bucket = np.full(shn.shape[1], _SH_REST_BUCKET, np.float64)
    bucket[:3] = _SH1_BUCKET
    q = np.floor((q + bucket[None, :, None] / 2) / bucket[None, :, None]) * bucket[None, :, None]
    return np.clip(q, 0, 255).astype(np.uint8)


def _arrays(g: GaussianPly, version: int) -> tuple[list[bytes], int]:
    """The six attribute arrays of ``g`` (in SPZ's RUB frame) and the fractional bits."""
    flip = np.asarray(RDF_TO_RUB)
    means = np.asarray(g.means, np.float64) * flip
    fb = _fractional_bits(means)
    fixed = np.rint(means * (1 << fb)).astype(np.int64).reshape(-1)
    pos = np.stack([(fixed >> s) & 0xFF for s in (0, 8, 16)], axis=1).astype(np.uint8)
    alpha = np.clip(np.rint(sigmoid(g.opacities) * 255.0), 0, 255).astype(np.uint8)
    color = np.clip(np.rint(np.asarray(g.sh0, np.float64) * (COLOR_SCALE * 255.0) + 127.5), 0, 255).astype(np.uint8)
    scale = np.clip(np.rint((np.asarray(g.scales, np.float64) + 10.0) * 16.0), 0, 255).astype(np.uint8)
    q = unit_quats(g.quats)                                   # w, x, y, z in our frame
    xyzw = np.stack([q[:, 1] * flip[0], q[:, 2] * flip[1], q[:, 3] * flip[2], q[:, 0]], axis=1)
    if version >= 3:
        idx, rest = smallest_three(xyzw)
        mag = np.clip(np.rint(np.abs(rest) / np.sqrt(0.5) * 511.0), 0, 511).astype(np.uint32)
        word = idx.astype(np.uint32)
        for j in range(3):  # the three kept components, high bits first
            word = (word << np.uint32(10)) | ((rest[:, j] < 0).astype(np.uint32) << np.uint32(9)) | mag[:, j]
        rot = word.astype("<u4").tobytes()
    else:
        xyzw = xyzw * np.where(xyzw[:, 3:] < 0, -1.0, 1.0)
        rot = np.clip(np.rint(xyzw[:, :3] * 127.5 + 127.5), 0, 255).astype(np.uint8).tobytes()
    shn = np.asarray(g.shN, np.float64) * sh_axis_signs(RDF_TO_RUB, g.sh_degree)[None, :, None]
    sh = _quantize_sh(shn).tobytes() if g.sh_degree else b""
    return [pos.tobytes(), alpha.tobytes(), color.tobytes(), scale.tobytes(), rot, sh], fb


def encode_spz(g: GaussianPly, version: int = 4, antialiased: bool = False) -> bytes:
    """The bytes of an SPZ file of ``version`` (2, 3 or 4) for N Gaussians."""
    if version not in VERSIONS:
        raise ValueError(f"SPZ version must be one of {VERSIONS}, not {version!r}")
    g = as_gaussians(g)
    arrays, fb = _arrays(g, version)
    flags = _FLAG_ANTIALIASED if antialiased else 0
    if version < 4:
        head = _LEGACY_HEADER.pack(MAGIC, version, len(g), g.sh_degree, fb, flags, 0)
        return gzip.compress(head + b"".join(arrays), compresslevel=9, mtime=0)
    import zstandard

    cctx = zstandard.ZstdCompressor(level=12)
    frames = [cctx.compress(a) for a in arrays]
    toc = b"".join(struct.pack("<QQ", len(f), len(a)) for f, a in zip(frames, arrays))
    head = _V4_HEADER.pack(MAGIC, version, len(g), g.sh_degree, fb, flags, len(frames), _V4_HEADER.size)
    return head + toc + b"".join(frames)


def write_spz(path: str | os.PathLike, g: GaussianPly, version: int = 4, antialiased: bool = False) -> int:
    """Write ``g`` as an SPZ file (default version 4) atomically; returns the byte count."""
    g = check_finite(path, FORMAT, g)
    return write_bytes(path, encode_spz(g, version, antialiased))


def _sizes(version: int, n: int, degree: int) -> list[int]:
    """Bytes of the six attribute arrays of ``n`` Gaussians (module docstring's order)."""
    m = SH_COUNT[degree]
    return [n * (6 if version == 1 else 9), n, 3 * n, 3 * n, n * (4 if version >= 3 else 3), 3 * m * n]


def _check_header(version: int, n: int, degree: int, fb: int, file_bytes: int) -> list[int]:
    """The six array sizes the header's fields call for; ValueError for a field out of
    range or a count whose arrays would inflate more than MAX_RATIO times the file."""
    if n > MAX_SPLATS:
        raise ValueError(f"the header claims {n:,} Gaussians (more than {MAX_SPLATS:,})")
    if degree > 4:
        raise ValueError(f"SH degree {degree} (SPZ has 0-4)")
    if fb > 24:
        raise ValueError(f"{fb} fractional bits (at most 24 fit a 24-bit position)")
    sizes = _sizes(version, n, degree)
    if sum(sizes) > MAX_RATIO * file_bytes:
        raise ValueError(f"the header claims {n:,} Gaussians of SH degree {degree}, {sum(sizes):,} bytes of data, "
                         f"more than {MAX_RATIO} times the file's {file_bytes:,} bytes: no SPZ compresses that well "
                         "(a wrong count or a decompression bomb); nothing was inflated")
    return sizes


def _zlib_what(e: Exception) -> str:
    """What a zlib error means for the file, in words (zlib's own are terse: 'invalid
    distance too far back', 'incorrect data check')."""
    said = str(e)
    if "header check" in said or "compression method" in said or "flags" in said:
        return "its gzip header is invalid"
    if "data check" in said:
        return "its CRC does not match the data"
    if "length check" in said:
        return "its length field does not match the data"
    return "its deflate data is invalid"


class _Inflater:
    """A gzip stream (one or more members) inflated on demand, never past a byte limit,
    so a decompression bomb costs at most the limit in memory."""

    def __init__(self, data: bytes):
        self.out = bytearray()
        self._pending = data
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.ended = False    # the last member ended with nothing but further members after it

    def fill(self, limit: int) -> None:
        """Inflate until ``len(out) >= limit`` or the stream's end; ValueError for a
        corrupt stream, a truncated one (input ends inside a member) or bytes after the
        last member that are no gzip member."""
        while len(self.out) < limit and not self.ended:
            try:
                chunk = self._d.decompress(self._pending, min(limit - len(self.out), 1 << 22))
            except zlib.error as e:
                raise ValueError(f"the gzip stream is corrupt ({_zlib_what(e)})") from None
            self.out += chunk
            if self._d.eof:
                rest = self._d.unused_data
                if not rest:
                    self.ended = True
                elif rest[:2] == b"\x1f\x8b":        # another gzip member (RFC 1952 allows several)
                    self._d, self._pending = zlib.decompressobj(16 + zlib.MAX_WBITS), rest
                else:
                    raise ValueError(f"{len(rest):,} bytes of trailing data follow the gzip stream")
                continue
            self._pending = self._d.unconsumed_tail
            if not self._pending and not chunk:
                raise ValueError("the gzip stream is truncated (it ends before its end marker)")


def _legacy_body(path, data: bytes) -> tuple[tuple, list[memoryview]]:
    z = _Inflater(data)
    z.fill(_LEGACY_HEADER.size)
    raw = bytes(z.out[:_LEGACY_HEADER.size])
    if len(raw) < _LEGACY_HEADER.size:
        raise ValueError(f"the header is truncated ({len(raw)} of {_LEGACY_HEADER.size} bytes)")
    head = _LEGACY_HEADER.unpack_from(raw)
    if head[0] != MAGIC:
        raise ValueError(f"bad magic 0x{head[0]:08x} inside the gzip stream (expected 0x{MAGIC:08x}, 'NGSP')")
    if not 1 <= head[1] <= 3:
        raise ValueError(f"unknown version {head[1]} in a gzip container (versions 1-3 are gzip, 4 is zstd)")
    _, version, n, degree, fb, _, _ = head
    need = _LEGACY_HEADER.size + sum(_check_header(version, n, degree, fb, len(data)))
    z.fill(need + 1)     # one byte more than the header allows tells a count that is too low
    have = len(z.out) - _LEGACY_HEADER.size
    if len(z.out) < need:
        raise ValueError(f"the body is truncated: {n:,} Gaussians of SH degree {degree} need "
                         f"{need - _LEGACY_HEADER.size:,} bytes, {have:,} follow the header")
    if len(z.out) > need:
        raise ValueError(f"the gzip stream holds more than the header's {n:,} Gaussians of SH degree {degree} need "
                         f"({need - _LEGACY_HEADER.size:,} bytes; wrong count, or trailing data)")
    return head, [memoryview(z.out)[_LEGACY_HEADER.size:]]   # no copy of the body


def _unzstd(dctx, frame: bytes, size: int, i: int) -> bytes:
    """Stream ``i`` (1-based) inflated to exactly ``size`` bytes, never allocating more;
    ValueError when its frame declares or holds another size, is corrupt, or is followed
    by other bytes inside the stream."""
    import zstandard

    try:
        declared = zstandard.frame_content_size(frame)
    except zstandard.ZstdError:
        raise ValueError(f"stream {i} of 6 is not a zstd frame") from None
    if declared not in (-1, size):   # -1: the frame does not say; read at most size + 1 to find out
        raise ValueError(f"stream {i} of 6 is a zstd frame of {declared:,} bytes; the header's count needs {size:,}")
    try:
        if declared == -1:
            head = dctx.stream_reader(frame, read_across_frames=False).read(size + 1)
            if len(head) != size:
                raise ValueError(f"stream {i} of 6 inflates to {'more than ' if len(head) > size else ''}"
                                 f"{min(len(head), size):,} bytes; the header's count needs {size:,}")
        obj = dctx.decompressobj()
        out = obj.decompress(frame)
    except zstandard.ZstdError as e:
        raise ValueError(f"stream {i} of 6 is corrupt ({e})") from None
    if not obj.eof:
        raise ValueError(f"stream {i} of 6 is truncated (its zstd frame does not end)")
    if obj.unused_data:
        raise ValueError(f"stream {i} of 6 has {len(obj.unused_data):,} bytes after its zstd frame")
    if len(out) != size:
        raise ValueError(f"stream {i} of 6 inflates to {len(out):,} bytes; the header's count needs {size:,}")
    return out


def _v4_body(path, data: bytes, notes: list[str]) -> tuple[tuple, list[bytes]]:
    if len(data) < _V4_HEADER.size:
        raise ValueError(f"the header is truncated ({len(data)} of {_V4_HEADER.size} bytes)")
    magic, version, n, degree, fb, flags, streams, toc = _V4_HEADER.unpack_from(data)
    if version != 4:
        raise ValueError(f"unknown version {version} (this reader knows 1-4; a plaintext header means 4)")
    if streams != 6:
        raise ValueError(f"{streams} attribute streams (version 4 has 6)")
    sizes = _check_header(version, n, degree, fb, len(data))
    if toc < _V4_HEADER.size or toc + 16 * streams > len(data):
        raise ValueError(f"the table of contents at byte {toc} lies outside the file ({len(data)} bytes)")
    if flags & _FLAG_EXTENSIONS and toc > _V4_HEADER.size:
        notes.append(f"{path}: {FORMAT} file: {toc - _V4_HEADER.size} bytes of extension records skipped")
    elif toc > _V4_HEADER.size:
        raise ValueError(f"{toc - _V4_HEADER.size} bytes between the header and the table of contents, but the "
                         "header's flags announce no extension records")
    import zstandard

    table = np.frombuffer(data, "<u8", 2 * streams, toc).reshape(streams, 2)
    for i, ((cs, us), s) in enumerate(zip(table, sizes)):
        if int(us) != s:
            raise ValueError(f"stream {i + 1} of 6 declares {int(us):,} bytes; {n:,} Gaussians of SH degree {degree} "
                             f"need {s:,} (wrong count)")
    start = toc + 16 * streams
    ends = start + np.cumsum(table[:, 0].astype(object))     # Python ints: no uint64 overflow
    if ends[-1] > len(data):
        i = int(np.argmax(ends > len(data)))
        raise ValueError(f"stream {i + 1} of 6 is truncated (the file ends {int(ends[i]) - len(data):,} bytes short)")
    if ends[-1] < len(data):
        raise ValueError(f"{len(data) - int(ends[-1]):,} bytes of trailing data follow the last stream")
    dctx = zstandard.ZstdDecompressor()
    cuts = [start] + [int(e) for e in ends]
    out = [_unzstd(dctx, data[cuts[i]:cuts[i + 1]], sizes[i], i + 1) for i in range(6)]
    return (magic, version, n, degree, fb, flags, 0), out


def read_spz(path: str | os.PathLike) -> GaussianPly:
    """Read an SPZ file of version 1, 2, 3 or 4 into [N] Gaussians in our RDF frame
    (float32; see GaussianPly and the module docstring for the decoding). Gaussians with
    non-finite values are dropped with a note; SH degree 4 is cut to 3 with a note.
    SplatFileError naming the file, the format and the problem for anything malformed."""
    data = read_bytes(path, FORMAT)
    notes: list[str] = []
    try:
        if data[:2] == b"\x1f\x8b":
            head, parts = _legacy_body(path, data)
        elif len(data) >= 4 and struct.unpack_from("<I", data)[0] == MAGIC:
            head, parts = _v4_body(path, data, notes)
        else:
            raise ValueError(f"bad magic {data[:4].hex()} (neither a gzip stream, versions 1-3, nor 'NGSP', version 4)")
        return _decode(path, head, parts, notes)
    except ValueError as e:
        raise SplatFileError(path, FORMAT, str(e)) from None


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # non-finite results are dropped with a note (finish)
def _decode(path, head: tuple, parts: list[bytes | memoryview], notes: list[str]) -> GaussianPly:
    _, version, n, degree, fb, _flags, _ = head
    m = SH_COUNT[degree]
    sizes = _sizes(version, n, degree)
    if len(parts) == 1:  # legacy: one body of exactly the sizes' sum (checked by _legacy_body), split by them
        cuts = np.cumsum([0] + sizes)
        parts = [parts[0][cuts[i]:cuts[i + 1]] for i in range(6)]
    for i, (p, s) in enumerate(zip(parts, sizes)):
        if len(p) != s:
            raise ValueError(f"stream {i + 1} of 6 holds {len(p):,} bytes; {n:,} Gaussians need {s:,} (wrong count)")
    flip = np.asarray(RDF_TO_RUB)
    if version == 1:
        means = np.frombuffer(parts[0], "<f2").reshape(n, 3).astype(np.float64)
    else:
        b = np.frombuffer(parts[0], np.uint8).reshape(n * 3, 3).astype(np.int64)
        fixed = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        fixed = np.where(fixed & 0x800000, fixed - (1 << 24), fixed)
        means = fixed.reshape(n, 3) / float(1 << fb)
    alpha = np.frombuffer(parts[1], np.uint8).astype(np.float64) / 255.0
    sh0 = (np.frombuffer(parts[2], np.uint8).reshape(n, 3) / 255.0 - 0.5) / COLOR_SCALE
    scales = np.frombuffer(parts[3], np.uint8).reshape(n, 3) / 16.0 - 10.0
    if version >= 3:
        word = np.frombuffer(parts[4], "<u4").astype(np.uint32)
        rest = np.empty((n, 3))
        for j in range(3):  # low bits hold the last kept component
            v = (word >> np.uint32(10 * (2 - j))) & np.uint32(0x3FF)
            rest[:, j] = np.where(v & 0x200, -1.0, 1.0) * (v & 0x1FF) / 511.0 * np.sqrt(0.5)
        xyzw = from_smallest_three(word >> np.uint32(30), rest)
    else:
        xyz = np.frombuffer(parts[4], np.uint8).reshape(n, 3) / 127.5 - 1.0
        xyzw = np.concatenate([xyz, np.sqrt(np.maximum(0.0, 1.0 - np.sum(xyz * xyz, 1)))[:, None]], axis=1)
    quats = np.stack([xyzw[:, 3], xyzw[:, 0] * flip[0], xyzw[:, 1] * flip[1], xyzw[:, 2] * flip[2]], axis=1)
    shn = (np.frombuffer(parts[5], np.uint8).reshape(n, m, 3).astype(np.float64) - 128.0) / 128.0
    if degree == 4:
        notes.append(f"{path}: {FORMAT} file: SH degree 4 cut to 3 (the renderer stops at degree 3)")
        shn, degree = shn[:, :15], 3
    shn = shn * sh_axis_signs(RDF_TO_RUB, degree)[None, :, None]
    return finish(path, FORMAT, means * flip, scales, unit_quats(quats), logit(alpha, 0.5 / 255.0), sh0, shn, notes)
