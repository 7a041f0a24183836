"""Image files to RGB uint8 arrays (Pillow), and downscaling to a maximum size.

Conventions: arrays are [H, W, 3] uint8 RGB. Resizing maps the image extent onto the new
extent (pixel centres at integer + 0.5), so intrinsics scale exactly by new/old size per
axis: fx, cx by W'/W and fy, cy by H'/H.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from ..errors import DatasetError

_EXIF_ORIENTATION = 0x0112
_TRANSPOSING_ORIENTATIONS = {5, 6, 7, 8}  # these swap width and height


class ImageDecodeError(DatasetError):
    """An image file exists but is truncated, corrupt or not an image."""


def read_image(path: Path, apply_exif: bool = True) -> np.ndarray:
    """Decode ``path`` to a [H, W, 3] uint8 RGB array.

    EXIF orientation is applied unless ``apply_exif`` is False. Grayscale, palette, CMYK
    and 16-bit / float images are converted (integer modes scaled by 255/65535, float taken
    as 0..1); images with alpha are composited over black (premultiplied, as 3DGS does with
    its default black background). A missing file raises DatasetError naming it; a
    truncated or undecodable one raises its subclass ImageDecodeError (Pillow's
    truncated-image tolerance is left off).
    """
    try:
        with Image.open(path) as im:
            im.load()
            if apply_exif:
                im = ImageOps.exif_transpose(im)
            return _to_rgb8(im)
    except DatasetError:
        raise
    except FileNotFoundError as e:
        raise DatasetError(f"{path}: image file not found") from e
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageDecodeError(f"{path}: cannot decode image ({e})") from e


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) of ``path`` after EXIF orientation, from the header only.
    Raises DatasetError if missing, ImageDecodeError if not a readable image."""
    try:
        with Image.open(path) as im:
            w, h = im.size
            if im.getexif().get(_EXIF_ORIENTATION) in _TRANSPOSING_ORIENTATIONS:
                w, h = h, w
            return w, h
    except FileNotFoundError as e:
        raise DatasetError(f"{path}: image file not found") from e
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageDecodeError(f"{path}: cannot decode image header ({e})") from e


def fit_size(width: int, height: int, max_size: int | None) -> tuple[int, int]:
    """Size with the longer side at most ``max_size`` (aspect kept, rounded, >= 1);
    unchanged when it already fits or ``max_size`` is None or <= 0."""
    longest = max(width, height)
    if not max_size or max_size <= 0 or longest <= max_size:
        return width, height
    s = max_size / longest
    return max(1, round(width * s)), max(1, round(height * s))


def resize(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """[H, W, 3] uint8 -> [height, width, 3] uint8 with Pillow's antialiased LANCZOS.

    ``reducing_gap=3``: Pillow first box-reduces by an integer factor while the result
    stays at least 3x the target, then filters; it carries the exact sub-pixel box
    through, so geometry is kept (only a partial last block is averaged over fewer
    pixels). About 3x faster than plain LANCZOS for large reductions.
    """
    if image.shape[1] == width and image.shape[0] == height:
        return image
    out = Image.fromarray(image).resize((width, height), Image.Resampling.LANCZOS, reducing_gap=3.0)
    return np.asarray(out)


def _to_rgb8(im: Image.Image) -> np.ndarray:
    if im.mode.startswith("I") or im.mode == "F":  # 16/32-bit integer gray, or float gray
        a = np.asarray(im, np.float64)
        a = a * 255.0 if im.mode == "F" else a / 257.0
        g = np.clip(np.rint(a), 0, 255).astype(np.uint8)
        return np.repeat(g[:, :, None], 3, axis=2)
    has_alpha = im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info
    if has_alpha:
        a = np.asarray(im.convert("RGBA"), np.float32)
        rgb = a[:, :, :3] * (a[:, :, 3:4] / 255.0)
        return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
    if im.mode != "RGB":
        im = im.convert("RGB")
    return np.ascontiguousarray(np.asarray(im, np.uint8))
