"""Input class: two files on disk that could be the image a dataset names (a.png and
a.jpg for 'a', case variants, both Unicode spellings, the same name in two folders the
reader searches). The file named exactly always wins; otherwise the first file by the
lookup rules of spirula/engine/ingest/paths.py is used and a warning names it, the files passed
over and the rule -- never silently. The pixels loaded are checked to be the file named."""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest

from spirula.engine.ingest import load_dataset

from ..ingest.synth import random_pose
from .fixtures import colmap_text, save_png, write_files

W, H = 24, 16
POSE = np.linalg.inv(random_pose(np.random.default_rng(0))).tolist()


def _img(path, level: int) -> None:
    save_png(path, np.full((H, W, 3), level, np.uint8))


def _transforms(root, names):
    (root / "transforms.json").write_text(json.dumps(
        {"fl_x": 20.0, "frames": [{"file_path": n, "transform_matrix": POSE} for n in names]}))


def _level(ds, name):
    return int(next(c for c in ds.cameras if c.name == name).image[0, 0, 0])


def _case_sensitive(tmp_path) -> bool:
    (tmp_path / "Probe").write_text("")
    return not (tmp_path / "probe").exists()


def test_name_without_extension_matching_two_files(tmp_path):
    _img(tmp_path / "images/a.png", 50)
    _img(tmp_path / "images/a.jpg", 200)
    _transforms(tmp_path, ["images/a"])
    ds = load_dataset(tmp_path, max_size=None)
    assert _level(ds, "a.png") == 50
    note = next(w for w in ds.warnings if "more than one file" in w)
    assert "images/a -> images/a.png (also images/a.jpg; by extension added)" in note


def test_exact_name_wins_without_a_word(tmp_path):
    _img(tmp_path / "images/a.png", 50)
    _img(tmp_path / "images/a.jpg", 200)
    _img(tmp_path / "images/a.png.jpg", 120)
    _transforms(tmp_path, ["images/a.png", "images/a.jpg"])
    ds = load_dataset(tmp_path, max_size=None)
    assert (_level(ds, "a.png"), abs(_level(ds, "a.jpg") - 200) <= 2) == (50, True)
    assert ds.warnings == []


def test_case_variants(tmp_path):
    if not _case_sensitive(tmp_path):
        pytest.skip("case-insensitive file system: a.png and A.PNG are one file")
    _img(tmp_path / "images/A.PNG", 30)
    _img(tmp_path / "images/a.Png", 90)
    _transforms(tmp_path, ["images/a.png"])
    ds = load_dataset(tmp_path, max_size=None)
    assert len(ds.cameras) == 1 and ds.cameras[0].image[0, 0, 0] == 30  # sorted: 'A.PNG' < 'a.Png'
    text = " | ".join(ds.warnings)
    assert "images/a.png -> images/A.PNG (also images/a.Png; by letter case)" in text
    assert "found by another letter case" in text


def test_two_unicode_spellings_of_one_name(tmp_path):
    nfc, nfd = (unicodedata.normalize(f, "\u00e9t\u00e9.png") for f in ("NFC", "NFD"))
    _img(tmp_path / "images" / nfc, 40)
    if (tmp_path / "images" / nfd).exists():
        pytest.skip("this file system folds Unicode normal forms: one file")
    _img(tmp_path / "images" / nfd, 160)
    _transforms(tmp_path, [f"images/{nfc}"])
    ds = load_dataset(tmp_path, max_size=None)
    assert ds.cameras[0].image[0, 0, 0] == 40
    assert any(f"images/{nfc} -> images/{nfc} (also images/{nfd}; by as written)" in w for w in ds.warnings)


def test_same_name_in_two_folders_the_reader_searches(tmp_path):
    _img(tmp_path / "images/0001.png", 70)
    _img(tmp_path / "0001.png", 140)
    _transforms(tmp_path, ["/home/else/capture/images/0001.png"])
    ds = load_dataset(tmp_path, max_size=None)
    assert ds.cameras[0].image[0, 0, 0] == 70  # the longer trailing path
    assert any("-> images/0001.png (also 0001.png; by trailing components)" in w for w in ds.warnings)


def test_colmap_names_found_by_a_rule_are_said(tmp_path):
    rng = np.random.default_rng(1)
    cams = [(1, "PINHOLE", W, H, [20.0, 20.0, 12.0, 8.0])]
    ims = [(1, random_pose(rng), 1, "a", 0), (2, random_pose(rng), 1, "b.png", 0), (3, random_pose(rng), 1, "c.png", 0)]
    write_files(tmp_path / "sparse/0", colmap_text(cams, ims, rng.normal(size=(3, 3)), np.full((3, 3), 9)))
    _img(tmp_path / "images/a.jpg", 220)
    _img(tmp_path / "images/a.png", 60)
    _img(tmp_path / "images/b.png", 10)
    _img(tmp_path / "images/b.jpg", 250)  # not registered: b.png is named exactly
    _img(tmp_path / "images/c.tif", 100)
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["a", "b.png"]  # c.png is not c.tif: missing
    assert _level(ds, "a") == 60 and _level(ds, "b.png") == 10
    text = " | ".join(ds.warnings)
    assert "a -> a.png (also a.jpg; by extension added)" in text
    assert "not in " in text and "a -> a.png (extension added)" in text
    assert "are missing from" in text and "skipped: c.png" in text
    assert "not registered in the model" in text and "skipped: a.jpg, b.jpg, c.tif" in text
