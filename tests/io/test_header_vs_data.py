"""Splat files whose header disagrees with their data are refused in one line naming the
file (issue 49, item 6), and decompression is bounded by what the header allows: the
cases found on dfa6aa5 (an SPZ v2/v3 whose count is lower than its data, a SOG whose
count exceeds its data or whose image has the wrong size, a compressed PLY property of
the wrong type, a 1.5 MB SPZ that inflates to 1.5 GB, Python internals in messages) and
`spirula export` refusing such a file before writing anything."""

from __future__ import annotations

import gzip
import io
import json
import struct
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest

from spirula.engine.cli.main import main
from spirula.engine.errors import SplatFileError
from spirula.engine.io import formats
from tests.io.splat_cases import random_gaussians

MAGIC = 0x5053474E
LEGACY = struct.Struct("<IIIBBBB")


@pytest.fixture(scope="module")
def g():
    return random_gaussians(np.random.default_rng(49), 300, 1)


def refused(path, label: str, *fragments: str) -> str:
    with pytest.raises(SplatFileError) as e:
        formats.read_any(path, warn=False)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {label} file: ") and "\n" not in msg, msg
    assert "<_io." not in msg and "invalid literal" not in msg and "Traceback" not in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


def _write(tmp_path, g, fmt, name, **kw):
    p = tmp_path / name
    formats.write_any(p, g, fmt, **kw)
    return p


# --------------------------------------------------------------------------- SPZ


@pytest.mark.parametrize("version", [2, 3])
def test_spz_whose_count_is_lower_than_its_data_is_refused(tmp_path, g, version):
    raw = bytearray(gzip.decompress(_write(tmp_path, g, "spz", "good.spz", spz_version=version).read_bytes()))
    raw[8:12] = struct.pack("<I", 200)           # 300 Gaussians' data under a header that says 200
    p = tmp_path / "low.spz"
    p.write_bytes(gzip.compress(bytes(raw)))
    refused(p, "SPZ", "more than the header's 200 Gaussians")
    raw[8:12] = struct.pack("<I", 300)           # the right count, then bytes after the arrays
    p.write_bytes(gzip.compress(bytes(raw) + b"\x00" * 7))
    refused(p, "SPZ", "more than the header's 300 Gaussians")
    p.write_bytes(gzip.compress(bytes(raw)) + b"junk")   # bytes after the gzip stream
    refused(p, "SPZ", "4 bytes of trailing data follow the gzip stream")
    p.write_bytes(gzip.compress(bytes(raw)) * 2)          # a second gzip member: more data than the count
    refused(p, "SPZ", "more than the header's 300 Gaussians")
    p.write_bytes(gzip.compress(bytes(raw)))
    assert len(formats.read_any(p, warn=False)) == 300


def _v4_parts(data: bytes):
    """(header, table [6, 2] of compressed and inflated sizes, frames) of an SPZ v4 file."""
    toc = struct.unpack_from("<I", data, 16)[0]
    table = np.frombuffer(data, "<u8", 12, toc).reshape(6, 2).astype(np.int64)
    at, frames = toc + 96, []
    for cs, _ in table:
        frames.append(data[at:at + cs])
        at += cs
    return data[:toc], table, frames


def _v4(head: bytes, frames: list[bytes], sizes: list[int]) -> bytes:
    return head + b"".join(struct.pack("<QQ", len(f), s) for f, s in zip(frames, sizes)) + b"".join(frames)


def test_spz_v4_whose_streams_disagree_with_its_count_is_refused(tmp_path, g):
    import zstandard

    data = _write(tmp_path, g, "spz", "good.spz").read_bytes()
    head, table, frames = _v4_parts(data)
    p = tmp_path / "bad.spz"
    p.write_bytes(data + b"\x00" * 5)
    refused(p, "SPZ", "5 bytes of trailing data follow the last stream")
    low = bytearray(head)
    low[8:12] = struct.pack("<I", 200)            # the table still says 300 Gaussians' bytes
    p.write_bytes(_v4(bytes(low), frames, list(table[:, 1])))
    refused(p, "SPZ", "stream 1 of 6 declares 2,700 bytes; 200 Gaussians", "wrong count")
    # the table agrees with the header, a frame holds more (its own content size says so)
    alphas = zstandard.ZstdDecompressor().decompress(frames[1])
    big = zstandard.ZstdCompressor().compress(alphas + alphas)
    p.write_bytes(_v4(head, [frames[0], big, *frames[2:]], list(table[:, 1])))
    refused(p, "SPZ", "stream 2 of 6 is a zstd frame of 600 bytes", "needs 300")
    # a frame that does not say its size and holds more
    quiet = zstandard.ZstdCompressor(write_content_size=False).compress(alphas + alphas)
    p.write_bytes(_v4(head, [frames[0], quiet, *frames[2:]], list(table[:, 1])))
    refused(p, "SPZ", "stream 2 of 6 inflates to more than 300 bytes")


