"""Image files to RGB uint8 arrays (Pillow), and downscaling to a maximum size.

Conventions: arrays are [H, W, 3] uint8 RGB. Resizing maps the image extent onto the new
extent (pixel centres at integer + 0.5), so intrinsics scale exactly by new/old size per
axis: fx, cx by W'/W and fy, cy by H'/H.

Pixel formats (every Pillow mode), as values in [0, 1] (:func:`to_rgb_float`; the uint8
arrays are these x 255, rounded):

* ``RGB``, ``RGBX``, ``L``, ``1``, ``P``, ``CMYK``, ``YCbCr``, ``LAB``, ``HSV``: Pillow's
  conversion to RGB, / 255 (grey replicated; ``1`` gives 0 or 1; CMYK with an embedded
  ICC profile goes through that profile to sRGB).
* 16-bit grey ``I;16`` / ``I;16L`` / ``I;16B`` / ``I;16N``: / 65535 (Pillow's own
  conversion would clip everything above 255).
* 32-bit integer ``I``: / 65535 when every value fits in 16 bits (16-bit data, the
  usual case), else / (2^31 - 1); negative values become 0.
* 32-bit float, grey (``F``) or colour (a float RGB / RGBA TIFF, which Pillow cannot
  open: decoded by FFmpeg through PyAV): taken exactly when every value lies in [0, 1];
  whole numbers up to 255 or 65535 are 8- or 16-bit data stored as float and are divided
  by 255 or 65535 (exact too). Anything else -- HDR radiance above 1, negative values,
  NaN/Inf -- is refused (:class:`UnsupportedImageError` naming the file and the range):
  no tone mapping is guessed.
* 16-bit colour (PNG and TIFF ``RGB;16`` / ``RGBA;16``): Pillow would keep only the
  high byte of each value, so these are decoded by FFmpeg through PyAV, exactly (value /
  65535; 32768 -> 0.500008); one that FFmpeg cannot decode is refused, naming the file.
  :func:`read_image_float` returns the exact values.
* Precision policy: training uses every image at 8 bits per channel -- the trainer's
  ground truth is 8-bit RGBA on the GPU, and keeping 16 bits would double its memory for
  a gain below the 8-bit step -- rounded to the nearest 8-bit level (not cut to the high
  byte: 0x01FF -> 2, not 1). :func:`read_image_meta` reports the file's bits so that
  the dataset loader and the photo import say, in one line, how many images were rounded
  to 8 bits.
* Alpha (``RGBA``, ``LA``, ``PA``, ``P`` or ``L``/``RGB`` with a transparency key, and the
  premultiplied ``RGBa`` / ``La``): **composited over black**, i.e. colour x alpha, which
  is what the trainer renders against with its default black background; transparent
  pixels therefore teach "nothing here" rather than being left out of the loss.

EXIF orientation: :func:`read_image` applies it by default (photos to be shown or to be
matched by SfM). Dataset readers do not: COLMAP never re-orients pixels (it opens images
with OpenImageIO's ``oiio:reorient`` = 0), so a COLMAP model, and the transforms.json
files made from one, describe the pixels as stored; see :mod:`spirula.engine.ingest.load`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from ..errors import DatasetError

_EXIF_ORIENTATION = 0x0112
_TRANSPOSING_ORIENTATIONS = {5, 6, 7, 8}  # these swap width and height
_ALPHA_MODES = ("RGBA", "LA", "PA")
_PREMULTIPLIED_MODES = ("RGBa", "La")


class ImageDecodeError(DatasetError):
    """An image file exists but is truncated, corrupt or not an image."""


class UnsupportedImageError(ImageDecodeError):
    """An image decodes but its values cannot be used exactly (HDR or non-finite floats),
    or its deep colour cannot be decoded exactly."""


class _Unsupported(ValueError):
    """Raised by :func:`to_rgb_float` for values that cannot be used exactly; the reader
    adds the file's name (UnsupportedImageError)."""


