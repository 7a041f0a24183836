"""Photo-folder import (spirula.engine.ingest.photos) on images the test writes: EXIF orientation,
odd pixel modes, mixed sizes, sub-folders, whitespace and non-ASCII names."""

import numpy as np
import pytest
from spirula.engine.errors import DatasetError
from spirula.engine.ingest.photos import PhotosConfig, import_photos, list_photos
from PIL import Image


def marker(w, h):
    """RGB image, bright top-left quadrant."""
    a = np.full((h, w, 3), 40, np.uint8)
    a[: h // 2, : w // 2] = 220
    return a


def test_import_handles_orientation_modes_and_names(tmp_path):
    src = tmp_path / "fotos été"
    (src / "sub dir").mkdir(parents=True)
    Image.fromarray(marker(80, 60)).save(src / "plain.jpg", quality=95)
    # stored sideways, EXIF 6 = rotate 90 degrees clockwise to display
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(np.ascontiguousarray(np.rot90(marker(60, 80), k=1))).save(src / "rotated.jpg", exif=exif)
    rgba = np.dstack([marker(80, 60), np.full((60, 80), 255, np.uint8)])
    Image.fromarray(rgba, "RGBA").save(src / "alpha.png")
    Image.fromarray(marker(80, 60)).convert("P").save(src / "palette.png")
    Image.fromarray((marker(80, 60)[..., 0].astype(np.uint16) * 257)).save(src / "deep 16.png")   # 16-bit grey
    Image.fromarray(marker(80, 60)).convert("L").save(src / "grey.tif")
    Image.fromarray(marker(80, 60)).convert("CMYK").save(src / "sub dir" / "cmyk ü.jpg")
    Image.fromarray(marker(40, 30)).save(src / "sub dir" / "small.jpg")
    (src / "notes.txt").write_text("not a photo")
    (src / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")

    warnings = []
    out = tmp_path / "frames"
    recs = import_photos(src, out, PhotosConfig(), on_warning=warnings.append)
    names = {r["source"]: r for r in recs}
    assert set(names) == {"plain.jpg", "rotated.jpg", "alpha.png", "palette.png", "deep 16.png", "grey.tif",
                          "sub dir/cmyk ü.jpg", "sub dir/small.jpg"}
    assert len(warnings) == 1 and "broken.jpg" in warnings[0]
    # upright RGB JPEG copied byte for byte; everything else converted to JPEG
    assert not names["plain.jpg"]["converted"]
    assert (out / "plain.jpg").read_bytes() == (src / "plain.jpg").read_bytes()
    assert names["deep 16.png"]["name"] == "deep_16.jpg"
    assert names["sub dir/cmyk ü.jpg"]["name"] == "sub_dir/cmyk_ü.jpg"
    for r in recs:
        assert not any(c.isspace() for c in r["name"])
        with Image.open(out / r["name"]) as im:
            assert im.mode in ("RGB", "L") and im.size == (r["width"], r["height"])
            a = np.asarray(im.convert("RGB"), np.float32)
        h, w = a.shape[:2]
        assert a[: h // 2, : w // 2].mean() > a[h // 2:, w // 2:].mean() + 50, r["source"]   # upright marker
    # EXIF rotation applied (stored 80x60 sideways -> 60x80 upright) and reset in the output
    assert (names["rotated.jpg"]["width"], names["rotated.jpg"]["height"]) == (60, 80)
    with Image.open(out / names["rotated.jpg"]["name"]) as im:
        assert im.getexif().get(0x0112, 1) == 1
    # camera groups: per sub-folder and size
    groups = {r["group"] for r in recs}
    assert groups == {"|80x60", "|60x80", "sub dir|80x60", "sub dir|40x30"}


def test_name_clash_and_size_limit(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    Image.fromarray(marker(200, 100)).save(src / "a.png")
    Image.fromarray(marker(200, 100)).save(src / "a.jpg", quality=95)
    recs = import_photos(src, tmp_path / "out", PhotosConfig(max_size=100))
    assert sorted(r["name"] for r in recs) == ["a.jpg", "a_2.jpg"]
    assert all((r["width"], r["height"]) == (100, 50) for r in recs)


def test_empty_folder_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "clip.heic").write_bytes(b"")
    assert list_photos(tmp_path / "empty") in ([], [tmp_path / "empty" / "clip.heic"])   # HEIC only with pillow-heif
    with pytest.raises(DatasetError, match="no photos found|could be read"):
        import_photos(tmp_path / "empty", tmp_path / "out", PhotosConfig())
