"""Input class 5, round two: what PLY reading repairs, keeps or converts instead of
refusing or dropping silently.

- huge splats (sigma ~1e17, or beyond 100 x the scene's robust extent) dropped with the
  count and the numbers; the limit is checked from both sides;
- invalid values dropped with a count per reason (several reasons on one splat);
- unknown per-splat properties kept at their type and written back (round trip);
- SH degree 4 cut to degree 3 with a warning (the coefficients kept are checked against
  the file's channel-major layout);
- point clouds and meshes opened as splats through ``open_splats`` with a note naming the
  file; sizes checked against a brute-force nearest-neighbour distance.

Files are laid out by hand (tests/robustness/fixtures.py), never by the engine's writer.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from spirula.engine.errors import PlyError
from spirula.engine.io.ply import PlyWarning, read_ply, write_ply
from spirula.engine.io.ply_points import open_splats

from .fixtures import gaussian_rows, ply_bytes

C0 = 1.0 / (2.0 * np.sqrt(np.pi))


def _write(path, rows, props, fmt="binary_little_endian"):
    path.write_bytes(ply_bytes(fmt, [("vertex", rows, props)]))
    return path


def _scene(rng, n, degree=1, extra=()):
    """Gaussians spread over a unit-ish box with small splats (sigma < 0.1)."""
    rows, names = gaussian_rows(rng, n, degree, names_extra=extra)
    for c in ("x", "y", "z"):
        rows[c] = rng.uniform(-1, 1, n).astype(np.float32)
    for c in ("scale_0", "scale_1", "scale_2"):
        rows[c] = rng.uniform(-6, -2.5, n).astype(np.float32)
    return rows, names


def test_huge_splats_are_dropped_with_count_and_numbers(tmp_path):
    rng = np.random.default_rng(11)
    rows, names = _scene(rng, 400)
    # the robust extent, computed here independently: 90th percentile of |x - median|
    xyz = np.stack([rows[c] for c in ("x", "y", "z")], 1).astype(np.float32).astype(np.float64)
    extent = np.percentile(np.linalg.norm(xyz - np.median(xyz, 0), axis=1), 90)
    rows["scale_1"][3] = np.log(1e17)                      # the σ ≈ 1e17 seen in the wild
    rows["scale_0"][50] = np.log(150 * extent)             # over the limit of 100 x extent
    rows["scale_2"][70] = np.log(60 * extent)              # large but under it: kept
    path = _write(tmp_path / "huge.ply", rows, [("float", n) for n in names])
    with pytest.warns(PlyWarning) as rec:
        g = read_ply(path)
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert msg.startswith(f"{path}: dropped 2 of 400 Gaussians with a huge scale (largest sigma 1e+17; limit ")
    assert f"= 100 x {extent:.3g}" in msg
    assert g.dropped == 2 and g.dropped_by == {"huge scale": 2} and len(g) == 398
    keep = np.setdiff1d(np.arange(400), [3, 50])
    np.testing.assert_array_equal(g.means[:, 0], rows["x"][keep].astype(np.float32))
    assert np.exp(g.scales.max()) == pytest.approx(60 * extent, rel=1e-5)
    # the check can be turned off
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_ply(path, max_scale_ratio=None)) == 400


def test_several_reasons_on_one_splat_are_each_counted(tmp_path):
    rng = np.random.default_rng(12)
    rows, names = _scene(rng, 30, degree=2)
    rows["y"][2], rows["rot_1"][2] = np.inf, np.nan       # position and rotation on one splat
    rows["f_dc_1"][5] = np.nan
    rows["f_rest_20"][6] = np.nan
    rows["scale_0"][9] = -np.inf
    path = _write(tmp_path / "several.ply", rows, [("double", n) for n in names], fmt="binary_big_endian")
    with pytest.warns(PlyWarning, match="dropped 4 of 30 Gaussians with invalid values"):
        g = read_ply(path)
    assert g.dropped_by == {"non-finite position": 1, "non-finite scale": 1, "non-finite rotation": 1,
                            "non-finite colour": 2}
    assert g.dropped == 4 and len(g) == 26


@pytest.mark.parametrize("fmt", ["binary_little_endian", "ascii"])
def test_unknown_properties_survive_a_round_trip(tmp_path, fmt):
    rng = np.random.default_rng(13)
    rows, names = _scene(rng, 9, degree=1)
    extra = {"filter_3D": ("float", "f4"), "semantic_id": ("int", "i4"), "red": ("uchar", "u1"),
             "confidence": ("double", "f8")}
    full = np.zeros(9, rows.dtype.descr + [(k, t) for k, (_, t) in extra.items()])
    for n in names:
        full[n] = rows[n]
    full["filter_3D"] = rng.uniform(0, 1, 9).astype(np.float32)
    full["semantic_id"] = rng.integers(-5, 1000, 9)
    full["red"] = rng.integers(0, 256, 9)
    full["confidence"] = rng.uniform(0, 1, 9)           # float64 values, not float32-representable
    full["x"][4] = np.nan                               # one splat dropped: its extras go with it
    props = [("float", n) for n in names if n not in ("nx", "ny", "nz")]
    props.insert(5, ("uchar", "red"))
    props += [("float", "filter_3D"), ("int", "semantic_id"), ("double", "confidence")]
    src = _write(tmp_path / "extras.ply", full, props, fmt)
    with pytest.warns(PlyWarning, match="non-finite position: 1"):
        g = read_ply(src)
    keep = np.arange(9) != 4
    assert list(g.extra) == ["red", "filter_3D", "semantic_id", "confidence"]  # file order
    for k, (_, t) in extra.items():
        assert g.extra[k].dtype == np.dtype(t), k
        np.testing.assert_array_equal(g.extra[k], full[k][keep])
    out = tmp_path / "again.ply"
    write_ply(out, g)
    head = out.read_bytes().split(b"end_header\n")[0].decode().splitlines()
    assert head[-4:] == ["property uchar red", "property float filter_3D", "property int semantic_id",
                         "property double confidence"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = read_ply(out)
    for k in extra:
        assert back.extra[k].dtype == g.extra[k].dtype
        np.testing.assert_array_equal(back.extra[k], full[k][keep])
    np.testing.assert_array_equal(back.means, g.means)


def test_sh_degree_4_is_cut_to_3_with_a_warning(tmp_path):
    rng = np.random.default_rng(14)
    rows, names = _scene(rng, 6, degree=0)
    m4 = 24                                              # coefficients per channel at degree 4
    rest = [f"f_rest_{i}" for i in range(3 * m4)]
    full = np.zeros(6, rows.dtype.descr + [(r, "f8") for r in rest])
    for n in names:
        full[n] = rows[n]
    for r in rest:
        full[r] = rng.normal(size=6).astype(np.float32)
    props = [("float", n) for n in names[:9]] + [("float", r) for r in rest] + [("float", n) for n in names[9:]]
    path = _write(tmp_path / "deg4.ply", full, props)
    with pytest.warns(PlyWarning) as rec:
        g = read_ply(path)
    assert [str(r.message) for r in rec] == [
        f"{path}: SH degree 4 (72 f_rest properties) cut to degree 3 (45): the higher coefficients are dropped "
        "(the renderer stops at degree 3)"]
    assert g.sh_degree == 3 and g.shN.shape == (6, 15, 3) and g.dropped == 0
    for c in range(3):                                   # file: f_rest_{c * 24 + k} is coefficient k + 1 of c
        for k in range(15):
            np.testing.assert_array_equal(g.shN[:, k, c], full[f"f_rest_{c * m4 + k}"].astype(np.float32))
    # 3 * 16 = 48 is no SH degree: still refused, naming the file
    bad = _write(tmp_path / "odd.ply", full, props[:9] + props[9:9 + 48] + props[9 + 72:])
    with pytest.raises(PlyError, match=f"{bad}: has 48 f_rest properties"):
        read_ply(bad)


def _nn_sigma(xyz):
    """Brute force: mean distance to the 3 nearest other points."""
    d = np.linalg.norm(xyz[:, None, :] - xyz[None, :, :], axis=2)
    np.fill_diagonal(d, np.inf)
    return np.sort(d, axis=1)[:, :3].mean(axis=1)


def test_point_cloud_opens_as_splats_with_a_note(tmp_path):
    rng = np.random.default_rng(15)
    pts = np.zeros(40, [("x", "f8"), ("y", "f8"), ("z", "f8"), ("red", "f8"), ("green", "f8"), ("blue", "f8")])
    for c in ("x", "y", "z"):
        pts[c] = rng.normal(size=40).astype(np.float32)
    for c in ("red", "green", "blue"):
        pts[c] = rng.integers(0, 256, 40)
    path = _write(tmp_path / "cloud.ply", pts, [("float", "x"), ("float", "y"), ("float", "z"),
                                                 ("uchar", "red"), ("uchar", "green"), ("uchar", "blue")])
    with pytest.warns(PlyWarning) as rec:
        g = open_splats(path)
    assert [str(r.message) for r in rec] == g.notes == [
        f"{path}: a point cloud (40 points), not 3D Gaussians: shown as 40 round splats of sigma = the mean "
        "distance to the 3 nearest points, opacity 0.5, the file's colours"]
    xyz = np.stack([pts[c] for c in ("x", "y", "z")], 1)
    np.testing.assert_array_equal(g.means, xyz.astype(np.float32))
    np.testing.assert_allclose(np.exp(g.scales), np.repeat(_nn_sigma(xyz)[:, None], 3, 1), rtol=1e-5)
    rgb = np.stack([pts[c] for c in ("red", "green", "blue")], 1) / 255.0
    np.testing.assert_allclose(g.sh0 * C0 + 0.5, rgb, atol=1e-6)
    np.testing.assert_allclose(1 / (1 + np.exp(-g.opacities)), 0.5, atol=1e-6)
    assert g.sh_degree == 0 and (g.quats == [1, 0, 0, 0]).all()


def test_mesh_opens_as_its_vertices_and_gaussians_stay_gaussians(tmp_path):
    mesh = tmp_path / "mesh.ply"
    mesh.write_bytes(b"ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\n"
                     b"property float z\nelement face 2\nproperty list uchar int vertex_indices\nend_header\n"
                     b"0 0 0\n1 0 0\n0 1 0\n0 0 0\n3 0 1 2\n3 1 2 3\n")
    with pytest.warns(PlyWarning):
        g = open_splats(mesh)
    assert g.notes == [f"{mesh}: a mesh (4 vertices; its 2 faces are ignored), not 3D Gaussians: shown as 4 round "
                       "splats of sigma = the mean distance to the 3 nearest points, opacity 0.5, grey (the file has "
                       "no colours)"]
    assert np.isfinite(g.scales).all()                  # duplicate vertices: floored, not log(0)
    np.testing.assert_allclose(g.sh0, 0.0, atol=1e-7)
    # a 3DGS file goes through read_ply unchanged
    rows, names = _scene(np.random.default_rng(16), 5)
    path = _write(tmp_path / "g.ply", rows, [("float", n) for n in names])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = open_splats(path)
    assert len(g) == 5 and g.notes == []
    # anything else is still refused with the file named
    bad = tmp_path / "faces_only.ply"
    bad.write_bytes(b"ply\nformat ascii 1.0\nelement face 0\nend_header\n")
    with pytest.raises(PlyError, match=f"{bad}: has no 'vertex' element"):
        open_splats(bad)