def gzip_bomb(head: bytes, zeros: int, block: int = 1 << 20) -> bytes:
    """A valid one-member gzip stream of ``head`` + ``zeros`` zero bytes, made without
    holding them: the deflate bytes of one block after a full flush do not depend on what
    came before, so they are repeated (CRC and size in the trailer are the true ones)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff", c.compress(head), c.flush(zlib.Z_FULL_FLUSH)]
    parts.append((c.compress(bytes(block)) + c.flush(zlib.Z_FULL_FLUSH)) * (zeros // block))
    parts.append(c.flush(zlib.Z_FINISH))
    crc, z = zlib.crc32(head), bytes(block)
    for _ in range(zeros // block):
        crc = zlib.crc32(z, crc)
    parts.append(struct.pack("<II", crc, (len(head) + zeros) & 0xFFFFFFFF))
    return b"".join(parts)


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("count", [1000, 1500 * (1 << 20) // 20])
def test_spz_gzip_bomb_is_refused_without_inflating_it(tmp_path, count):
    """1.5 MB that inflate to 1.5 GB (dfa6aa5 took 3 GB of memory): with a small count the
    inflation stops one byte past what the count needs; with a count that matches the
    1.5 GB, the header is refused before anything is inflated (256 x the file at most)."""
    zeros = 1500 << 20
    p = tmp_path / "bomb.spz"
    p.write_bytes(gzip_bomb(LEGACY.pack(MAGIC, 3, count, 0, 12, 0, 0), zeros))
    assert p.stat().st_size < 1.6e6
    what = "more than the header's 1,000 Gaussians" if count == 1000 else "more than 256 times the file's"
    peak = _peak_bytes(lambda: refused(p, "SPZ", what))
    assert peak < 32e6, f"{peak / 1e6:.0f} MB allocated to refuse a decompression bomb"


def test_spz_v4_frame_bomb_is_refused_without_inflating_it(tmp_path, g):
    """A v4 stream whose zstd frame holds 1.5 GB of zeros (about 50 KB of file) under a
    table of contents that says 300 bytes: zstd would allocate the frame's own size."""
    import zstandard

    data = _write(tmp_path, g, "spz", "good.spz").read_bytes()
    head, table, frames = _v4_parts(data)
    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=1).stream_writer(out, size=1500 << 20, closefd=False) as w:
        block = bytes(1 << 22)
        for _ in range(375):
            w.write(block)
    p = tmp_path / "bomb.spz"
    p.write_bytes(_v4(head, [frames[0], out.getvalue(), *frames[2:]], list(table[:, 1])))
    assert p.stat().st_size < 1e6
    peak = _peak_bytes(lambda: refused(p, "SPZ", "stream 2 of 6 is a zstd frame of 1,572,864,000 bytes"))
    assert peak < 32e6, f"{peak / 1e6:.0f} MB allocated to refuse a decompression bomb"


# --------------------------------------------------------------------------- SOG


def _sog_files(tmp_path, g):
    p = _write(tmp_path, g, "sog", "good.sog")
    with zipfile.ZipFile(p) as z:
        return {n: z.read(n) for n in z.namelist()}


def _bundle(tmp_path, name, files, **changes):
    p = tmp_path / name
    with zipfile.ZipFile(p, "w") as z:
        for k, v in {**files, **changes}.items():
            if v is not None:
                z.writestr(k, v)
    return p


def test_sog_whose_count_exceeds_its_data_is_refused(tmp_path, g):
    files = _sog_files(tmp_path, g)
    meta = json.loads(files["meta.json"])
    from PIL import Image

    w, h = Image.open(io.BytesIO(files["means_l.webp"])).size
    assert w * h > 300 + 10       # the writer pads: the images hold more texels than Gaussians
    p = _bundle(tmp_path, "more.sog", files, **{"meta.json": json.dumps({**meta, "count": 310})})
    refused(p, "SOG", "10 texels of the 310 Gaussians", "first at Gaussian 300", "count larger than the data")
    p = _bundle(tmp_path, "beyond.sog", files, **{"meta.json": json.dumps({**meta, "count": w * h + 1})})
    refused(p, "SOG", f"count {w * h + 1:,} exceeds the {w} x {h}", "wrong count")
    p = _bundle(tmp_path, "huge.sog", files, **{"meta.json": json.dumps({**meta, "count": 10 ** 8})})
    refused(p, "SOG", "more than 8 Gaussians a byte", "nothing was decoded")
    for bad in ("abc", 300.5, True, -1, None):
        p = _bundle(tmp_path, "typed.sog", files, **{"meta.json": json.dumps({**meta, "count": bad})})
        refused(p, "SOG", "meta.json's count is", "it must be a whole number")


