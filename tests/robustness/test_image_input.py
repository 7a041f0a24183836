"""Input class 2, images: EXIF orientations 1-8 with poses that match the pixels used,
every Pillow pixel format to RGB in [0, 1] (no clipping, no wrong scale; alpha is
composited over black, the trainer's default background), a truncated JPEG named in a
warning while the other images load.

The COLMAP convention decides the orientation: COLMAP opens images with OpenImageIO and
``oiio:reorient`` = 0, so a model describes the pixels *as stored*; the loader uses them
so, and applies the EXIF orientation only when the model was visibly made from upright
copies (the stored size is the camera's turned by 90 degrees).
"""

from __future__ import annotations

import colorsys
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from spirula.engine.ingest import load_dataset
from spirula.engine.ingest.images import ImageDecodeError, read_image, to_rgb_float

from ..ingest.synth import random_pose
from .fixtures import blob_centroids, blob_image, colmap_text, save_png, world_from_camera_points, write_files

# ------------------------------------------------------------------------ orientation

W, H = 60, 40
FX, FY, CX, CY = 50.0, 52.0, 30.5, 19.5


def _stored_for(upright: np.ndarray, orientation: int) -> np.ndarray:
    """The stored pixels that an EXIF viewer (Pillow's exif_transpose) shows as ``upright``
    under ``orientation``: searched among the 8 flips/turns, checked with Pillow."""
    candidates = [upright, upright[:, ::-1], upright[::-1], upright[::-1, ::-1]]
    candidates += [c.swapaxes(0, 1) for c in candidates]
    for c in candidates:
        c = np.ascontiguousarray(c)
        im = Image.fromarray(c)
        exif = Image.Exif()
        exif[0x0112] = orientation
        b = io.BytesIO()
        im.save(b, format="PNG", exif=exif.tobytes())
        b.seek(0)
        if np.array_equal(np.asarray(ImageOps.exif_transpose(Image.open(b))), upright):
            return c
    raise AssertionError(orientation)


def _scene(tmp_path: Path, orientation: int, model_on_upright: bool, seed: int):
    """One view whose model camera sees blobs at known 3D points; the image file carries
    EXIF ``orientation``. ``model_on_upright``: the model was made from the upright
    picture (the stored file is that picture turned back), else from the stored pixels."""
    rng = np.random.default_rng(seed)
    w2c = random_pose(rng)
    turned = orientation in (5, 6, 7, 8)
    cw, ch = (H, W) if (model_on_upright and turned) else (W, H)
    fx, fy, cx, cy = (FY, FX, CY, CX) if (model_on_upright and turned) else (FX, FY, CX, CY)
    nx, ny = (4, 3) if cw > ch else (3, 4)  # blobs at least 12 px apart
    gu, gv = np.meshgrid(np.linspace(8, cw - 8, nx), np.linspace(8, ch - 8, ny))
    uv = np.stack([gu.ravel(), gv.ravel()], 1) + rng.uniform(-1.5, 1.5, (12, 2))
    d = rng.uniform(2.0, 4.0, 12)
    pc = np.stack([(uv[:, 0] - cx) / fx * d, (uv[:, 1] - cy) / fy * d, d], 1)
    seen = blob_image(uv, cw, ch)          # what the model's camera saw
    stored = _stored_for(seen, orientation) if model_on_upright else seen
    save_png(tmp_path / "images/view.png", stored, orientation)
    world = world_from_camera_points(w2c, pc)
    write_files(tmp_path / "sparse/0", colmap_text([(1, "PINHOLE", cw, ch, [fx, fy, cx, cy])],
                                                   [(1, w2c, 1, "view.png", 0)], world, np.full((12, 3), 9)))
    return world


def _assert_pose_matches_pixels(ds, world):
    cam = ds.cameras[0]
    p = world @ cam.w2c[:3, :3].T + cam.w2c[:3, 3]
    uv = np.stack([cam.fx * p[:, 0] / p[:, 2] + cam.cx, cam.fy * p[:, 1] / p[:, 2] + cam.cy], 1)
    err = np.linalg.norm(blob_centroids(cam.image, uv) - uv, axis=1)
    assert err.max() < 0.05, f"blobs {err.max():.3f} px away from the pose's projection"


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_model_of_stored_pixels(tmp_path, orientation):
    """A COLMAP model of the stored pixels (what COLMAP makes): pixels used as stored,
    the pose projects onto them; any orientation other than 1 is reported."""
    world = _scene(tmp_path, orientation, model_on_upright=False, seed=orientation)
    ds = load_dataset(tmp_path, max_size=None)
    _assert_pose_matches_pixels(ds, world)
    assert (ds.cameras[0].width, ds.cameras[0].height) == (W, H)
    if orientation == 1:
        assert ds.warnings == []
    else:
        assert ds.warnings == ["1 images carry an EXIF orientation; used as stored, as COLMAP does "
                               "(the model describes the stored pixels): view.png"]


@pytest.mark.parametrize("orientation", [5, 6, 7, 8])
def test_exif_orientation_model_of_upright_copies(tmp_path, orientation):
    """A model made from upright copies of turned photos (the stored size is the camera's
    turned by 90 degrees): the orientation is applied, the pose projects onto the pixels."""
    world = _scene(tmp_path, orientation, model_on_upright=True, seed=10 + orientation)
    ds = load_dataset(tmp_path, max_size=None)
    _assert_pose_matches_pixels(ds, world)
    assert (ds.cameras[0].width, ds.cameras[0].height) == (H, W)
    assert ds.warnings == ["1 images are stored turned against their camera; their EXIF orientation was "
                           "applied to match it: view.png"]


def test_exif_orientation_when_shown_matches_pillow(tmp_path):
    """read_image (photos for SfM, the viewer) turns every orientation as Pillow does."""
    a = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    for o in range(1, 9):
        path = save_png(tmp_path / f"o{o}.png", a, o)
        with Image.open(path) as im:
            expect = np.asarray(ImageOps.exif_transpose(im))
        np.testing.assert_array_equal(read_image(path), expect)
        np.testing.assert_array_equal(read_image(path, apply_exif=False), a)


# ------------------------------------------------------------------------ pixel formats

G8 = np.array([[0, 1, 127, 128], [200, 254, 255, 17], [3, 90, 180, 250]], np.uint8)
G16 = np.array([[0, 1, 257, 32768], [65534, 65535, 1000, 40000], [7, 300, 60000, 12345]], np.uint16)
A8 = np.array([[255, 0, 128, 1], [254, 77, 255, 200], [0, 255, 33, 99]], np.uint8)


def _png(im: Image.Image, fmt: str = "PNG") -> Image.Image:
    """``im`` saved to a file format that keeps its mode and opened again."""
    b = io.BytesIO()
    im.save(b, format=fmt)
    b.seek(0)
    out = Image.open(b)
    out.load()
    return out


def _rgb(g):
    return np.repeat(np.asarray(g, np.float64)[:, :, None], 3, axis=2)


def _over_black(rgb, alpha):
    return np.asarray(rgb, np.float64) * (np.asarray(alpha, np.float64)[:, :, None] / 255.0)


def _cases():
    rng = np.random.default_rng(1)
    rgb8 = rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)
    pal = rng.integers(0, 256, (256, 3), dtype=np.uint8)
    idx = rng.integers(0, 256, (3, 4), dtype=np.uint8)
    p_img = Image.fromarray(idx, "P")
    p_img.putpalette(pal.ravel().tolist())
    p_trns = p_img.copy()
    p_trns.info["transparency"] = bytes(A8.ravel()[: 256].tolist() + [255] * (256 - A8.size))
    trns_alpha = np.array([A8.ravel()[i] if i < A8.size else 255 for i in idx.ravel()], np.float64).reshape(3, 4)
    f_unit = rng.uniform(0, 1, (3, 4)).astype(np.float32)
    f_255 = G8.astype(np.float32)
    i32 = np.array([[0, 70000, 2**31 - 1, 5], [123456789, 1, 2, 3], [9, 99, 999, 9999]], np.int32)
    cmyk = rng.integers(0, 256, (3, 4, 4), dtype=np.uint8)
    ycc = rng.integers(16, 240, (3, 4, 3), dtype=np.uint8)
    hsv = rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)
    bits = G8 > 100
    return {
        # mode: (image as read from a file where the format keeps the mode, expected [0, 1], tolerance in 1/255)
        "1": (_png(Image.fromarray(bits)), _rgb(bits), 0),
        "L": (_png(Image.fromarray(G8, "L")), _rgb(G8) / 255, 0),
        "P": (_png(p_img), pal[idx] / 255.0, 0),
        "P+tRNS": (_png(p_trns), _over_black(pal[idx], trns_alpha) / 255, 0.5),
        "RGB": (_png(Image.fromarray(rgb8)), rgb8 / 255.0, 0),
        "RGBA": (_png(Image.fromarray(np.dstack([rgb8, A8]), "RGBA")), _over_black(rgb8, A8) / 255, 0.5),
        "LA": (_png(Image.fromarray(np.dstack([G8, A8]), "LA")), _over_black(_rgb(G8), A8) / 255, 0.5),
        "PA": (Image.merge("PA", [Image.fromarray(idx, "L"), Image.fromarray(A8, "L")]), None, 0.5),
        "La": (Image.frombytes("La", (4, 3), np.dstack([G8, A8]).tobytes()), _rgb(G8) / 255, 0),
        "RGBa": (Image.frombytes("RGBa", (4, 3), np.dstack([rgb8, A8]).tobytes()), rgb8 / 255.0, 0),
        "RGBX": (Image.frombytes("RGBX", (4, 3), np.dstack([rgb8, A8]).tobytes()), rgb8 / 255.0, 0),
        "I;16": (_png(Image.fromarray(G16)), _rgb(G16) / 65535, 0),
        "I;16B": (_png(Image.fromarray(G16.astype(">u2")), "TIFF"), _rgb(G16) / 65535, 0),
        "I (16-bit data)": (_png(Image.fromarray(G16.astype(np.int32)), "TIFF"), _rgb(G16) / 65535, 0),
        "I (32-bit data)": (_png(Image.fromarray(i32), "TIFF"), _rgb(i32) / (2**31 - 1), 0),
        "F in [0, 1]": (_png(Image.fromarray(f_unit), "TIFF"), _rgb(f_unit), 0),
        "F of 8-bit values": (_png(Image.fromarray(f_255), "TIFF"), _rgb(f_255) / 255, 0),
        "CMYK": (_png(Image.frombytes("CMYK", (4, 3), cmyk.tobytes()), "TIFF"),
                 (255 - cmyk[:, :, :3].astype(np.float64)) * (255 - cmyk[:, :, 3:4]) / 255 / 255, 0.5),
        "YCbCr": (_png(Image.frombytes("YCbCr", (4, 3), ycc.tobytes()), "TIFF"), _ycbcr_to_rgb(ycc) / 255, 1),
        "HSV": (Image.frombytes("HSV", (4, 3), hsv.tobytes()),
                np.array([colorsys.hsv_to_rgb(*(v / 255.0)) for v in hsv.reshape(-1, 3)]).reshape(3, 4, 3), 1),
        "LAB": ((Image.frombytes("LAB", (4, 3), np.array([[255, 0, 0], [0, 0, 0], [128, 0, 0]] * 4,  # a*, b* signed: 0 = grey
                                                             np.uint8).tobytes())),
                np.array([[1.0] * 3, [0.0] * 3, [119 / 255] * 3] * 4).reshape(3, 4, 3), 2),
    }


def _ycbcr_to_rgb(ycc):
    """JFIF (full-range BT.601) Y'CbCr -> R'G'B'."""
    y, cb, cr = (ycc[:, :, i].astype(np.float64) for i in range(3))
    rgb = np.stack([y + 1.402 * (cr - 128), y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128), y + 1.772 * (cb - 128)], 2)
    return np.clip(rgb, 0, 255)


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_every_pixel_format_to_rgb(name):
    im, expect, tol = CASES[name]
    if name == "PA":  # the palette of a PA image is Pillow's default: compare with its RGBA
        rgba = np.asarray(im.convert("RGBA"), np.float64)
        expect = _over_black(rgba[:, :, :3], rgba[:, :, 3]) / 255
    assert im.mode == name.split(" ")[0].replace("+tRNS", "") or name == "P+tRNS"
    out = to_rgb_float(im)
    assert out.shape == (3, 4, 3) and out.dtype == np.float32
    assert 0.0 <= out.min() and out.max() <= 1.0
    np.testing.assert_allclose(out, expect, rtol=0, atol=tol / 255 + 1e-6)
    # the uint8 pixels the trainer gets are the same values, rounded
    from spirula.engine.ingest.images import to_rgb8

    np.testing.assert_allclose(to_rgb8(im) / 255.0, expect, rtol=0, atol=(tol + 0.5) / 255 + 1e-6)


def test_no_clipping_of_16_bit_values_above_255(tmp_path):
    """Pillow's own conversion of I;16 clips everything above 255 to white; ours does not."""
    path = tmp_path / "deep.png"
    Image.fromarray(G16).save(path)
    with Image.open(path) as im:
        assert np.asarray(im.convert("RGB"))[1, 2, 0] == 255  # Pillow: 1000 of 65535 -> white
    img = read_image(path)
    assert img[1, 2, 0] == 4  # 1000 / 257, rounded
    np.testing.assert_array_equal(img[:, :, 0], np.rint(G16 / 257.0).astype(np.uint8))


