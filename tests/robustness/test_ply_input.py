"""Input class 5, PLY import for viewing and fine-tuning: SH degree 0-3, files as other
splat tools write them (no normals, extra properties, another property order, doubles,
elements before and after 'vertex', CRLF headers), ASCII and big-endian, non-finite
values and zero quaternions dropped with a count per reason, point clouds / meshes /
compressed splat files refused by read_ply with a clear message (the route to view point
clouds and meshes as splats is tested in test_ply_repairs.py), a header claiming 2^31 vertices over a tiny
body refused without allocating. Files are laid out by hand (tests/robustness/fixtures).
"""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

from spirula.engine.errors import PlyError
from spirula.engine.io.ply import PlyWarning, read_ply

from .fixtures import gaussian_rows, ply_bytes


def _check(g, rows, degree):
    m = {0: 0, 1: 3, 2: 8, 3: 15}[degree]
    f32 = lambda *names: np.stack([rows[n] for n in names], 1).astype(np.float32)  # noqa: E731
    np.testing.assert_array_equal(g.means, f32("x", "y", "z"))
    np.testing.assert_array_equal(g.scales, f32("scale_0", "scale_1", "scale_2"))
    np.testing.assert_array_equal(g.quats, f32("rot_0", "rot_1", "rot_2", "rot_3"))
    np.testing.assert_array_equal(g.opacities, rows["opacity"].astype(np.float32))
    np.testing.assert_array_equal(g.sh0, f32("f_dc_0", "f_dc_1", "f_dc_2"))
    assert g.shN.shape == (len(rows), m, 3) and g.sh_degree == degree
    for c in range(3):  # channel-major in the file: f_rest_{c * M + k} is coefficient k + 1 of channel c
        for k in range(m):
            np.testing.assert_array_equal(g.shN[:, k, c], rows[f"f_rest_{c * m + k}"].astype(np.float32))


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@pytest.mark.parametrize("layout", ["inria", "gsplat-like", "big-endian doubles", "ascii", "crlf with elements"])
def test_gaussian_files_as_tools_write_them(tmp_path, degree, layout):
    rng = np.random.default_rng(10 * degree + len(layout))
    extra = ("filter_3D",) if layout == "gsplat-like" else ()
    rows, names = gaussian_rows(rng, 7, degree, names_extra=extra)
    fmt, typ, order, elements = "binary_little_endian", "float", list(names), []
    if layout == "gsplat-like":  # no normals, an extra property, properties in another order
        order = [n for n in names if n not in ("nx", "ny", "nz")]
        rng.shuffle(order)
    elif layout == "big-endian doubles":
        fmt, typ = "binary_big_endian", "double"
    elif layout == "ascii":
        fmt = "ascii"
    props = [(typ, n) for n in order]
    vertex = ("vertex", rows, props)
    if layout == "crlf with elements":  # a fixed-size element before 'vertex', another after it
        cams = np.zeros(2, [("fx", "f8"), ("id", "f8")])
        cams["fx"], cams["id"] = [500.0, 510.0], [1, 2]
        elements = [("camera", cams, [("double", "fx"), ("int", "id")]), vertex,
                    ("extrinsic", np.zeros(3, [("e", "f8")]), [("float", "e")])]
    else:
        elements = [vertex]
    data = ply_bytes(fmt, elements, comments=("written by some other tool",))
    if layout == "crlf with elements":
        head, body = data.split(b"end_header\n", 1)
        data = head.replace(b"\n", b"\r\n") + b"end_header\r\n" + body
    path = tmp_path / "splat.ply"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing dropped, nothing repaired
        g = read_ply(path)
    _check(g, rows, degree)
    assert g.dropped == 0


@pytest.mark.parametrize("fmt", ["binary_little_endian", "ascii"])
def test_non_finite_and_zero_quaternions_are_dropped_with_a_count(tmp_path, fmt):
    rng = np.random.default_rng(3)
    rows, names = gaussian_rows(rng, 12, 1)
    rows["x"][1] = np.nan
    rows["scale_2"][4] = np.inf
    rows["f_rest_8"][5] = -np.inf
    rows["opacity"][6] = np.nan
    for q in ("rot_0", "rot_1", "rot_2", "rot_3"):
        rows[q][9] = 0.0
    path = tmp_path / "bad values.ply"
    path.write_bytes(ply_bytes(fmt, [("vertex", rows, [("float", n) for n in names])]))
    with pytest.warns(PlyWarning) as rec:
        g = read_ply(path)
    assert [str(r.message) for r in rec] == [
        f"{path}: dropped 5 of 12 Gaussians with invalid values (non-finite position: 1, non-finite scale: 1, "
        "zero rotation: 1, non-finite opacity: 1, non-finite colour: 1)"]
    assert g.dropped == 5 and len(g) == 7 and g.notes == [str(rec[0].message)]
    assert g.dropped_by == {"non-finite position": 1, "non-finite scale": 1, "zero rotation": 1,
                            "non-finite opacity": 1, "non-finite colour": 1}
    _check(g, rows[[0, 2, 3, 7, 8, 10, 11]], 1)


def test_not_gaussians_is_said_clearly(tmp_path):
    pts = np.zeros(2, [("x", "f8"), ("y", "f8"), ("z", "f8"), ("red", "f8"), ("green", "f8"), ("blue", "f8")])
    cloud = tmp_path / "cloud.ply"
    cloud.write_bytes(ply_bytes("binary_little_endian", [("vertex", pts, [("float", "x"), ("float", "y"),
                      ("float", "z"), ("uchar", "red"), ("uchar", "green"), ("uchar", "blue")])]))
    mesh = tmp_path / "mesh.ply"
    mesh.write_bytes(b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
                     b"property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
                     b"0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n")
    packed = tmp_path / "scene.compressed.ply"
    packed.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement chunk 1\nproperty float min_x\n"
                       b"element vertex 1\nproperty uint packed_position\nproperty uint packed_rotation\n"
                       b"property uint packed_scale\nproperty uint packed_color\nend_header\n" + b"\0" * 20)
    missing = "f_dc_0, f_dc_1, f_dc_2, opacity, scale_0, scale_1, scale_2, rot_0, rot_1, rot_2, rot_3"
    route = "the studio opens it as splats of a default size (spirula.engine.io.ply_points.open_splats)"
    expect = {
        cloud: f"{cloud}: is a point cloud, not 3D Gaussians: missing {missing}; {route}",
        mesh: f"{mesh}: is a mesh, not 3D Gaussians: missing {missing}; {route}",
        packed: f"{packed}: is a compressed splat PLY (PlayCanvas/SuperSplat 'chunk' + packed_* layout), not a "
                "standard 3DGS PLY: read it with spirula.engine.io.formats.read_any (spirula/engine/io/compressed_ply.py)",
    }
    for path, message in expect.items():
        with pytest.raises(PlyError) as e:
            read_ply(path)
        assert str(e.value) == message


@pytest.mark.parametrize("fmt", ["binary_little_endian", "binary_big_endian", "ascii"])
def test_huge_vertex_count_over_a_tiny_body_is_refused_without_allocating(tmp_path, fmt):
    rows, names = gaussian_rows(np.random.default_rng(0), 2, 3)
    data = ply_bytes(fmt, [("vertex", rows, [("float", n) for n in names])])
    data = data.replace(b"element vertex 2", f"element vertex {2**31}".encode())
    path = tmp_path / "liar.ply"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        with pytest.raises(PlyError) as e:
            read_ply(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20, f"{peak} bytes allocated"
    msg = str(e.value)
    if fmt == "ascii":
        assert msg.startswith(f"{path}: truncated body: the header declares {2**31} vertices but the ASCII body has")
    else:
        assert msg == (f"{path}: truncated body: the header declares {2**31} vertices ({2**31 * 4 * 62} bytes) "
                       f"but only {2 * 4 * 62} bytes follow")


def test_missing_file_is_a_ply_error(tmp_path):
    with pytest.raises(PlyError) as e:
        read_ply(tmp_path / "nowhere.ply")
    assert str(e.value) == f"{tmp_path / 'nowhere.ply'}: cannot read (No such file or directory)"
