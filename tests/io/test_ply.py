"""Tests of spirula.engine.io.ply: the standard 3DGS PLY layout, round trips, foreign files, errors.

Files read in the "independent" tests are built here by hand (a header string plus a NumPy
structured array or text), not by ``write_ply``, so a layout mistake shared by the writer
and the reader cannot hide.
"""

from __future__ import annotations

import os
import re
import tracemalloc
import warnings

import numpy as np
import pytest

from spirula.engine.errors import PlyError
from spirula.engine.io import ply as plymod
from spirula.engine.io.ply import GaussianPly, PlyWarning, read_ply, write_ply

M_FOR_DEGREE = {0: 0, 1: 3, 2: 8, 3: 15}

EXPECTED_PROPS_DEG1 = (
    "x y z nx ny nz f_dc_0 f_dc_1 f_dc_2 "
    + " ".join(f"f_rest_{i}" for i in range(9))
    + " opacity scale_0 scale_1 scale_2 rot_0 rot_1 rot_2 rot_3"
).split()


def random_gaussians(rng: np.random.Generator, n: int, degree: int) -> GaussianPly:
    """Fresh random Gaussians with awkward float32 values (subnormals, -0.0, extremes)."""
    m = M_FOR_DEGREE[degree]
    f32 = np.float32
    g = GaussianPly(
        means=(rng.standard_normal((n, 3)) * 10).astype(f32),
        scales=rng.uniform(-9, 2, (n, 3)).astype(f32),
        quats=rng.standard_normal((n, 4)).astype(f32),
        opacities=rng.normal(0, 4, n).astype(f32),
        sh0=rng.standard_normal((n, 3)).astype(f32),
        shN=(rng.standard_normal((n, m, 3)) * 0.3).astype(f32),
    )
    # Values whose bits a sloppy float path would change.
    g.means[0, 0] = np.float32(-0.0)
    g.means[1, 1] = np.float32(1e-45)  # smallest subnormal
    g.sh0[2, 2] = np.finfo(np.float32).max
    g.opacities[3] = np.finfo(np.float32).tiny
    return g


def bits(a: np.ndarray) -> np.ndarray:
    assert a.dtype == np.float32
    return np.ascontiguousarray(a).view(np.uint32)