def test_sixteen_bit_colour_is_read_exactly(tmp_path):
    """Issue 49: 16-bit colour was cut to its high byte (32768 -> 0.50196). The exact value
    is value / 65535 (read_image_float); the training's 8 bits are that, rounded."""
    from spirula.engine.ingest.images import read_image_float, read_image_meta

    from .fixtures import save_png16

    rng = np.random.default_rng(11)
    deep = rng.integers(0, 65536, (5, 7, 3)).astype(np.uint16)
    deep[0, 0] = [32768, 0x01FF, 65535]
    path = save_png16(tmp_path / "deep.png", deep)
    exact = read_image_float(path)
    assert abs(float(exact[0, 0, 0]) - 0.50001) < 1e-5
    np.testing.assert_allclose(exact, deep / 65535.0, rtol=0, atol=1e-7)
    rgb8, _, bits = read_image_meta(path)
    assert bits == 16 and rgb8[0, 0, 1] == 2  # 511 / 257 = 1.99: rounded, not the high byte (1)
    np.testing.assert_array_equal(rgb8, np.rint(deep / 257.0).astype(np.uint8))
    alpha = rng.integers(0, 65536, (5, 7, 1)).astype(np.uint16)  # with alpha: over black, exactly
    path = save_png16(tmp_path / "deep_rgba.png", np.concatenate([deep, alpha], 2))
    np.testing.assert_allclose(read_image_float(path), deep / 65535.0 * (alpha / 65535.0), rtol=0, atol=1e-6)
    tifffile = pytest.importorskip("tifffile")
    tifffile.imwrite(tmp_path / "deep.tif", deep, photometric="rgb")
    np.testing.assert_allclose(read_image_float(tmp_path / "deep.tif"), deep / 65535.0, rtol=0, atol=1e-7)
    # planar (one plane per channel): Pillow decoded it as 8-bit garbage
    tifffile.imwrite(tmp_path / "planar.tif", deep.transpose(2, 0, 1), photometric="rgb", planarconfig="separate")
    np.testing.assert_allclose(read_image_float(tmp_path / "planar.tif"), deep / 65535.0, rtol=0, atol=1e-7)
    assert read_image_meta(tmp_path / "planar.tif")[2] == 16


def test_float_tiff_is_exact_or_refused(tmp_path):
    """32-bit float TIFF, grey or colour: values in [0, 1] exactly; HDR and NaN refused in
    one line naming the file (README, 'Precision kept')."""
    from spirula.engine.ingest.images import UnsupportedImageError, image_size, read_image_float

    tifffile = pytest.importorskip("tifffile")
    rng = np.random.default_rng(12)
    colour = rng.random((5, 7, 3)).astype(np.float32)
    tifffile.imwrite(tmp_path / "f.tif", colour, photometric="rgb")
    np.testing.assert_array_equal(read_image_float(tmp_path / "f.tif"), colour)
    assert image_size(tmp_path / "f.tif") == (7, 5)
    np.testing.assert_array_equal(read_image(tmp_path / "f.tif"), np.rint(colour * 255).astype(np.uint8))
    grey = rng.random((5, 7)).astype(np.float32)
    tifffile.imwrite(tmp_path / "g.tif", grey)
    np.testing.assert_array_equal(read_image_float(tmp_path / "g.tif")[:, :, 1], grey)
    for name, values in (("hdr.tif", colour * 40), ("hdr_grey.tif", grey * 40 + 0.5), ("nan.tif", np.where(
            colour > 0.9, np.nan, colour).astype(np.float32))):
        tifffile.imwrite(tmp_path / name, values, photometric="rgb" if values.ndim == 3 else None)
        for reader in (read_image, read_image_float):
            with pytest.raises(UnsupportedImageError) as e:
                reader(tmp_path / name)
            text = str(e.value)
            assert text.startswith(f"{tmp_path / name}: 32-bit float image") and "not supported" in text
            assert "\n" not in text


# ------------------------------------------------------------------------ truncated JPEG


def test_truncated_jpeg_is_named_and_the_rest_load(tmp_path):
    rng = np.random.default_rng(3)
    ims = [(i + 1, random_pose(rng), 1, f"{i}.jpg", 0) for i in range(4)]
    write_files(tmp_path / "sparse/0", colmap_text([(1, "PINHOLE", 64, 48, [60.0, 60.0, 32.0, 24.0])], ims,
                                                   np.zeros((1, 3)), np.zeros((1, 3))))
    (tmp_path / "images").mkdir()
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(tmp_path / f"images/{i}.jpg", quality=90)
    cut = tmp_path / "images/2.jpg"
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ImageDecodeError) as e:
        read_image(cut)
    assert str(e.value).startswith(f"{cut}: cannot decode image (image file is truncated")
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["0.jpg", "1.jpg", "3.jpg"]
    assert ds.warnings == [f"{e.value}; skipped"]


def test_photo_import_of_a_float_colour_tiff(tmp_path):
    """The photo import (spirula run) takes a float colour TIFF Pillow cannot open, exactly."""
    from spirula.engine.ingest.photos import PhotosConfig, import_photos

    tifffile = pytest.importorskip("tifffile")
    src = tmp_path / "photos"
    src.mkdir()
    colour = np.random.default_rng(13).random((20, 30, 3)).astype(np.float32)
    tifffile.imwrite(src / "f.tif", colour, photometric="rgb")
    records = import_photos(src, tmp_path / "frames", PhotosConfig())
    assert len(records) == 1 and (records[0]["width"], records[0]["height"]) == (30, 20) and records[0]["bits"] == 32
