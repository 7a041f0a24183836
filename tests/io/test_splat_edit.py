"""Splat editing before export (spirula/engine/io/splat_edit.py): the crop box and screen-space
selections against independent references, undo / redo of a crop and of a deletion, the
edit file's round trip and its refusal of a changed PLY, and the edit applied by
`spirula export` (every format, --crop, --edit, --no-edit) and to the mesh stage's input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from spirula.engine.cli.main import main
from spirula.engine.io import formats
from spirula.engine.io.ply import read_ply, write_ply
from spirula.engine.io.splat_edit import (CropBox, EditFileError, SplatEdit, apply_saved_edit, edit_file_for, file_sha256,
                                  load_edit, select_screen)
from tests.io.splat_cases import random_gaussians


def _rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def test_oriented_crop_box_against_points_made_in_its_frame():
    rng = np.random.default_rng(11)
    rot, center, half = _rotation(rng), rng.normal(size=3), np.array([0.5, 1.0, 2.0])
    local = rng.uniform(-3, 3, size=(4000, 3))            # points in the box's own frame
    world = local @ rot.T + center                        # columns of rot: the box axes
    expected = np.all(np.abs(local) <= half, axis=1)
    box = CropBox(tuple(center), tuple(half), tuple(map(tuple, rot)))
    assert np.array_equal(box.contains(world), expected)
    assert 0 < expected.sum() < len(expected)
    lo, hi = box.bounds()
    assert np.all(box.corners() >= lo - 1e-9) and np.all(box.corners() <= hi + 1e-9)
    aabb = CropBox.from_bounds((1, 2, 3), (-1, 0, 0))
    pts = rng.uniform(-2, 4, size=(1000, 3))
    ref = np.all((pts >= (-1, 0, 0)) & (pts <= (1, 2, 3)), axis=1)
    assert np.array_equal(aabb.contains(pts), ref)


def _camera(rng):
    """A w2c looking at the origin from a random direction, and its K matrix (reference)."""
    eye = rng.normal(size=3)
    eye = 4 * eye / np.linalg.norm(eye)
    fwd = -eye / np.linalg.norm(eye)
    right = np.cross(fwd, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    down = np.cross(fwd, right)
    r = np.stack([right, down, fwd])
    w2c = np.eye(4)
    w2c[:3, :3], w2c[:3, 3] = r, -r @ eye
    return w2c


def test_box_and_brush_selections_against_a_homogeneous_projection():
    rng = np.random.default_rng(5)
    means = rng.normal(size=(3000, 3)) * 1.5
    w2c = _camera(rng)
    w, h, fov = 320, 200, 55.0
    f = 0.5 * h / math.tan(math.radians(fov) / 2)
    k = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]])
    cam = (np.c_[means, np.ones(len(means))] @ w2c.T)[:, :3]
    uvw = cam @ k.T
    uv = uvw[:, :2] / uvw[:, 2:3]
    front = cam[:, 2] > 0
    rect = (200, 150, 60, 40)  # corners in either order
    ref = front & (uv[:, 0] >= 60) & (uv[:, 0] <= 200) & (uv[:, 1] >= 40) & (uv[:, 1] <= 150)
    got = select_screen(means, w2c, fov, w, h, rect=rect)
    assert np.array_equal(got, ref) and ref.sum() > 50
    # a brush stroke: the distance to its polyline, from densely sampled points of it
    stroke = np.array([[40.0, 50.0], [120.0, 90.0], [200.0, 60.0]])
    samples = np.concatenate([a + np.linspace(0, 1, 4001)[:, None] * (b - a) for a, b in zip(stroke[:-1], stroke[1:])])
    dist = np.min(np.linalg.norm(uv[:, None, :] - samples[None], axis=2), axis=1)
    got = select_screen(means, w2c, fov, w, h, brush=stroke, radius=12.0)
    clear = np.abs(dist - 12.0) > 0.05                       # the sampling's tolerance band
    assert np.array_equal(got[clear], (front & (dist <= 12.0))[clear]) and got.sum() > 20


def test_undo_redo_of_a_crop_and_of_a_deletion_and_invert():
    rng = np.random.default_rng(2)
    means = rng.uniform(-1, 1, size=(500, 3)).astype(np.float32)
    e = SplatEdit(means)
    left = means[:, 0] < 0
    assert e.select(left) == "select" and e.selected.sum() == left.sum()
    assert e.invert() == "invert selection" and np.array_equal(e.selected, ~left)
    assert e.delete_selected().startswith("delete")
    assert np.array_equal(e.keep(), left) and not e.selected.any()
    box = CropBox.from_bounds((-1, -1, -1), (1, 0, 1))
    e.select(np.ones(500, bool))                              # selects the kept only
    assert np.array_equal(e.selected, left)
    assert e.set_crop(box) == "crop"
    in_box = means[:, 1] <= 0
    assert np.array_equal(e.keep(), left & in_box)
    assert np.array_equal(e.selected, left & in_box)          # the crop left the others out of the selection
    assert e.undo() == "crop" and np.array_equal(e.keep(), left) and np.array_equal(e.selected, left)
    assert e.undo() == "select" and not e.selected.any()
    assert e.undo().startswith("delete") and np.array_equal(e.keep(), np.ones(500, bool))
    assert np.array_equal(e.selected, ~left)                  # the deleted were selected before
    assert e.redo().startswith("delete") and np.array_equal(e.keep(), left)
    assert e.redo() == "select" and e.redo() == "crop" and e.redo() is None
    assert np.array_equal(e.keep(), left & in_box)
    e.undo()
    e.select_none()                                           # a new command drops the redo list
    assert not e.can_redo() and e.crop is None


def _project(tmp_path, n=700, seed=4):
    p = tmp_path / "proj"
    p.mkdir()
    write_ply(p / "splat.ply", random_gaussians(np.random.default_rng(seed), n, 3))
    (p / "train.json").write_text("{}")
    return p


def test_edit_file_round_trip_and_refusal_of_a_changed_ply(tmp_path):
    p = _project(tmp_path)
    ply = p / "splat.ply"
    g = read_ply(ply, warn=False)
    e = SplatEdit(g.means, sha256=file_sha256(ply), name="splat.ply")
    rng = np.random.default_rng(8)
    e.select(rng.random(len(g)) < 0.3)
    e.delete_selected()
    rot = _rotation(rng)
    e.set_crop(CropBox((0.1, 0.0, -0.1), (0.8, 0.9, 1.0), tuple(map(tuple, rot))))
    e.save(edit_file_for(ply))
    assert edit_file_for(ply) == p / "edit.json"
    saved = json.loads((p / "edit.json").read_text())
    assert 0 < len(saved["deleted"]) < e.deleted.sum()  # runs of deleted indices, not one entry per splat
    back = load_edit(p / "edit.json", g.means, file_sha256(ply))
    assert np.array_equal(back.keep(), e.keep()) and np.array_equal(back.deleted, e.deleted)
    assert np.allclose(np.asarray(back.crop.rotation), rot)
    edited, line = apply_saved_edit(ply, g)
    assert len(edited) == e.keep().sum() and np.array_equal(edited.means, g.means[e.keep()])
    assert "edit.json" in line and "kept" in line
    # the PLY changes (retrained): refused in one line naming the edit file
    write_ply(ply, random_gaussians(np.random.default_rng(9), 700, 3))
    with pytest.raises(EditFileError) as err:
        apply_saved_edit(ply, read_ply(ply, warn=False))
    text = str(err.value)
    assert "\n" not in text and str(p / "edit.json") in text and "changed" in text
    # malformed files: one line each
    for bad in ("{", json.dumps({"version": 1, "ply": {"sha256": file_sha256(ply), "count": 700},
                                 "deleted": [[5, 3]]}),
                json.dumps({"version": 1, "ply": {"sha256": file_sha256(ply), "count": 700},
                            "crop": {"center": [0, 0], "half": [1, 1, 1]}})):
        (p / "edit.json").write_text(bad)
        with pytest.raises(EditFileError, match="edit.json"):
            apply_saved_edit(ply, read_ply(ply, warn=False))


@pytest.mark.parametrize("fmt", ["ply", "compressed-ply", "spz", "sog", "splat"])
def test_spirula_export_applies_the_projects_edit_and_crop(tmp_path, fmt, capsys):
    p = _project(tmp_path)
    g = read_ply(p / "splat.ply", warn=False)
    e = SplatEdit(g.means, sha256=file_sha256(p / "splat.ply"))
    e.select(g.means[:, 2] > 0.5)
    e.delete_selected()
    e.save(p / "edit.json")
    out = tmp_path / f"out{formats.EXTENSIONS[fmt]}"
    box = [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
    assert main(["export", str(p), "-o", str(out), "--crop", *map(str, box)]) == 0
    err = capsys.readouterr().err
    assert f"note: applied the edit {p / 'edit.json'}" in err and "cropped to the box" in err
    keep = (g.means[:, 2] <= 0.5) & np.all(np.abs(g.means) <= 1.0, axis=1)
    got = formats.read_any(out, warn=False)
    assert len(got) == keep.sum() and 0 < keep.sum() < len(g)
    tol = 1e-6 if fmt == "ply" else 0.05  # the compressed formats quantise positions
    assert np.allclose(np.sort(got.means[:, 0]), np.sort(g.means[keep, 0]), atol=tol)
    # --no-edit: all of them; --edit naming a file: that one
    assert main(["export", str(p), "-o", str(out), "--no-edit"]) == 0
    assert len(formats.read_any(out, warn=False)) == len(g) and "applied" not in capsys.readouterr().err


def test_spirula_export_refuses_an_edit_of_another_ply(tmp_path, capsys):
    p = _project(tmp_path)
    g = read_ply(p / "splat.ply", warn=False)
    SplatEdit(g.means, sha256="0" * 64).save(p / "edit.json")
    out = tmp_path / "x.ply"
    assert main(["export", str(p), "-o", str(out)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "edit.json" in err[0] and "changed" in err[0]
    assert not out.exists()


def test_spirula_export_refuses_a_crop_that_keeps_none_in_one_line(tmp_path, capsys):
    """A box away from every splat: one error line saying the crop kept none (on 85b3bc0 a
    note and then 'holds no Gaussians to export', as if the file were empty)."""
    p = _project(tmp_path)
    out = tmp_path / "x.spz"
    assert main(["export", str(p), "-o", str(out), "--no-edit", "--crop", "50", "50", "50", "51", "51", "51"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    n = len(read_ply(p / "splat.ply", warn=False))
    assert len(err) == 1 and "nothing to export" in err[0] and f"0 of {n:,} kept" in err[0], err
    assert not out.exists()


def test_mesh_stage_input_is_the_edited_splats(tmp_path, monkeypatch):
    from spirula.engine import ingest
    from spirula.engine.mesh.mesh_config import MeshConfig
    from spirula.engine.jobs import mesh

    p = _project(tmp_path)
    (p / "train.json").write_text(json.dumps({"dataset": str(tmp_path / "data")}))
    monkeypatch.setattr(ingest, "load_dataset", lambda path, max_size, **kw: "dataset")
    g = read_ply(p / "splat.ply", warn=False)
    e = SplatEdit(g.means, sha256=file_sha256(p / "splat.ply"))
    e.set_crop(CropBox.from_bounds((-0.5, -2, -2), (0.5, 2, 2)))
    e.save(p / "edit.json")
    _, splats, _ = mesh.load_project(p, MeshConfig())
    keep = (np.abs(g.means[:, 0]) <= 0.5) & np.all(np.abs(g.means[:, 1:]) <= 2, axis=1)
    assert len(splats) == keep.sum() < len(g) and np.array_equal(splats.means, g.means[keep])


def test_the_readmes_edit_file_example_is_a_valid_edit(tmp_path):
    """The edit-file format written out in the README loads (its sha256 and count set to the
    file's) and keeps exactly the splats it says: not in a deleted range, centre in the box."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"The edit file is small JSON.*?```json\n(.*?)```", readme, re.S)
    assert block, "the README's edit-file example is gone"
    d = json.loads(block.group(1))
    n = 1000
    means = np.random.default_rng(48).uniform(-1.5, 1.5, (n, 3))
    d["ply"].update(sha256="ab" * 32, count=n)
    (tmp_path / "edit.json").write_text(json.dumps(d))
    edit = load_edit(tmp_path / "edit.json", means, "ab" * 32)
    inside = np.all(np.abs(means - d["crop"]["center"]) <= d["crop"]["half"], axis=1)
    idx = np.arange(n)
    deleted = np.zeros(n, bool)
    for start, stop in d["deleted"]:
        deleted |= (idx >= start) & (idx < stop)
    np.testing.assert_array_equal(edit.keep(), inside & ~deleted)