def assert_bit_equal(a: GaussianPly, b: GaussianPly) -> None:
    for name in ("means", "scales", "quats", "opacities", "sh0", "shN"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        assert y.dtype == np.float32, name
        assert np.array_equal(bits(x), bits(y)), name


def header_props(path) -> tuple[list[str], list[str]]:
    """(header lines, vertex property names) read by hand from a file."""
    with open(path, "rb") as f:
        raw = f.read()
    head = raw[: raw.index(b"end_header\n") + len(b"end_header\n")].decode("ascii")
    lines = head.splitlines()
    props = [ln.split()[2] for ln in lines if ln.startswith("property ")]
    return lines, props


# ----------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_round_trip_bit_exact(tmp_path, degree):
    rng = np.random.default_rng(1000 + degree)
    g = random_gaussians(rng, 257, degree)
    path = tmp_path / f"deg{degree}.ply"
    write_ply(path, g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing may be dropped
        back = read_ply(path)
    assert back.dropped == 0
    assert back.sh_degree == degree
    assert_bit_equal(g, back)
    # Exact size: header + N * (17 + 3M) float32.
    lines, _ = header_props(path)
    header_len = sum(len(ln) + 1 for ln in lines)
    assert path.stat().st_size == header_len + 257 * 4 * (17 + 3 * M_FOR_DEGREE[degree])


def test_round_trip_dict_and_empty(tmp_path):
    rng = np.random.default_rng(7)
    g = random_gaussians(rng, 5, 1)
    path = tmp_path / "d.ply"
    write_ply(path, {k: getattr(g, k) for k in ("means", "scales", "quats", "opacities", "sh0", "shN")})
    assert_bit_equal(g, read_ply(path))

    empty = GaussianPly(
        means=np.zeros((0, 3), np.float32), scales=np.zeros((0, 3), np.float32),
        quats=np.zeros((0, 4), np.float32), opacities=np.zeros(0, np.float32),
        sh0=np.zeros((0, 3), np.float32), shN=np.zeros((0, 15, 3), np.float32),
    )
    write_ply(path, empty)
    back = read_ply(path)
    assert len(back) == 0 and back.shN.shape == (0, 15, 3)


def test_header_matches_standard_layout(tmp_path):
    rng = np.random.default_rng(11)
    g = random_gaussians(rng, 9, 1)
    path = tmp_path / "h.ply"
    write_ply(path, g)
    lines, props = header_props(path)
    assert lines[0] == "ply"
    assert lines[1] == "format binary_little_endian 1.0"
    assert lines[2] == "element vertex 9"
    assert lines[-1] == "end_header"
    assert props == EXPECTED_PROPS_DEG1
    assert all(ln.startswith("property float ") for ln in lines[3:-1])
    assert len(lines) == 3 + len(EXPECTED_PROPS_DEG1) + 1

    # Degree 3: 45 f_rest in order, opacity right after them.
    write_ply(path, random_gaussians(rng, 4, 3))
    _, props3 = header_props(path)
    assert props3[9:54] == [f"f_rest_{i}" for i in range(45)]
    assert props3[54:] == EXPECTED_PROPS_DEG1[18:]

    # Normals are written as zeros.
    raw = np.fromfile(path, dtype="<f4", offset=sum(len(ln) + 1 for ln in header_props(path)[0]))
    rows = raw.reshape(4, 62)
    assert not rows[:, 3:6].any()


def test_write_rejects_bad_shapes(tmp_path):
    rng = np.random.default_rng(3)
    g = random_gaussians(rng, 6, 1)
    g.quats = g.quats[:, :3]
    with pytest.raises(ValueError, match="quats"):
        write_ply(tmp_path / "bad.ply", g)
    g = random_gaussians(rng, 6, 1)
    g.shN = np.zeros((6, 4, 3), np.float32)
    with pytest.raises(ValueError, match="0, 3, 8 or 15"):
        write_ply(tmp_path / "bad.ply", g)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ hand-written files


def original_3dgs_file(path, n: int, fmt: str = "binary_little_endian", dtype: str = "f4",
                       order: list[str] | None = None) -> np.ndarray:
    """Write a degree-1 file the way the original 3DGS code lays it out; return the record.

    Values are chosen so every property of every vertex is distinct and recognisable:
    ``f_rest_j`` of vertex n holds ``n * 1000 + j`` (so channel-major order is visible).
    """
    names = order or EXPECTED_PROPS_DEG1
    rng = np.random.default_rng(5)
    values = {name: rng.standard_normal(n) for name in EXPECTED_PROPS_DEG1}
    for j in range(9):
        values[f"f_rest_{j}"] = np.arange(n) * 1000.0 + j
    for c in ("nx", "ny", "nz"):
        values[c] = np.zeros(n)
    values["rot_0"] = rng.uniform(0.5, 1.0, n)  # non-zero quaternions
    if fmt == "ascii":
        typ = "float" if dtype == "f4" else "double"
        header = f"ply\nformat ascii 1.0\nelement vertex {n}\n" + "".join(
            f"property {typ} {p}\n" for p in names) + "end_header\n"
        cols = [values[p].astype(dtype) for p in names]
        # repr of the float64 value of a float32 parses back to the same float32.
        text = "\n".join(" ".join(repr(float(col[i])) for col in cols) for i in range(n)) + "\n"
        path.write_bytes(header.encode() + text.encode())
    else:
        bo = "<" if fmt == "binary_little_endian" else ">"
        typ = "float" if dtype == "f4" else "double"
        header = f"ply\nformat {fmt} 1.0\nelement vertex {n}\n" + "".join(
            f"property {typ} {p}\n" for p in names) + "end_header\n"
        rec = np.empty(n, dtype=[(p, bo + dtype) for p in names])
        for p in names:
            rec[p] = values[p]
        path.write_bytes(header.encode() + rec.tobytes())
    out = np.empty(n, dtype=[(p, "f4") for p in EXPECTED_PROPS_DEG1])
    for p in EXPECTED_PROPS_DEG1:
        out[p] = values[p].astype(dtype).astype(np.float32)
    return out


def check_against_record(g: GaussianPly, rec: np.ndarray) -> None:
    n = rec.shape[0]
    assert len(g) == n and g.sh_degree == 1 and g.dropped == 0
    np.testing.assert_array_equal(g.means, np.stack([rec["x"], rec["y"], rec["z"]], 1))
    np.testing.assert_array_equal(g.sh0, np.stack([rec[f"f_dc_{c}"] for c in range(3)], 1))
    np.testing.assert_array_equal(g.opacities, rec["opacity"])
    np.testing.assert_array_equal(g.scales, np.stack([rec[f"scale_{i}"] for i in range(3)], 1))
    np.testing.assert_array_equal(g.quats, np.stack([rec[f"rot_{i}"] for i in range(4)], 1))
    # Channel-major f_rest: shN[n, k, c] == f_rest_{c * 3 + k} == n * 1000 + c * 3 + k.
    for i in range(n):
        for k in range(3):
            for c in range(3):
                assert g.shN[i, k, c] == i * 1000 + c * 3 + k


def test_reads_hand_written_original_layout(tmp_path):
    path = tmp_path / "orig.ply"
    rec = original_3dgs_file(path, 6)
    g = read_ply(path)
    check_against_record(g, rec)
    # Spot-check by name, independently of the loop above.
    assert g.shN[2, 0, 1] == rec["f_rest_3"][2]  # coefficient 1 of G
    assert g.shN[2, 2, 2] == rec["f_rest_8"][2]  # coefficient 3 of B


@pytest.mark.parametrize("fmt,dtype", [
    ("ascii", "f4"), ("ascii", "f8"),
    ("binary_big_endian", "f4"), ("binary_big_endian", "f8"),
    ("binary_little_endian", "f8"),
])
def test_reads_other_formats_shuffled_order(tmp_path, fmt, dtype):
    order = list(EXPECTED_PROPS_DEG1)
    np.random.default_rng(9).shuffle(order)
    path = tmp_path / f"{fmt}_{dtype}.ply"
    rec = original_3dgs_file(path, 7, fmt=fmt, dtype=dtype, order=order)
    check_against_record(read_ply(path), rec)


def test_ascii_with_comments_extra_props_and_leading_element(tmp_path):
    path = tmp_path / "extra.ply"
    props = ["x", "y", "z", "red", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
             "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    header = (
        "ply\r\nformat ascii 1.0\r\ncomment made by hand\r\n"
        "element camera 2\r\nproperty float px\r\nproperty list uchar int ids\r\n"
        "element vertex 2\r\n"
        + "".join(f"property {'uchar' if p == 'red' else 'float'} {p}\r\n" for p in props)
        + "end_header\r\n"
    )
    body = (
        "1.5 3 1 2 3\n0.5 0\n"
        "1 2 3 255 0.1 0.2 0.3 -1 -4 -5 -6 1 0 0 0\n"
        "-1 -2 -3 7 0.4 0.5 0.6 2 -1 -2 -3 0 0 0 1\n"
    )
    path.write_bytes((header + body).encode())
    g = read_ply(path)
    assert g.sh_degree == 0 and g.shN.shape == (2, 0, 3)
    np.testing.assert_array_equal(g.means, np.float32([[1, 2, 3], [-1, -2, -3]]))
    np.testing.assert_array_equal(g.sh0, np.float32([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]))
    np.testing.assert_array_equal(g.opacities, np.float32([-1, 2]))
    np.testing.assert_array_equal(g.quats, np.float32([[1, 0, 0, 0], [0, 0, 0, 1]]))


def test_binary_with_leading_fixed_element(tmp_path):
    rng = np.random.default_rng(21)
    g = random_gaussians(rng, 10, 2)
    src = tmp_path / "src.ply"
    write_ply(src, g)
    raw = src.read_bytes()
    cut = raw.index(b"element vertex")
    extra_header = b"element extrinsic 3\nproperty double e0\nproperty uchar e1\n"
    extra_body = b"\xab" * (3 * 9)
    end = raw.index(b"end_header\n") + len(b"end_header\n")
    dst = tmp_path / "dst.ply"
    dst.write_bytes(raw[:cut] + extra_header + raw[cut:end] + extra_body + raw[end:])
    assert_bit_equal(g, read_ply(dst))
    dst.write_bytes(dst.read_bytes() + b"trailing")  # stray bytes, less than a vertex record: no data
    assert_bit_equal(g, read_ply(dst))
    record = len(raw[end:]) // 10
    dst.write_bytes(dst.read_bytes() + b"\0" * (record - 8))  # a whole record the header does not count
    with pytest.raises(PlyError, match=f"^{re.escape(str(dst))}: {record} bytes of trailing data"):
        read_ply(dst)


# ------------------------------------------------------------------------ invalid data


def test_drops_non_finite_and_zero_quaternions(tmp_path):
    rng = np.random.default_rng(4)
    g = random_gaussians(rng, 20, 3)
    g.means[4, 1] = np.nan
    g.scales[7, 2] = np.inf
    g.shN[9, 14, 2] = -np.inf
    g.quats[12] = 0.0
    g.quats[13] = [-0.0, 0.0, -0.0, 0.0]
    g.opacities[15] = np.nan
    path = tmp_path / "nan.ply"
    write_ply(path, g)
    with pytest.warns(PlyWarning, match=r"dropped 6 of 20") as rec:
        back = read_ply(path)
    assert str(path) in str(rec[0].message)
    assert back.dropped == 6 and len(back) == 14
    keep = np.ones(20, bool)
    keep[[4, 7, 9, 12, 13, 15]] = False
    for name in ("means", "scales", "quats", "opacities", "sh0", "shN"):
        assert np.array_equal(bits(getattr(g, name)[keep]), bits(getattr(back, name))), name


# ----------------------------------------------------------------------------- errors


def raises_naming(path, *fragments):
    with pytest.raises(PlyError) as info:
        read_ply(path)
    msg = str(info.value)
    assert str(path) in msg, msg
    for frag in fragments:
        assert frag in msg, msg
    return msg


def gaussian_header(n, fmt="binary_little_endian", k=9):
    props = EXPECTED_PROPS_DEG1[:9] + [f"f_rest_{i}" for i in range(k)] + EXPECTED_PROPS_DEG1[18:]
    return (f"ply\nformat {fmt} 1.0\nelement vertex {n}\n"
            + "".join(f"property float {p}\n" for p in props) + "end_header\n").encode()


def test_error_not_a_ply(tmp_path, rng):
    p = tmp_path / "image.ply"
    p.write_bytes(b"\x89PNG\r\n\x1a\n" + rng.bytes(64))
    raises_naming(p, "not a PLY")
    p.write_bytes(b"")
    raises_naming(p, "not a PLY", "empty")
    p.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 3\n" + b"\x00" * 10000)
    raises_naming(p, "end_header")
    p.write_bytes(b"ply\nformat binary_middle_endian 1.0\nend_header\n")
    raises_naming(p, "format")


def test_error_truncated_body(tmp_path):
    rng = np.random.default_rng(8)
    src = tmp_path / "full.ply"
    write_ply(src, random_gaussians(rng, 50, 1))
    p = tmp_path / "cut.ply"
    p.write_bytes(src.read_bytes()[:-37])
    raises_naming(p, "truncated", "50 vertices")
    # ASCII with a missing last line.
    full = tmp_path / "a.ply"
    original_3dgs_file(full, 5, fmt="ascii")
    lines = full.read_bytes().split(b"\n")
    p.write_bytes(b"\n".join(lines[:-2]) + b"\n")
    raises_naming(p, "truncated")
    # ASCII with a value missing in the middle.
    body_start = lines.index(b"end_header") + 1
    lines[body_start + 1] = b" ".join(lines[body_start + 1].split()[:-1])
    p.write_bytes(b"\n".join(lines))
    raises_naming(p, "expected 5 x 26 values")


def test_error_huge_vertex_count_without_allocating(tmp_path):
    p = tmp_path / "liar.ply"
    p.write_bytes(gaussian_header(2**31) + b"\x00" * 400)
    q = tmp_path / "liar_ascii.ply"
    q.write_bytes(gaussian_header(2**31, fmt="ascii") + b"0 " * 200)
    tracemalloc.start()
    try:
        raises_naming(p, "truncated", str(2**31))
        raises_naming(q, "truncated", str(2**31))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, peak


def test_error_point_cloud_and_mesh(tmp_path):
    p = tmp_path / "cloud.ply"
    rec = np.zeros(3, dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                             ("red", "u1"), ("green", "u1"), ("blue", "u1")])
    header = (b"ply\nformat binary_little_endian 1.0\nelement vertex 3\n"
              b"property float x\nproperty float y\nproperty float z\n"
              b"property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n")
    p.write_bytes(header + rec.tobytes())
    msg = raises_naming(p, "point cloud", "not 3D Gaussians", "missing", "f_dc_0", "opacity", "rot_3")
    assert "missing x" not in msg

    m = tmp_path / "mesh.ply"
    m.write_bytes(
        b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
        b"property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
        b"0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n"
    )
    raises_naming(m, "mesh", "not 3D Gaussians", "missing", "scale_0")

    e = tmp_path / "noverts.ply"
    e.write_bytes(b"ply\nformat ascii 1.0\nelement face 0\nend_header\n")
    raises_naming(e, "vertex")


@pytest.mark.parametrize("k", [3, 12, 48])
def test_error_bad_f_rest_count(tmp_path, k):
    p = tmp_path / f"rest{k}.ply"
    p.write_bytes(gaussian_header(2, k=k) + b"\x00" * 4 * 2 * (17 + k))
    raises_naming(p, f"{k} f_rest", "0, 9, 24 or 45")


# ----------------------------------------------------------------------- atomic write


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    rng = np.random.default_rng(12)
    old = random_gaussians(rng, 30, 2)
    path = tmp_path / "model.ply"
    write_ply(path, old)
    before = path.read_bytes()

    def half_then_fail(f, g):
        f.write(b"\x00" * 100)  # part of a body ...
        raise OSError(28, "No space left on device")  # ... then the disk fills up

    monkeypatch.setattr(plymod, "_write_vertices", half_then_fail)
    with pytest.raises(OSError, match="No space"):
        write_ply(path, random_gaussians(rng, 40, 3))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ply"]  # no temp file left
    assert_bit_equal(old, read_ply(path))

    # A failed first write leaves nothing behind.
    with pytest.raises(OSError):
        write_ply(tmp_path / "new.ply", old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ply"]


def test_overwrite_replaces_whole_file(tmp_path):
    rng = np.random.default_rng(13)
    path = tmp_path / "model.ply"
    write_ply(path, random_gaussians(rng, 100, 3))
    small = random_gaussians(rng, 4, 0)
    write_ply(path, small)
    assert_bit_equal(small, read_ply(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ply"]
    mode = path.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask
