"""Input class: one bad entry in a COLMAP model (or a transforms.json frame). A camera
whose line holds a NaN as other tools write it, an empty field or too few parameters
costs only the images that use it, with a warning naming the file, the line and the
camera id; an image or point entry with a bad number costs only itself; every number
error names file, line and id. Only when nothing is left is the dataset refused."""

from __future__ import annotations

import json
import re
import struct

import numpy as np
import pytest

from spirula.engine.errors import DatasetError
from spirula.engine.ingest import load_dataset

from ..ingest.synth import random_pose
from .fixtures import colmap_binary, colmap_text, save_png, write_files

W, H = 48, 36
NAN_SPELLINGS = ["nan", "NaN", "-nan", "-nan(ind)", "1.#QNAN", "-1.#IND", "1.#QNAN0", "nan(0x7ff8)", "1.#INF", "inf"]


def _model(root, binary=False, seed=0):
    """3 PINHOLE cameras (ids 1, 2, 7), 2 images each, random images on disk."""
    rng = np.random.default_rng(seed)
    cams = [(cid, "PINHOLE", W, H, list(rng.uniform([40, 40, 20, 15], [60, 60, 28, 21]))) for cid in (1, 2, 7)]
    ims = [(i + 1, random_pose(rng), (1, 2, 7)[i // 2], f"im{i}.png", 0) for i in range(6)]
    pts = rng.normal(size=(8, 3))
    files = (colmap_binary if binary else colmap_text)(cams, ims, pts, rng.integers(0, 256, (8, 3)))
    write_files(root / "sparse/0", files)
    for _, _, _, name, _ in ims:
        save_png(root / "images" / name, rng.integers(0, 256, (H, W, 3), dtype=np.uint8))
    return cams, ims


def _line_of(path, startswith: str) -> int:
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith(startswith):
            return k
    raise AssertionError(startswith)


def _edit_camera(path, cid: int, edit) -> int:
    lines = path.read_text(encoding="utf-8").split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.split(" ")[0] == str(cid) and not ln.startswith("#"))
    lines[k] = edit(lines[k].split(" "))
    path.write_text("\n".join(lines), encoding="utf-8")
    return k + 1


@pytest.mark.parametrize("spelling", NAN_SPELLINGS + ["", "abc", "too-few"])
def test_one_bad_camera_line_skips_only_its_images(tmp_path, spelling):
    _model(tmp_path)
    cams_txt = tmp_path / "sparse/0/cameras.txt"
    if spelling == "too-few":
        line = _edit_camera(cams_txt, 2, lambda tok: " ".join(tok[:-1]))
    else:  # "" leaves an empty field, which a space-separated reader sees as a missing one
        line = _edit_camera(cams_txt, 2, lambda tok: " ".join(tok[:5] + [spelling] + tok[6:]))
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["im0.png", "im1.png", "im4.png", "im5.png"]
    notes = [w for w in ds.warnings if "camera 2" in w]
    assert len(notes) == 1, ds.warnings
    assert notes[0].startswith(f"{cams_txt}:{line}: camera 2: ")
    assert "im2.png, im3.png" in notes[0] and "skipped" in notes[0]
    if spelling in ("", "too-few"):
        assert "needs 4 params, got 3" in notes[0]
    else:
        assert repr(spelling) in notes[0]


def test_bad_binary_camera_skips_only_its_images(tmp_path):
    cams, ims = _model(tmp_path, binary=True)
    path = tmp_path / "sparse/0/cameras.bin"
    data = bytearray(path.read_bytes())
    # the second entry (camera 2): u64 count, then (i32, i32, u64, u64, 4 x f64) per PINHOLE camera
    entry = 8 + (4 + 4 + 8 + 8 + 32)
    struct.pack_into("<d", data, entry + 24 + 8, float("nan"))  # its fy
    path.write_bytes(bytes(data))
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["im0.png", "im1.png", "im4.png", "im5.png"]
    note = next(w for w in ds.warnings if "camera 2" in w)
    assert note.startswith(f"{path}: camera 2 (entry 2, byte {entry}): invalid PINHOLE camera")
    assert "im2.png, im3.png" in note


def test_image_entries_with_bad_numbers_cost_only_themselves(tmp_path):
    _model(tmp_path)
    ims_txt = tmp_path / "sparse/0/images.txt"
    text = ims_txt.read_text(encoding="utf-8").split("\n")
    k3 = next(i for i, ln in enumerate(text) if ln.startswith("3 "))
    tok = text[k3].split(" ")
    tok[1] = "1.#QNAN"
    text[k3] = " ".join(tok)
    k5 = next(i for i, ln in enumerate(text) if ln.startswith("5 "))
    tok = text[k5].split(" ")
    tok[6] = "x1"
    text[k5] = " ".join(tok)
    ims_txt.write_text("\n".join(text), encoding="utf-8")
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["im0.png", "im1.png", "im3.png", "im5.png"]
    note = next(w for w in ds.warnings if "images.txt" in w)
    assert f"{ims_txt}:{k3 + 1}: image 3 im2.png: quaternion (nan, " in note
    assert f"{ims_txt}:{k5 + 1}: image 5 im4.png: TY 'x1' is not a number" in note


def test_binary_image_with_nan_pose_is_named(tmp_path):
    _model(tmp_path, binary=True)
    path = tmp_path / "sparse/0/images.bin"
    data = bytearray(path.read_bytes())
    struct.pack_into("<d", data, 8 + 4 + 8 * 5, float("inf"))  # first image's ty
    path.write_bytes(bytes(data))
    ds = load_dataset(tmp_path, max_size=None)
    assert "im0.png" not in [c.name for c in ds.cameras] and len(ds.cameras) == 5
    note = next(w for w in ds.warnings if "images.bin" in w)
    assert f"{path}: image 1 im0.png (entry 1, byte 8): translation (" in note and "inf" in note


def test_image_of_a_missing_camera_id_is_skipped(tmp_path):
    _model(tmp_path)
    cams_txt = tmp_path / "sparse/0/cameras.txt"
    cams_txt.write_text("\n".join(ln for ln in cams_txt.read_text().split("\n") if not ln.startswith("7 ")))
    ds = load_dataset(tmp_path, max_size=None)
    assert len(ds.cameras) == 4
    assert any(w.startswith(f"{cams_txt}: camera 7 is not in the file") and "im4.png, im5.png" in w
               for w in ds.warnings), ds.warnings


def test_points_with_nan_spellings_are_counted(tmp_path):
    _model(tmp_path)
    pts = tmp_path / "sparse/0/points3D.txt"
    lines = pts.read_text().split("\n")
    data = [i for i, ln in enumerate(lines) if ln and not ln.startswith("#")]
    for i, spelling in zip(data[:3], ("-nan(ind)", "1.#INF", "NaN")):
        tok = lines[i].split(" ")
        tok[2] = spelling
        lines[i] = " ".join(tok)
    bad = data[4]
    pts.write_text("\n".join(lines))
    ds = load_dataset(tmp_path, max_size=None)
    assert len(ds.points) == 5
    assert any(w == f"{pts}: 3 points with NaN/Inf coordinates (or beyond float32) left out" for w in ds.warnings)
    tok = lines[bad].split(" ")
    tok[3] = "1,5"
    lines[bad] = " ".join(tok)
    pts.write_text("\n".join(lines))
    with pytest.raises(DatasetError, match=re.escape(f"{pts}:{bad + 1}: point {tok[0]}: a coordinate is not a number")):
        load_dataset(tmp_path, max_size=None)


def test_nothing_left_is_refused_with_each_reason(tmp_path):
    _model(tmp_path)
    cams_txt = tmp_path / "sparse/0/cameras.txt"
    lines = {cid: _edit_camera(cams_txt, cid, lambda tok: " ".join(tok[:4] + ["-nan(ind)"] + tok[5:]))
             for cid in (1, 2, 7)}
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path, max_size=None)
    msg = str(e.value)
    for cid, line in lines.items():
        assert f"{cams_txt}:{line}: camera {cid}: param 1 is '-nan(ind)' (not finite)" in msg
    assert "no image of" in msg and "\n" not in msg


def test_transforms_frame_with_nan_is_skipped(tmp_path):
    rng = np.random.default_rng(3)
    frames = []
    for i in range(3):
        save_png(tmp_path / f"f{i}.png", rng.integers(0, 256, (H, W, 3), dtype=np.uint8))
        c2w = np.linalg.inv(random_pose(rng))
        frames.append({"file_path": f"f{i}.png", "transform_matrix": c2w.tolist()})
    frames[1]["transform_matrix"][0][3] = float("nan")
    frames[2]["fl_x"] = "1.#QNAN"
    (tmp_path / "transforms.json").write_text(json.dumps({"fl_x": 40.0, "frames": frames}))
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["f0.png"]
    note = next(w for w in ds.warnings if "cannot be used" in w)
    assert f"{tmp_path / 'transforms.json'} frame 1 (f1.png): transform must be a finite" in note
    assert "(f2.png): fl_x is not a number ('1.#QNAN')" in note


def test_camera_that_cannot_be_undistorted_costs_only_its_images(tmp_path):
    """Camera 2 as RADIAL with k1 = -0.9 at f = 30 px: r (1 + k1 r^2) turns back at
    r = 1 / sqrt(2.7) = 0.61, inside the image (its corners are at r = 1.0)."""
    _model(tmp_path)
    cams_txt = tmp_path / "sparse/0/cameras.txt"
    _edit_camera(cams_txt, 2, lambda tok: f"2 RADIAL {W} {H} 30.0 24.0 18.0 -0.9 0.0")
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["im0.png", "im1.png", "im4.png", "im5.png"]
    note = next(w for w in ds.warnings if "RADIAL" in w)
    assert "distortion cannot be inverted" in note and note.endswith("skipped: im2.png, im3.png")