def read_image(path: Path, apply_exif: bool = True) -> np.ndarray:
    """Decode ``path`` to a [H, W, 3] uint8 RGB array (module docstring for the pixel
    formats and alpha).

    EXIF orientation is applied unless ``apply_exif`` is False. A missing file raises
    DatasetError naming it; a truncated or undecodable one raises its subclass
    ImageDecodeError naming it (Pillow's truncated-image tolerance is left off).
    """
    image, orientation = read_image_raw(path)
    return apply_orientation(image, orientation) if apply_exif else image


def read_image_raw(path: Path) -> tuple[np.ndarray, int]:
    """([H, W, 3] uint8 RGB as stored, EXIF orientation 1..8; 1 when absent or invalid).
    Errors as :func:`read_image`."""
    image, orientation, _ = read_image_meta(path)
    return image, orientation


def read_image_meta(path: Path) -> tuple[np.ndarray, int, int]:
    """([H, W, 3] uint8 RGB as stored, EXIF orientation 1..8, bits per channel of the
    file: 8, 16 or 32) -- the bits say when precision was given up (see the module
    docstring). Errors as :func:`read_image`."""
    rgb, orientation, bits = _read(path, exact=False)
    return rgb, orientation, bits


def read_image_float(path: Path, apply_exif: bool = False) -> np.ndarray:
    """[H, W, 3] float32 RGB in [0, 1] of ``path`` with every value the file holds, exact:
    16-bit colour as value / 65535, floats as stored (module docstring; the training uses
    these rounded to 8 bits). EXIF orientation applied only when ``apply_exif``. Errors as
    :func:`read_image`, and UnsupportedImageError for values that cannot be used exactly."""
    rgb, orientation, _ = _read(path, exact=True)
    return apply_orientation(rgb, orientation) if apply_exif else rgb


def _read(path: Path, exact: bool) -> tuple[np.ndarray, int, int]:
    """(pixels: float32 [0, 1] when ``exact``, else uint8, EXIF orientation, bits)."""
    try:
        try:
            im_ctx = Image.open(path)
        except Image.UnidentifiedImageError:
            if not is_tiff(path):
                raise
            rgb = _decode_deep(path)  # a float colour TIFF: Pillow has no mode for it
            return (rgb if exact else quantize_u8(rgb)), 1, 32
        with im_ctx as im:
            bits = stored_bits(im)  # before load(), which drops the decoder's raw mode
            deep_colour = bits > 8 and im.mode in ("RGB", "RGBA", "LA")  # Pillow keeps the high byte only
            im.load()
            orientation = exif_orientation(im)
            if deep_colour:
                rgb = _decode_deep(path)
                return (rgb if exact else quantize_u8(rgb)), orientation, bits
            return (to_rgb_float(im) if exact else to_rgb8(im)), orientation, bits
    except DatasetError:
        raise
    except _Unsupported as e:
        raise UnsupportedImageError(f"{path}: {e}") from None
    except FileNotFoundError as e:
        raise DatasetError(f"{path}: image file not found") from e
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ImageDecodeError(f"{path}: cannot decode image ({e})") from e


