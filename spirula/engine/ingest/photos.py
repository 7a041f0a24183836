"""A folder of photos -> upright 8-bit JPEG frames for SfM, one camera group per source
sub-folder and image size.

Accepted: JPEG, PNG, TIFF, WebP, BMP, and HEIC/HEIF when ``pillow-heif`` is installed.
Each photo is written into the frames folder:

* a baseline JPEG that is already upright (no EXIF rotation) and RGB or grey is copied
  byte for byte (EXIF kept, so COLMAP can read the focal length from it);
* anything else (EXIF-rotated, PNG/TIFF/HEIC, palette, RGBA, 16-bit, CMYK, ...) is
  decoded with :func:`spirula.engine.ingest.images.read_image` (EXIF orientation applied,
  modes converted) and written as JPEG quality ``jpeg_quality``; the EXIF block is
  carried over with its orientation reset to 1.

:func:`import_notes` says in one line each how many photos were turned upright by their
EXIF orientation and how many were rounded from 16 to 8 bits per channel.

**The photos and their masks** (one rule, :func:`photo_root` and :func:`masks_folder`): a
folder holding an ``images/`` sub-folder of photos takes its photos from ``images/`` only;
its masks (white = keep, spirula/engine/ingest/masks.py) are in the folder beside the photos'
folder -- ``masks_<k>/`` for ``images_<k>/``, else ``masks/`` -- so running on ``FOLDER`` or
on ``FOLDER/images`` finds ``FOLDER/masks`` alike. :func:`import_masks` writes each photo's
mask as ``frames/.masks/<frame name>.png`` (the frame's size), for the dataset stages to carry
beside the training images.

Names: the path relative to the source folder with whitespace replaced by ``_``
(matching pair lists are space separated) and the suffix ``.jpg`` for converted files;
a clash gets ``_2``, ``_3``, ... . Non-ASCII names are kept (UTF-8).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .images import ImageDecodeError, fit_size, image_size, is_tiff, read_image, resize, stored_bits

PHOTO_EXTENSIONS = {".jpg", ".jpeg", ".png", ".tif", ".tiff", ".webp", ".bmp"}
HEIF_EXTENSIONS = {".heic", ".heif"}
_EXIF_ORIENTATION = 0x0112


@dataclass
class PhotosConfig:
    """Settings of photo import."""

    max_size: int = 0          # longer side of the written frames (0 = keep the size)
    jpeg_quality: int = 95


def heif_available() -> bool:
    """Register pillow-heif's opener if it is installed; True when HEIC can be read."""
    try:
        import pillow_heif
    except ImportError:
        return False
    pillow_heif.register_heif_opener()
    return True


_MASK_DIR = re.compile(r"masks(_\d+)?")


def list_photos(folder: Path) -> list[Path]:
    """Photo files under ``folder`` (recursive, hidden entries skipped), sorted by
    relative path; a top-level ``masks`` / ``masks_<k>`` sub-folder holds masks, not photos
    (:func:`masks_folder`). HEIC/HEIF only when pillow-heif is available."""
    exts = PHOTO_EXTENSIONS | (HEIF_EXTENSIONS if heif_available() else set())
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if len(rel.parts) > 1 and _MASK_DIR.fullmatch(rel.parts[0]):   # the photos' masks
            continue
        if p.suffix.lower() in exts and p.is_file():
            out.append(p)
    return sorted(out, key=lambda p: p.relative_to(folder).as_posix())


def is_photo_folder(folder: Path) -> bool:
    return Path(folder).is_dir() and bool(list_photos(Path(folder)))


def photo_root(folder: Path) -> Path:
    """The folder the photos of ``folder`` are read from: its ``images/`` sub-folder when that
    holds photos (a capture laid out as images/ + masks/), else ``folder`` itself."""
    folder = Path(folder)
    return folder / "images" if is_photo_folder(folder / "images") else folder


def masks_folder(folder: Path) -> Path | None:
    """The masks folder of the photos of ``folder`` (module docstring): beside
    :func:`photo_root`, ``masks_<k>`` for ``images_<k>`` first, then ``masks``; else a
    ``masks`` sub-folder of the photo root itself; None when there is none."""
    root = photo_root(folder)
    names = ([root.name.replace("images", "masks")] if "images" in root.name else []) + ["masks"]
    for n in dict.fromkeys(names):
        m = root.parent / n
        if m != root and m.is_dir():
            return m
    inside = root / "masks"   # photos at the folder's top, their masks in a sub-folder
    return inside if inside.is_dir() else None


def import_masks(folder: Path, records: list[dict], out_dir: Path) -> dict:
    """Write the mask of each imported photo (``records`` of :func:`import_photos`) as
    ``out_dir/<name>.png``: [H, W] 8-bit, 255 = keep, 0 = masked out, the written frame's
    size (a mask of the photo's aspect is scaled, nearest). Returns {folder (str or None),
    masked (frame names with a mask), missing (without one), unusable (a mask of another
    aspect or one that cannot be decoded: "<mask path> (why)")}."""
    from PIL import Image

    from .masks import mask_candidates, read_mask_file

    src = masks_folder(folder)
    out = {"folder": str(src) if src else None, "masked": [], "missing": [], "unusable": []}
    if src is None:
        return out
    for r in records:
        path = next((p for p in mask_candidates(src, r["source"]) if p.is_file()), None)
        if path is None:
            out["missing"].append(r["name"])
            continue
        try:
            m = read_mask_file(path)
        except (OSError, ValueError) as e:
            out["unusable"].append(f"{path} (cannot be decoded: {e})")
            continue
        (h, w), (fw, fh) = m.shape, (r["width"], r["height"])
        if (w, h) != (fw, fh):
            if abs(w * fh - h * fw) > max(w, h):  # another aspect: not this photo's mask
                out["unusable"].append(f"{path} ({w}x{h}, its photo {fw}x{fh})")
                continue
            m = np.asarray(Image.fromarray(m).resize((fw, fh), Image.NEAREST))
        dst = out_dir / f"{r['name']}.png"
        dst.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(m).save(dst)
        out["masked"].append(r["name"])
    return out


