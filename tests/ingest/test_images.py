"""Image decoding (modes, EXIF orientation, corrupt files) and downscaling."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from spirula.engine.errors import DatasetError
from spirula.engine.ingest import load_dataset
from spirula.engine.ingest.images import ImageDecodeError, fit_size, image_size, read_image, resize

from .synth import random_pose, write_colmap_text, write_image


def test_exif_orientation_applied(tmp_path):
    pixels = np.zeros((20, 30, 3), np.uint8)
    pixels[:, :10] = 255  # white left third
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise on display
    Image.fromarray(pixels).save(tmp_path / "r.jpg", exif=exif, quality=95)
    img = read_image(tmp_path / "r.jpg")
    assert img.shape == (30, 20, 3)
    assert img[:10].mean() > 200 and img[-10:].mean() < 50  # left -> top after rotation
    assert image_size(tmp_path / "r.jpg") == (20, 30)
    assert read_image(tmp_path / "r.jpg", apply_exif=False).shape == (20, 30, 3)


@pytest.mark.parametrize("mode", ["L", "P", "RGBA", "LA", "I;16", "CMYK", "1"])
def test_modes_become_rgb8(tmp_path, mode):
    rng = np.random.default_rng(0)
    gray = rng.integers(0, 256, (12, 16), dtype=np.uint8)
    if mode == "I;16":
        im = Image.fromarray(gray.astype(np.uint16) * 257)  # uint16 -> mode I;16
        expect = np.repeat(gray[:, :, None], 3, 2)
    elif mode in ("RGBA", "LA"):
        im = Image.fromarray(np.stack([gray, gray, gray, np.full_like(gray, 255)], 2), "RGBA").convert(mode)
        expect = np.repeat(gray[:, :, None], 3, 2)
    else:
        im = Image.fromarray(np.repeat(gray[:, :, None], 3, 2)).convert(mode)
        expect = np.asarray(im.convert("RGB"))
    path = tmp_path / ("x.tif" if mode == "CMYK" else "x.png")
    im.save(path)
    img = read_image(path)
    assert img.dtype == np.uint8 and img.shape == (12, 16, 3)
    assert np.abs(img.astype(int) - expect).max() <= 1


def test_truncated_and_garbage_images(tmp_path):
    write_image(tmp_path / "ok.png", 64, 64, np.random.default_rng(1))
    data = (tmp_path / "ok.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    (tmp_path / "junk.jpg").write_bytes(b"not an image at all")
    for name in ("cut.png", "junk.jpg"):
        with pytest.raises(ImageDecodeError, match=name):
            read_image(tmp_path / name)
    with pytest.raises(DatasetError, match="not found"):
        read_image(tmp_path / "absent.png")


def test_corrupt_image_is_skipped_with_warning(tmp_path):
    rng = np.random.default_rng(2)
    cams = [(1, "PINHOLE", 32, 24, [30.0, 30.0, 16.0, 12.0])]
    ims = [(i + 1, random_pose(rng), 1, f"{i}.png", 0) for i in range(3)]
    write_colmap_text(tmp_path / "sparse/0", cams, ims, np.zeros((1, 3)), np.zeros((1, 3)))
    for i in range(3):
        write_image(tmp_path / f"images/{i}.png", 32, 24, rng)
    data = (tmp_path / "images/1.png").read_bytes()
    (tmp_path / "images/1.png").write_bytes(data[:100])
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["0.png", "2.png"]
    assert any("1.png" in w and "cannot decode" in w and "skipped" in w for w in ds.warnings)


def test_fit_size():
    assert fit_size(1920, 1080, 1600) == (1600, 900)
    assert fit_size(1080, 1920, 320) == (180, 320)
    assert fit_size(478, 850, 320) == (180, 320)
    assert fit_size(300, 200, 320) == (300, 200)
    assert fit_size(300, 200, None) == (300, 200)
    assert fit_size(300, 200, 0) == (300, 200)


@pytest.mark.parametrize("src, dst", [((640, 480), (160, 120)), ((1920, 1440), (160, 120)), ((1003, 757), (160, 121))])
def test_resize_keeps_geometry(src, dst):
    """A bright square keeps its centre, scaled by new/old size per axis, when
    downscaled (also when Pillow pre-reduces by an integer factor and the size does
    not divide; 0.05 px covers sampling phase and uint8 rounding): the intrinsics scaling fx, cx by W'/W and fy, cy by H'/H is right."""
    (w, h), (w2, h2) = src, dst
    img = np.zeros((h, w, 3), np.uint8)
    x0, y0, side = int(w * 0.55), int(h * 0.3), w // 8
    img[y0 : y0 + side, x0 : x0 + side] = 255
    out = resize(img, w2, h2)
    assert out.shape == (h2, w2, 3)
    g = out[:, :, 0].astype(float)
    rr, cc = np.mgrid[0:h2, 0:w2] + 0.5
    assert (g * cc).sum() / g.sum() == pytest.approx((x0 + side / 2) * w2 / w, abs=0.05)
    assert (g * rr).sum() / g.sum() == pytest.approx((y0 + side / 2) * h2 / h, abs=0.05)


def test_size_mismatch_rescales_or_fails(tmp_path):
    """Images stored at half the model's resolution get scaled intrinsics (with a
    warning); an aspect mismatch is an error naming the file."""
    rng = np.random.default_rng(3)
    cams = [(1, "PINHOLE", 64, 48, [60.0, 62.0, 32.0, 24.0])]
    write_colmap_text(tmp_path / "sparse/0", cams, [(1, random_pose(rng), 1, "a.png", 0)], np.zeros((1, 3)), np.zeros((1, 3)))
    write_image(tmp_path / "images/a.png", 32, 24, rng)
    ds = load_dataset(tmp_path, max_size=None)
    c = ds.cameras[0]
    assert (c.width, c.height, c.fx, c.fy, c.cx, c.cy) == (32, 24, 30.0, 31.0, 16.0, 12.0)
    assert any("intrinsics rescaled" in w for w in ds.warnings)
    write_image(tmp_path / "images/a.png", 40, 24, rng)
    with pytest.raises(DatasetError, match=r"a\.png: image is 40x24 but its camera is 64x48"):
        load_dataset(tmp_path, max_size=None)


def test_exif_rotation_not_in_model(tmp_path):
    """A model made from the stored (unrotated) pixels of an image with an EXIF rotation
    (what COLMAP does): the image is loaded as stored, with a warning."""
    rng = np.random.default_rng(4)
    cams = [(1, "PINHOLE", 32, 24, [30.0, 30.0, 16.0, 12.0])]
    write_colmap_text(tmp_path / "sparse/0", cams, [(1, random_pose(rng), 1, "a.jpg", 0)], np.zeros((1, 3)), np.zeros((1, 3)))
    exif = Image.Exif()
    exif[0x0112] = 8
    (tmp_path / "images").mkdir()
    Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(tmp_path / "images/a.jpg", exif=exif)
    ds = load_dataset(tmp_path, max_size=None)
    assert ds.cameras[0].image.shape == (24, 32, 3)
    assert any("carry an EXIF orientation" in w and "a.jpg" in w for w in ds.warnings)
