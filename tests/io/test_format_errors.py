"""Malformed, truncated and foreign files of every splat format are refused with a
SplatFileError that names the file, the format and what is wrong; a failed write leaves
no partial file and an existing one untouched."""

from __future__ import annotations


import gzip
import json
import re
import struct
import zipfile

import numpy as np
import pytest

from spirula.engine.errors import SplatFileError
from spirula.engine.io import formats
from tests.io.splat_cases import random_gaussians


def refused(path, fmt_label: str, *fragments: str):
    with pytest.raises(SplatFileError) as e:
        formats.read_any(path, warn=False)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {fmt_label} file: "), msg
    for f in fragments:
        assert f in msg, msg
    return msg


@pytest.fixture(scope="module")
def g():
    return random_gaussians(np.random.default_rng(7), 600, 2)


def _write(tmp_path, g, fmt, name=None, **kw):
    p = tmp_path / (name or f"good{formats.EXTENSIONS[fmt]}")
    formats.write_any(p, g, fmt, **kw)
    return p


def test_spz_refusals(tmp_path, g):
    bad = tmp_path / "noise.spz"
    bad.write_bytes(b"\x00\x01\x02\x03garbage")
    refused(bad, "SPZ", "bad magic")
    empty = tmp_path / "empty.spz"
    empty.write_bytes(b"")
    refused(empty, "SPZ", "empty")
    inner = tmp_path / "inner.spz"
    inner.write_bytes(gzip.compress(struct.pack("<IIIBBBB", 0x12345678, 3, 1, 0, 12, 0, 0)))
    refused(inner, "SPZ", "bad magic 0x12345678")
    v9 = tmp_path / "v9.spz"
    v9.write_bytes(gzip.compress(struct.pack("<IIIBBBB", 0x5053474E, 9, 1, 0, 12, 0, 0)))
    refused(v9, "SPZ", "unknown version 9")
    for version in (3, 4):
        data = _write(tmp_path, g, "spz", f"v{version}.spz", spz_version=version).read_bytes()
        cut = tmp_path / f"cut{version}.spz"
        cut.write_bytes(data[: len(data) // 2])
        refused(cut, "SPZ", "truncated")
    short = tmp_path / "short.spz"   # a valid gzip stream whose header claims more than its body holds
    short.write_bytes(gzip.compress(struct.pack("<IIIBBBB", 0x5053474E, 3, 1000, 0, 12, 0, 0)
                                     + np.random.default_rng(0).bytes(100)))
    refused(short, "SPZ", "body is truncated", "1,000 Gaussians")
    data = bytearray(_write(tmp_path, g, "spz", "v4.spz").read_bytes())
    data[15] = 5                                    # stream count
    streams = tmp_path / "streams.spz"
    streams.write_bytes(bytes(data))
    refused(streams, "SPZ", "5 attribute streams")
    data[15], data[4] = 6, 7                        # version 7 in a plaintext header
    v7 = tmp_path / "v7.spz"
    v7.write_bytes(bytes(data))
    refused(v7, "SPZ", "unknown version 7")


def test_splat_refusals(tmp_path, g):
    data = _write(tmp_path, g, "splat").read_bytes()
    cut = tmp_path / "cut.splat"
    cut.write_bytes(data[:-5])
    refused(cut, ".splat", "not a whole number of 32-byte records")


def test_splat_with_nan_drops_those_gaussians_and_says_so(tmp_path, g):
    data = bytearray(_write(tmp_path, g, "splat").read_bytes())
    data[0:4] = struct.pack("<f", float("nan"))
    p = tmp_path / "nan.splat"
    p.write_bytes(bytes(data))
    h = formats.read_any(p, warn=False)
    assert len(h) == len(g) - 1 and h.dropped == 1
    assert h.notes == [f"{p}: .splat file: dropped 1 of {len(g)} Gaussians with invalid values (non-finite position: 1)"]


def test_compressed_ply_refusals(tmp_path, g):
    data = _write(tmp_path, g, "compressed-ply").read_bytes()
    cut = tmp_path / "cut.compressed.ply"
    cut.write_bytes(data[: len(data) - 700])
    refused(cut, "compressed PLY", "truncated")
    wrong = tmp_path / "wrong.compressed.ply"
    wrong.write_bytes(data.replace(b"element chunk 3\n", b"element chunk 4\n", 1))
    refused(wrong, "compressed PLY", "4 chunks for 600 Gaussians", "wrong count")
    sh = tmp_path / "sh.compressed.ply"
    sh.write_bytes(data.replace(b"element sh 600\n", b"element sh 599\n", 1))
    refused(sh, "compressed PLY", "599 rows for 600 Gaussians")


def test_sog_refusals(tmp_path, g):
    good = _write(tmp_path, g, "sog")
    files = {n: zipfile.ZipFile(good).read(n) for n in zipfile.ZipFile(good).namelist()}
    meta = json.loads(files["meta.json"])

    def bundle(name, **changes):
        p = tmp_path / name
        with zipfile.ZipFile(p, "w") as z:
            for k, v in {**files, **changes}.items():
                if v is not None:
                    z.writestr(k, v)
        return p

    refused(bundle("nometa.sog", **{"meta.json": None}), "SOG", "no meta.json")
    v1 = {k: v for k, v in meta.items() if k != "version"}
    refused(bundle("v1.sog", **{"meta.json": json.dumps(v1)}), "SOG", "version 1", "splat-transform")
    refused(bundle("v3.sog", **{"meta.json": json.dumps({**meta, "version": 3})}), "SOG", "unknown version 3")
    refused(bundle("noimage.sog", **{"quats.webp": None}), "SOG", "quats.webp", "not in the bundle")
    refused(bundle("notwebp.sog", **{"sh0.webp": b"not an image"}), "SOG", "sh0.webp is no image")
    refused(bundle("count.sog", **{"meta.json": json.dumps({**meta, "count": 10 ** 6})}), "SOG", "wrong count")
    raw = good.read_bytes()
    cut = tmp_path / "cut.sog"
    cut.write_bytes(raw[: len(raw) // 2])
    refused(cut, "SOG")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps(meta))
    refused(folder, "SOG", "means_l.webp", "missing")


def test_unknown_files_name_the_known_formats(tmp_path):
    p = tmp_path / "scene.xyz"
    p.write_bytes(b"\x00" * 64)
    with pytest.raises(SplatFileError) as e:
        formats.read_any(p)
    assert str(e.value).startswith(f"{p}: splat file: '.xyz' is none of the splat formats")
    with pytest.raises(SplatFileError, match="no such file"):
        formats.read_any(tmp_path / "missing.spz")


@pytest.mark.parametrize("fmt", ["spz", "sog", "compressed-ply", "splat"])
def test_invalid_values_are_refused_on_write_and_nothing_is_written(tmp_path, g, fmt):
    bad = g.subset(np.arange(len(g)))
    bad.means[3, 1] = np.nan
    p = tmp_path / f"out{formats.EXTENSIONS[fmt]}"
    p.write_bytes(b"the previous export")
    with pytest.raises(SplatFileError) as e:
        formats.write_any(p, bad, fmt)
    assert str(e.value).startswith(f"{p}: ") and "non-finite position: 1" in str(e.value)
    assert p.read_bytes() == b"the previous export"
    assert sorted(x.name for x in tmp_path.iterdir()) == [p.name]


@pytest.mark.parametrize("fmt", ["spz", "sog", "compressed-ply", "splat"])
def test_a_failed_write_leaves_no_partial_file(tmp_path, g, fmt, monkeypatch):
    import spirula.engine.fileio

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spirula.engine.fileio.os, "fsync", full_disk)
    fresh, old = tmp_path / f"new{formats.EXTENSIONS[fmt]}", tmp_path / f"old{formats.EXTENSIONS[fmt]}"
    old.write_bytes(b"kept")
    for p in (fresh, old):  # one line naming the file (spirula/engine/fileio.py write_error)
        with pytest.raises(OSError, match=f"^cannot write {re.escape(str(p))}: no space left on device$"):
            formats.write_any(p, g, fmt)
    assert not fresh.exists() and old.read_bytes() == b"kept"
    assert sorted(x.name for x in tmp_path.iterdir()) == [old.name]
