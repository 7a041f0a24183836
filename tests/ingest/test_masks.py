"""Masks beside the images (COLMAP's and nerfstudio's names) or in the alpha channel, the
modes, and the one rule for a mask that cannot be used (spirula/engine/ingest/masks.py)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from spirula.engine.ingest import load_dataset
from spirula.engine.ingest.masks import MaskReader
from tests.ingest.synth import random_pose, write_colmap_text

W, H = 40, 30


def _dataset(tmp_path, rng, names=("a.png", "b.png", "c.png", "d.png"), model="PINHOLE", params=None, rgba=False):
    """A COLMAP text model of ``names`` (one camera); returns {name: [H, W, 3 or 4] pixels}."""
    pixels = {}
    for name in names:
        p = rng.integers(0, 256, (H, W, 4 if rgba else 3), dtype=np.uint8)
        if rgba:
            p[..., 3] = np.where(rng.random((H, W)) < 0.3, 0, 255)
        (tmp_path / "images").mkdir(exist_ok=True)
        Image.fromarray(p).save(tmp_path / "images" / name)
        pixels[name] = p
    params = params or [30.0, 30.0, W / 2, H / 2]
    write_colmap_text(tmp_path / "sparse" / "0", [(1, model, W, H, params)],
                      [(i + 1, random_pose(rng), 1, n, 0) for i, n in enumerate(names)],
                      rng.normal(size=(5, 3)), rng.integers(0, 256, (5, 3)))
    return pixels


def _write_mask(path, mask):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(mask).save(path)


def test_masks_folder_names_modes_and_the_rule_for_unusable_masks(tmp_path):
    rng = np.random.default_rng(1)
    _dataset(tmp_path, rng)
    grey = rng.integers(0, 256, (H, W), dtype=np.uint8)
    _write_mask(tmp_path / "masks" / "a.png.png", grey)        # COLMAP: <name>.png
    _write_mask(tmp_path / "masks" / "b.png", 255 - grey)      # nerfstudio: same name as png
    _write_mask(tmp_path / "masks" / "d.png", np.zeros((15, 20), np.uint8))  # another size
    # c.png: no mask
    ds = load_dataset(tmp_path, max_size=0)
    assert ds.masks == "ignore" and ds.masks_source == "folder"  # auto with a masks folder
    by = {c.name: c for c in ds.cameras}
    np.testing.assert_array_equal(by["a.png"].mask, np.where(grey >= 128, 255, 0))
    np.testing.assert_array_equal(by["b.png"].mask, np.where(255 - grey >= 128, 255, 0))
    assert by["c.png"].mask is None and by["d.png"].mask is None  # used unmasked
    missing = [w for w in ds.warnings if "no mask" in w]
    assert len(missing) == 1 and "c.png" in missing[0] and "every pixel kept" in missing[0]
    size = [w for w in ds.warnings if "differ" in w and "size" in w]
    assert len(size) == 1 and "d.png" in size[0] and "20x15" in size[0] and f"{W}x{H}" in size[0]
    assert "2 of 4 images masked" in ds.masks_note and "ignore" in ds.masks_note
    # the modes: cutout reads the same masks; off reads none
    assert load_dataset(tmp_path, max_size=0, masks="cutout").masks == "cutout"
    off = load_dataset(tmp_path, max_size=0, masks="off")
    assert off.masks == "off" and all(c.mask is None for c in off.cameras)
    assert not any("mask" in w for w in off.warnings)
    assert off.masks_note == f"masks in {tmp_path / 'masks'} not used (--masks off)"  # said once, not silent
    with pytest.raises(ValueError, match="masks must be one of"):
        MaskReader("transparent", [])


def test_mask_follows_its_image_through_undistortion_and_downscale(tmp_path):
    """The mask is a function of the image's pixels (red >= 128): after undistortion, crop
    and downscale it still marks (nearly) the same pixels of the image as loaded."""
    rng = np.random.default_rng(2)
    red = np.zeros((H, W), np.uint8)
    red[:, : W // 2] = 255  # a sharp vertical edge, away from the borders
    red[H // 3:, :] = 255 - red[H // 3:, :]
    (tmp_path / "images").mkdir()
    rgb = np.stack([red, rng.integers(0, 256, (H, W), dtype=np.uint8), np.full((H, W), 9, np.uint8)], -1)
    Image.fromarray(rgb).save(tmp_path / "images" / "e.png")
    write_colmap_text(tmp_path / "sparse" / "0", [(1, "OPENCV", W, H, [30.0, 31.0, W / 2, H / 2, -0.05, 0.01, 0, 0])],
                      [(1, random_pose(rng), 1, "e.png", 0)], rng.normal(size=(5, 3)), rng.integers(0, 256, (5, 3)))
    _write_mask(tmp_path / "masks" / "e.png", red)
    ds = load_dataset(tmp_path, max_size=24)
    c = ds.cameras[0]
    assert c.mask.shape == (c.height, c.width) and c.width == 24
    agree = (c.mask >= 128) == (c.image[..., 0] >= 128)
    assert agree.mean() > 0.97


def test_alpha_channel_is_the_mask_and_auto_makes_it_a_cutout(tmp_path):
    rng = np.random.default_rng(3)
    pixels = _dataset(tmp_path, rng, names=("p.png", "q.png"), rgba=True)
    ds = load_dataset(tmp_path, max_size=0)
    assert ds.masks == "cutout" and ds.masks_source == "alpha"
    for c in ds.cameras:
        np.testing.assert_array_equal(c.mask, pixels[c.name][..., 3])
    assert load_dataset(tmp_path, max_size=0, masks="ignore").masks == "ignore"


def test_masks_asked_for_but_none_found_is_said(tmp_path):
    rng = np.random.default_rng(4)
    _dataset(tmp_path, rng, names=("a.png", "b.png"))
    auto = load_dataset(tmp_path, max_size=0)
    assert auto.masks == "off" and auto.masks_note is None and not any("mask" in w for w in auto.warnings)
    ds = load_dataset(tmp_path, max_size=0, masks="ignore")
    assert ds.masks == "off"
    assert any("--masks ignore" in w and "no masks folder" in w for w in ds.warnings)