def is_tiff(path: Path) -> bool:
    """Whether ``path`` starts with a TIFF signature (False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in (b"II*\x00", b"MM\x00*")
    except OSError:
        return False


def _decode_deep(path: Path) -> np.ndarray:
    """[H, W, 3] float32 in [0, 1], exact, of a 16-bit or float colour PNG / TIFF, decoded
    by FFmpeg (PyAV); alpha composited over black. _Unsupported when FFmpeg cannot decode
    it or its float values are not usable (module docstring)."""
    import av

    try:
        with av.open(str(path)) as container:
            frame = next(container.decode(video=0))
        alpha = len(frame.format.components) in (2, 4)
        if "f32" in frame.format.name or "f16" in frame.format.name:
            a = _float_scale(frame.to_ndarray(format="rgbaf32le" if alpha else "rgbf32le").astype(np.float32))
        else:  # float32 holds every v / 65535 to 1e-7 (the 8-bit rounding is never that close to a tie)
            a = frame.to_ndarray(format="rgba64le" if alpha else "rgb48le").astype(np.float32) / np.float32(65535.0)
    except _Unsupported:
        raise
    except (av.FFmpegError, StopIteration, ValueError, TypeError) as e:
        raise _Unsupported(f"a {_describe(path)} that cannot be decoded exactly ({e}); convert it to an 8- or "
                           "16-bit PNG") from None
    rgb = a[:, :, :3] * a[:, :, 3:4] if alpha else a
    return np.ascontiguousarray(rgb, np.float32)


def _describe(path: Path) -> str:
    return "deep-colour TIFF" if is_tiff(path) else "16-bit colour image"


def _float_scale(a: np.ndarray) -> np.ndarray:
    """Float pixels (float32 or float64) -> [0, 1] exactly (module docstring), or _Unsupported."""
    if not np.isfinite(a).all():
        raise _Unsupported(f"32-bit float image with {int(np.count_nonzero(~np.isfinite(a))):,} NaN/Inf values: "
                           "not supported (README, 'Precision kept')")
    lo, top = float(a.min(initial=0.0)), float(a.max(initial=0.0))
    if lo >= 0.0 and top <= 1.0:
        return a
    if lo >= 0.0 and bool(np.all(a == np.round(a))) and top <= 65535.0:  # 8- or 16-bit data stored as float
        return a / a.dtype.type(255.0 if top <= 255.0 else 65535.0)
    raise _Unsupported(f"32-bit float image with values in [{lo:g}, {top:g}], outside [0, 1] (HDR): not supported, "
                       "no tone mapping is guessed (README, 'Precision kept'); convert it to 8 or 16 bits per channel")


def stored_bits(im: Image.Image) -> int:
    """Bits per channel of an opened (not yet loaded) image's file: 16 for 16-bit PNG and
    TIFF (Pillow opens 16-bit colour as 8-bit ``RGB``, keeping the high byte, so the
    decoder's raw mode is what tells; for a TIFF its BitsPerSample tag, which also covers
    the planar layout Pillow decodes as if it were 8-bit), 32 for integer or float images,
    else 8."""
    if im.mode.startswith("I;16"):
        return 16
    if im.mode in ("I", "F"):
        return 32
    tags = getattr(im, "tag_v2", None)
    if tags is not None:
        per_sample = tags.get(258)  # BitsPerSample
        per_sample = per_sample if isinstance(per_sample, tuple) else (per_sample,)
        deepest = max((int(b) for b in per_sample if isinstance(b, int)), default=8)
        if deepest > 8:
            return 16 if deepest <= 16 else 32
    for tile in im.tile or ():
        args = tile[3] if len(tile) > 3 else None
        raw = args[0] if isinstance(args, tuple) and args else args
        if isinstance(raw, str) and (";16" in raw or ";32" in raw):
            return 16 if ";16" in raw else 32
    return 8


def exif_orientation(im: Image.Image) -> int:
    """The EXIF orientation tag of an open image, 1..8 (1 when absent or invalid)."""
    try:
        value = int(im.getexif().get(_EXIF_ORIENTATION, 1))
    except (TypeError, ValueError, OSError, SyntaxError):
        return 1
    return value if 1 <= value <= 8 else 1


def apply_orientation(image: np.ndarray, orientation: int) -> np.ndarray:
    """[H, W, ...] stored pixels -> upright pixels for EXIF ``orientation`` 1..8 (the
    same transposition as Pillow's ``ImageOps.exif_transpose``)."""
    o = orientation
    if o == 2:
        out = image[:, ::-1]
    elif o == 3:
        out = image[::-1, ::-1]
    elif o == 4:
        out = image[::-1]
    elif o == 5:
        out = image.swapaxes(0, 1)
    elif o == 6:
        out = np.rot90(image, -1)
    elif o == 7:
        out = image.swapaxes(0, 1)[::-1, ::-1]
    elif o == 8:
        out = np.rot90(image, 1)
    else:
        return image
    return np.ascontiguousarray(out)


def image_size(path: Path, apply_exif: bool = True) -> tuple[int, int]:
    """(width, height) of ``path`` (after EXIF orientation unless ``apply_exif`` is
    False), from the header only. Raises DatasetError if missing, ImageDecodeError if
    not a readable image."""
    try:
        with Image.open(path) as im:
            w, h = im.size
            if apply_exif and exif_orientation(im) in _TRANSPOSING_ORIENTATIONS:
                w, h = h, w
            return w, h
    except FileNotFoundError as e:
        raise DatasetError(f"{path}: image file not found") from e
    except Image.UnidentifiedImageError as e:
        if is_tiff(path):  # a float colour TIFF (module docstring): its size from FFmpeg
            h, w = read_image_float(path).shape[:2]
            return w, h
        raise ImageDecodeError(f"{path}: cannot decode image header ({e})") from e
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageDecodeError(f"{path}: cannot decode image header ({e})") from e


def quantize_u8(values: np.ndarray) -> np.ndarray:
    """Colours in [0, 1] (any float shape) -> uint8, clipped and rounded to the nearest level."""
    return (np.clip(values, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


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


def to_rgb8(im: Image.Image) -> np.ndarray:
    """[H, W, 3] uint8 RGB of an open image (module docstring); the 8-bit modes take a
    fast path, the others go through :func:`to_rgb_float`."""
    mode = im.mode
    if mode.startswith("I") or mode == "F":
        return np.rint(to_rgb_float(im) * np.float32(255.0)).astype(np.uint8)
    if mode in _PREMULTIPLIED_MODES:  # colour already multiplied by alpha: over black
        a = np.asarray(im)
        return np.ascontiguousarray(a[:, :, [0, 1, 2]] if mode == "RGBa" else np.repeat(a[:, :, :1], 3, axis=2))
    if mode in _ALPHA_MODES or "transparency" in im.info:
        a = np.asarray(im.convert("RGBA"), np.float32)
        rgb = a[:, :, :3] * (a[:, :, 3:4] * np.float32(1.0 / 255.0))
        return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)
    if mode == "CMYK" and im.info.get("icc_profile"):
        converted = _cmyk_with_profile(im)
        if converted is not None:
            return converted
    if mode != "RGB":
        im = im.convert("RGB")
    return np.ascontiguousarray(np.asarray(im, np.uint8))


def to_rgb_float(im: Image.Image) -> np.ndarray:
    """[H, W, 3] float32 RGB in [0, 1] of an open image in any Pillow mode, scaled as
    the module docstring says (no clipping of in-range values, no wrong scale).
    ValueError for float values that cannot be used exactly (HDR, NaN/Inf). A 16-bit
    colour image Pillow opened holds only the high bytes: :func:`read_image_float` reads
    the file exactly."""
    mode = im.mode
    if mode.startswith("I;16"):
        g = np.asarray(im).astype(np.float32) / np.float32(65535.0)
    elif mode == "I":
        a = np.asarray(im).astype(np.float64)
        top = a.max(initial=0.0)
        g = (np.maximum(a, 0.0) / (65535.0 if top <= 65535.0 else 2147483647.0)).astype(np.float32)
    elif mode == "F":
        g = _float_scale(np.asarray(im).astype(np.float64)).astype(np.float32)
    else:
        return to_rgb8(im).astype(np.float32) / np.float32(255.0)
    return np.repeat(g[:, :, None], 3, axis=2)


def _cmyk_with_profile(im: Image.Image) -> np.ndarray | None:
    """CMYK -> sRGB through the image's embedded ICC profile; None when LittleCMS is
    unavailable or the profile is unusable (the caller falls back to Pillow's formula)."""
    try:
        import io

        from PIL import ImageCms

        src = ImageCms.ImageCmsProfile(io.BytesIO(im.info["icc_profile"]))
        out = ImageCms.profileToProfile(im, src, ImageCms.createProfile("sRGB"), outputMode="RGB")
    except Exception:  # noqa: BLE001 - any LittleCMS failure: use the plain conversion
        return None
    return np.ascontiguousarray(np.asarray(out, np.uint8)) if out is not None else None