def safe_name(rel: str) -> str:
    """Relative posix path with whitespace runs replaced by '_'."""
    return re.sub(r"\s+", "_", rel)


def import_photos(folder: Path, out_dir: Path, cfg: PhotosConfig,
                  progress: Callable[[int, int], None] | None = None,
                  on_warning: Callable[[str], None] | None = None) -> list[dict]:
    """Write the photos of ``folder`` (of its ``images/`` sub-folder when it has one:
    :func:`photo_root`) into ``out_dir`` (see the module docstring); ``source`` of a record
    is relative to that folder.

    Returns one record per written frame, in name order: {name, source, group, width,
    height, converted}. ``group`` = "<sub-folder>|<width>x<height>". Unreadable files are
    skipped with a warning; DatasetError when no photo is found or none can be read.
    """
    from PIL import Image

    folder = photo_root(folder)
    files = list_photos(folder)
    if not files:
        heic = [p for p in folder.rglob("*") if p.suffix.lower() in HEIF_EXTENSIONS]
        hint = " (HEIC files found: install pillow-heif to read them)" if heic else ""
        raise DatasetError(f"{folder}: no photos found (JPEG, PNG, TIFF, WebP, BMP){hint}")
    out_dir.mkdir(parents=True, exist_ok=True)
    used: set[str] = set()
    records = []
    for k, src in enumerate(files, 1):
        rel = src.relative_to(folder).as_posix()
        try:
            rec = _import_one(src, rel, out_dir, used, cfg, Image)
        except ImageDecodeError as e:
            if on_warning:
                on_warning(f"{e}; skipped")
            rec = None
        if rec is not None:
            records.append(rec)
        if progress is not None:
            progress(k, len(files))
    if not records:
        raise DatasetError(f"{folder}: none of the {len(files)} photos could be read")
    return sorted(records, key=lambda r: r["name"])


def _unique(name: str, used: set[str]) -> str:
    stem, dot, ext = name.rpartition(".")
    cand, i = name, 2
    while cand.lower() in used:
        cand = f"{stem}_{i}{dot}{ext}"
        i += 1
    used.add(cand.lower())
    return cand


def _import_one(src: Path, rel: str, out_dir: Path, used: set[str], cfg: PhotosConfig, Image) -> dict:
    try:
        with Image.open(src) as im:
            fmt, mode, size = im.format, im.mode, im.size
            bits = stored_bits(im)  # first: reading a PNG's EXIF can decode it, dropping the raw mode
            exif = im.getexif()
    except FileNotFoundError as e:
        raise DatasetError(f"{src}: image file not found") from e
    except Image.UnidentifiedImageError as e:
        if not is_tiff(src):
            raise ImageDecodeError(f"{src}: cannot decode image ({e})") from e
        # a float colour TIFF, which Pillow cannot open (spirula/engine/ingest/images.py): FFmpeg decodes it
        fmt, mode, size, bits, exif = "TIFF", "F", image_size(src), 32, Image.Exif()
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageDecodeError(f"{src}: cannot decode image ({e})") from e
    orientation = exif.get(_EXIF_ORIENTATION, 1)
    w, h = fit_size(*size, cfg.max_size)
    copy = fmt == "JPEG" and mode in ("RGB", "L") and orientation in (None, 1) and (w, h) == size
    sub = rel.rpartition("/")[0]
    if copy:
        name = _unique(safe_name(rel), used)
        dst = out_dir / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        width, height = size
    else:
        rgb = read_image(src)
        w, h = fit_size(rgb.shape[1], rgb.shape[0], cfg.max_size)
        rgb = resize(np.ascontiguousarray(rgb), w, h)
        name = _unique(safe_name(rel).rpartition(".")[0] + ".jpg", used)
        dst = out_dir / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if _EXIF_ORIENTATION in exif:
            exif[_EXIF_ORIENTATION] = 1
        Image.fromarray(rgb).save(dst, quality=cfg.jpeg_quality, subsampling=0, exif=exif.tobytes())
        width, height = w, h
    turned = orientation not in (None, 1) and 1 <= _as_int(orientation) <= 8
    return {"name": name, "source": rel, "group": f"{sub}|{width}x{height}", "width": width, "height": height,
            "converted": not copy, "exif_orientation": _as_int(orientation) if turned else 1, "bits": bits}


def _as_int(v) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 1


def import_notes(records: list[dict]) -> list[str]:
    """What the import did to the pixels, one line each: photos turned upright by their
    EXIF orientation, photos rounded from 16 (or 32) to 8 bits per channel."""
    out = []
    turned = [r["source"] for r in records if r.get("exif_orientation", 1) != 1]
    if turned:
        out.append(f"{len(turned)} of {len(records)} photos carry an EXIF orientation; it was applied (pixels turned "
                   f"upright, orientation reset to 1): {', '.join(turned[:5])}" + (" ..." if len(turned) > 5 else ""))
    deep = [r["source"] for r in records if r.get("bits", 8) > 8]
    if deep:
        out.append(f"{len(deep)} photos have more than 8 bits per channel; written as 8-bit JPEG for SfM and "
                   f"training: {', '.join(deep[:5])}" + (" ..." if len(deep) > 5 else ""))
    return out