def _resized(webp: bytes, dw: int, dh: int) -> bytes:
    from PIL import Image

    im = Image.open(io.BytesIO(webp))
    out = Image.new("RGBA", (im.size[0] + dw, im.size[1] + dh))
    out.paste(im, (0, 0))
    buf = io.BytesIO()
    out.save(buf, "WEBP", lossless=True, exact=True)
    return buf.getvalue()


@pytest.mark.parametrize("name", ["scales.webp", "quats.webp", "shN_labels.webp", "means_u.webp"])
def test_sog_whose_image_has_the_wrong_size_is_refused(tmp_path, g, name):
    """An image wider than the others holds the same texels at other (x, y): dfa6aa5 read
    the wrong Gaussian's values from it."""
    files = _sog_files(tmp_path, g)
    p = _bundle(tmp_path, "size.sog", files, **{name: _resized(files[name], 4, 4)})
    refused(p, "SOG", f"the image {name} is 24 x 20; the other images are 20 x 16")


def test_sog_centroids_of_the_wrong_size_and_bad_images_are_refused(tmp_path, g):
    files = _sog_files(tmp_path, g)
    p = _bundle(tmp_path, "cent.sog", files, **{"shN_centroids.webp": _resized(files["shN_centroids.webp"], 3, 0)})
    refused(p, "SOG", "shN_centroids.webp is 195 x 1", "need 192 x 1")
    p = _bundle(tmp_path, "junk.sog", files, **{"sh0.webp": b"RIFF\x00\x00\x00\x00WEBPjunk"})
    refused(p, "SOG", "the image sh0.webp is no image format Pillow reads")
    meta = json.loads(files["meta.json"])
    p = _bundle(tmp_path, "path.sog", files,
                **{"meta.json": json.dumps({**meta, "quats": {"files": ["../quats.webp"]}})})
    refused(p, "SOG", "'../quats.webp', which is no plain file name")
    p = _bundle(tmp_path, "cb.sog", files, **{"meta.json": json.dumps({**meta, "scales": {
        "codebook": meta["scales"]["codebook"][:255], "files": ["scales.webp"]}})})
    refused(p, "SOG", "meta.json's scales.codebook is a list of 255; it must be a list of 256 numbers")
    p = _bundle(tmp_path, "json.sog", files, **{"meta.json": b"{\"version\": 2,"})
    refused(p, "SOG", "meta.json is not valid JSON at line 1")


# --------------------------------------------------------------------------- compressed PLY


@pytest.mark.parametrize("prop, declared", [("packed_color", "float"), ("packed_position", "int"),
                                            ("min_x", "double"), ("max_scale_z", "uint"), ("f_rest_4", "float")])
def test_compressed_ply_property_of_the_wrong_type_is_refused(tmp_path, g, prop, declared):
    data = _write(tmp_path, g, "compressed-ply", "good.compressed.ply").read_bytes()
    end = data.index(b"end_header\n")
    head = data[:end].decode()
    import re

    old = re.search(rf"property (\w+) {prop}\n", head)
    p = tmp_path / "typed.compressed.ply"
    p.write_bytes(data.replace(old.group(0).encode(), f"property {declared} {prop}\n".encode(), 1))
    refused(p, "compressed PLY", f"property {prop} of element", f"is declared {declared}; the compressed PLY's is "
            f"{old.group(1)}")


def test_compressed_ply_with_trailing_data_is_refused(tmp_path, g):
    data = _write(tmp_path, g, "compressed-ply", "good.compressed.ply").read_bytes()
    p = tmp_path / "long.compressed.ply"
    p.write_bytes(data + bytes(16))
    refused(p, "compressed PLY", "16 bytes of trailing data")
    # one chunk and 256 Gaussians fewer in the header than in the data (the counts agree)
    p.write_bytes(data.replace(b"element chunk 2\n", b"element chunk 1\n").replace(
        b"element vertex 300\n", b"element vertex 256\n").replace(b"element sh 300\n", b"element sh 256\n"))
    refused(p, "compressed PLY", "bytes of trailing data")


