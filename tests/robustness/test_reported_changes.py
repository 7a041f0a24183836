"""Input class: values changed on the way in, each said in one line. Undistortion gives
a new K (a message per camera, and train.json); 16-bit images are used at 8 bits (a
notice); photos turned upright by their EXIF orientation are counted; a dataset whose
names all mismatch its files shows a few expected and found names in the error itself
(no -v needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from spirula.engine.cli.main import main
from spirula.engine.ingest import load_dataset
from spirula.engine.ingest.photos import PhotosConfig, import_notes, import_photos

from ..ingest.synth import random_pose
from .fixtures import colmap_text, ring_dataset, save_png, save_png16, write_files

OPENCV = [40.0, 41.0, 24.3, 17.6, -0.12, 0.03, 0.001, -0.002]  # 48 x 36 px


def test_undistortion_reports_the_new_k(tmp_path):
    ring_dataset(tmp_path / "d", 4, points=30, camera=("OPENCV", OPENCV))
    ds = load_dataset(tmp_path / "d", max_size=None)
    assert len(ds.undistortion) == 1
    u = ds.undistortion[0]
    k = u["pinhole"]
    assert u["images"] == 4 and u["camera"].startswith("OPENCV 48x36 fx=40 fy=41")
    # the images trained on are exactly the reported camera (max_size None: no downscale)
    for c in ds.cameras:
        assert (c.width, c.height, c.fx, c.fy, c.cx, c.cy) == (k["width"], k["height"], k["fx"], k["fy"], k["cx"], k["cy"])
    assert (k["width"], k["height"]) != (48, 36) or (k["cx"], k["cy"]) != (24.3, 17.6)  # the crop changed K
    ring_dataset(tmp_path / "p", 3, points=5)
    assert load_dataset(tmp_path / "p", max_size=None).undistortion == []


def test_train_prints_and_saves_the_new_k(tmp_path, capsys):
    ring_dataset(tmp_path / "d", 4, points=30, camera=("OPENCV", OPENCV))
    out = tmp_path / "out"
    rc = main(["train", str(tmp_path / "d"), "-o", str(out), "--steps", "2", "--max-size", "48",
               "--checkpoint-every", "0", "--sh-degree", "0", "--eval-every", "0"])
    text = "".join(capsys.readouterr())
    assert rc == 0
    train = json.loads((out / "train.json").read_text())
    k = train["undistortion"][0]["pinhole"]
    assert f"to PINHOLE {k['width']}x{k['height']} fx={k['fx']:.6g}" in text and "note: undistorted 4 images" in text


def test_sixteen_bit_images_are_rounded_to_8_bits_with_a_notice(tmp_path):
    rng = np.random.default_rng(4)
    ring_dataset(tmp_path, 3, points=10)
    deep = rng.integers(0, 65536, (36, 48, 3)).astype(np.uint16)
    save_png16(tmp_path / "images/view_001.png", deep)
    grey = rng.integers(0, 65536, (36, 48)).astype(np.uint16)
    save_png16(tmp_path / "images/view_002.png", grey)
    ds = load_dataset(tmp_path, max_size=None)
    note = next(w for w in ds.warnings if "bits per channel" in w)
    assert note.startswith("2 images have 16 bits per channel; used at 8 bits per channel")
    assert "view_001.png, view_002.png" in note and "view_000.png" not in note
    # colour and grey: value / 65535 x 255, rounded (spirula/engine/ingest/images.py), not Pillow's high byte
    np.testing.assert_array_equal(ds.cameras[1].image, np.rint(deep / 65535.0 * 255.0).astype(np.uint8))
    assert np.any(ds.cameras[1].image != (deep >> 8))
    np.testing.assert_array_equal(ds.cameras[2].image[:, :, 0], np.rint(grey / 65535.0 * 255.0).astype(np.uint8))


def test_sixteen_bit_tiff_is_noticed(tmp_path):
    tifffile = pytest.importorskip("tifffile")
    ring_dataset(tmp_path, 2, points=10)
    (tmp_path / "images/view_001.png").unlink()
    deep = np.random.default_rng(5).integers(0, 65536, (36, 48, 3)).astype(np.uint16)
    tifffile.imwrite(tmp_path / "images/view_001.tif", deep)
    text = (tmp_path / "sparse/0/images.txt").read_text().replace("view_001.png", "view_001.tif")
    (tmp_path / "sparse/0/images.txt").write_text(text)
    ds = load_dataset(tmp_path, max_size=None)
    assert any(w.startswith("1 images have 16 bits per channel") and "view_001.tif" in w for w in ds.warnings)


def test_photo_import_counts_exif_orientations(tmp_path):
    rng = np.random.default_rng(6)
    src = tmp_path / "photos"
    save_png(src / "a.png", rng.integers(0, 256, (20, 30, 3), dtype=np.uint8), orientation=6)
    exif = Image.Exif()
    exif[0x0112] = 3
    Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(src / "b.jpg", exif=exif.tobytes())
    Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(src / "c.jpg")
    save_png16(src / "d.png", rng.integers(0, 65536, (20, 30, 3)).astype(np.uint16))
    records = import_photos(src, tmp_path / "frames", PhotosConfig())
    notes = import_notes(records)
    assert notes[0] == ("2 of 4 photos carry an EXIF orientation; it was applied (pixels turned upright, "
                        "orientation reset to 1): a.png, b.jpg")
    assert notes[1].startswith("1 photos have more than 8 bits per channel") and "d.png" in notes[1]
    a = next(r for r in records if r["source"] == "a.png")
    assert (a["width"], a["height"]) == (20, 30)  # orientation 6 turns it upright

    from spirula.engine.cli.run_command import _short

    assert "2 turned upright by their EXIF orientation" in _short("import", {
        "photos": 4, "converted": 3, "camera_groups": 2, "exif_oriented": 2, "deep": 1})


def test_every_name_mismatching_shows_expected_and_found(tmp_path, capsys):
    rng = np.random.default_rng(7)
    cams = [(1, "PINHOLE", 24, 16, [20.0, 20.0, 12.0, 8.0])]
    ims = [(i + 1, random_pose(rng), 1, f"frame_{i:05d}.jpg", 0) for i in range(6)]
    write_files(tmp_path / "d/sparse/0", colmap_text(cams, ims, rng.normal(size=(3, 3)), np.full((3, 3), 9)))
    for i in range(6):
        save_png(tmp_path / f"d/images/IMG_{i:04d}.png", rng.integers(0, 256, (16, 24, 3), dtype=np.uint8))
    rc = main(["train", str(tmp_path / "d"), "-o", str(tmp_path / "out")])  # no -v
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 1
    assert "expected frame_00000.jpg, frame_00001.jpg, frame_00002.jpg (of 6)" in err
    assert "found in images: IMG_0000.png, IMG_0001.png, IMG_0002.png (of 6)" in err