# --------------------------------------------------------------------------- export


@pytest.mark.parametrize("fmt", ["spz", "sog", "compressed-ply"])
def test_export_refuses_a_lying_file_and_writes_nothing(tmp_path, g, fmt, capsys):
    if fmt == "spz":
        raw = bytearray(gzip.decompress(_write(tmp_path, g, "spz", "good.spz", spz_version=3).read_bytes()))
        raw[8:12] = struct.pack("<I", 200)
        src = tmp_path / "lying.spz"
        src.write_bytes(gzip.compress(bytes(raw)))
    elif fmt == "sog":
        files = _sog_files(tmp_path, g)
        src = _bundle(tmp_path, "lying.sog", files, **{"scales.webp": _resized(files["scales.webp"], 4, 0)})
    else:
        data = _write(tmp_path, g, "compressed-ply", "good.compressed.ply").read_bytes()
        src = tmp_path / "lying.compressed.ply"
        src.write_bytes(data.replace(b"property uint packed_rotation", b"property float packed_rotation"))
    out = tmp_path / "out" / "scene.ply"
    assert main(["export", str(src), "-o", str(out)]) == 1
    said = capsys.readouterr()
    lines = said.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {src}: "), said.err
    assert "a bug" not in said.err and not out.exists()


# --------------------------------------------------------------------------- PLY


def test_ply_whose_count_is_lower_than_its_data_is_refused(tmp_path, g):
    """dfa6aa5 read the first 299 of 300 Gaussians of such a file without a word."""
    from spirula.engine.errors import PlyError
    from spirula.engine.io.ply import read_ply, write_ply

    p = tmp_path / "scene.ply"
    write_ply(p, g)
    data = p.read_bytes()
    p.write_bytes(data.replace(b"element vertex 300\n", b"element vertex 299\n"))
    record = 4 * (17 + 9)
    with pytest.raises(PlyError, match=rf"^{p}: {record} bytes of trailing data: the header's elements take "
                                       rf"{299 * record} bytes"):
        read_ply(p)
    # ASCII: one line per element; blank lines at the end are no data
    lines = [" ".join(f"{v:.6g}" for v in row) for row in np.random.default_rng(1).normal(size=(3, 17))]
    names = ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
             "rot_0", "rot_1", "rot_2", "rot_3"]
    props = "".join(f"property float {n}\n" for n in names)
    head = "ply\nformat ascii 1.0\nelement vertex {}\n" + props + "end_header\n"
    p.write_text(head.format(3) + "\n".join(lines) + "\n\n  \n")
    assert len(read_ply(p, warn=False)) == 3
    p.write_text(head.format(2) + "\n".join(lines) + "\n")
    with pytest.raises(PlyError, match=rf"^{p}: 1 line of trailing data"):
        read_ply(p)


def test_ascii_ply_with_a_word_for_a_number_is_named_in_words(tmp_path):
    """dfa6aa5 said "could not convert string to float: b'abc'" (NumPy's words)."""
    from spirula.engine.errors import PlyError
    from spirula.engine.io.ply import read_point_cloud

    p = tmp_path / "points.ply"
    p.write_text("ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty float z\n"
                 "end_header\n1 2 3\n4 abc 6\n")
    with pytest.raises(PlyError) as e:
        read_point_cloud(p)
    assert str(e.value) == f"{p}: malformed ASCII body: the value 'abc' is not a number"


def test_compressed_ply_of_no_gaussians_reads_as_none(tmp_path, g):
    """Found by the fuzz: 0 chunks and 0 vertices raised NumPy's reshape error."""
    data = _write(tmp_path, g, "compressed-ply", "good.compressed.ply").read_bytes()
    head = data[:data.index(b"element sh")].replace(b"element chunk 2", b"element chunk 0").replace(
        b"element vertex 300", b"element vertex 0")
    p = tmp_path / "empty.compressed.ply"
    p.write_bytes(head + b"end_header\n")
    assert len(formats.read_any(p, warn=False)) == 0


def test_sog_naming_one_image_for_two_roles_is_read_or_refused_in_words(tmp_path, g):
    files = _sog_files(tmp_path, g)
    meta = json.loads(files["meta.json"])
    shn = {**meta["shN"], "files": ["means_u.webp", "shN_labels.webp"]}   # centroids: a per-Gaussian image
    p = _bundle(tmp_path, "roles.sog", files, **{"meta.json": json.dumps({**meta, "shN": shn})})
    refused(p, "SOG", "means_u.webp is 20 x 16; 64 palette entries of 3 coefficients (bands 1) need 192 x 1")
