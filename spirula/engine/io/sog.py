"""PlayCanvas's SOG ("Spatially Ordered Gaussians"), version 2 (developer.playcanvas.com,
user manual > Gaussian splatting > formats > SOG, "The SOG Format (Version 2)"; read by
SuperSplat, the PlayCanvas engine and viewer, splat-transform).

A ``meta.json`` plus lossless WebP images, as a folder or zipped at the root of one
``.sog`` bundle (which the writer produces). Every image but the SH centroids holds one
texel per Gaussian, row-major from the top left: Gaussian i at (i % W, i // W); the images
are W x H with W = 4 ceil(sqrt(N) / 4), H = 4 ceil(N / W / 4) (any W x H >= count reads).

- ``means_l.webp`` / ``means_u.webp`` (RGB = x, y, z): the low / high byte of a 16-bit
  place of ``n = sign(p) ln(|p| + 1)`` between ``means.mins`` and ``means.maxs``; read as
  ``p = sign(n) (exp |n| - 1)``;
- ``scales.webp`` (RGB): indices into ``scales.codebook`` (256 log sigmas, one codebook
  for the three axes);
- ``quats.webp``: smallest-three in the order w, x, y, z: RGB the three kept components as
  ``round(255 (c sqrt(2) / 2 + 0.5))``, A = 252 + the index of the dropped (largest) one;
- ``sh0.webp``: RGB indices into ``sh0.codebook`` (256 DC coefficients), A = ``round(255
  sigmoid(opacity))``;
- with SH degree >= 1, ``shN_labels.webp`` (R + 256 G: a palette entry per Gaussian) and
  ``shN_centroids.webp``: ``shN.count`` palette entries, 64 per row, each ``coeffs`` texels
  wide (3, 8, 15 for ``shN.bands`` 1, 2, 3), texel RGB = indices into ``shN.codebook`` of
  that coefficient's R, G, B.

The palette is made by k-means (:func:`spirula.engine.io.quantize.kmeans`, ``palette`` entries, at
most 65,536) over the Gaussians' SH vectors (fitted on at most 16 rows per entry, then every
Gaussian assigned: on the CPU, so a million Gaussians take minutes); the codebooks by 1-D k-means. Positions keep
our (the PLY's) axes, as the spec says. The writer orders the Gaussians along a Morton
curve (the "spatially ordered"), so the order of the Gaussians is not kept.

Precision: position 1/65535 of the log-domain range (finest near the origin); scales,
DC colour and SH the codebook's and palette's errors (measured in the tests); opacity
1/255; rotation components sqrt(2)/255.

Refused with :class:`spirula.engine.errors.SplatFileError` naming the file: no ``meta.json``, a
version other than 2 (version 1, the 2024 "SOGS" layout with per-property ``shape``, says
so and points at splat-transform for converting it), missing keys or images, an image
that is not a WebP/PNG or has too few texels, a quaternion mode byte outside 252..255, a
label beyond the palette, a corrupt zip.

meta.json is checked against the images before any pixel is decoded:

- ``count`` a whole number from 1 to 2^28, ``shN.count`` 1 to 65,536, ``shN.bands`` 1 to 3,
  the mins and maxs three numbers each, the codebooks 256 numbers each, the file names
  plain names beside meta.json (a wrong JSON type is named, e.g. "meta.json's count is a
  string"); a count above :data:`MAX_PER_BYTE` (8) Gaussians a byte of the data set is
  refused (real SOG: about 14 bytes a Gaussian; more is a wrong count or a bomb);
- every per-Gaussian image has the first one's width and height (texel i is at
  (i % W, i // W): an image of another width would give Gaussian i another's values),
  W x H >= count, and at most 4 count + 65,536 texels (a larger image is not decoded);
  the centroids image is 64 x coefficients wide and at least ceil(count / 64) high;
- an image inflates to at most 64 bytes a texel it may have (checked on the zip entry's
  or file's size before reading it);
- the writer pads ``quats.webp`` beyond the count with alpha 0, no valid mode byte, and
  the reader refuses a mode byte outside 252..255 among the first ``count`` texels: so a
  count raised into our own files' padding is refused ("a count larger than the data").
  A count below the images' texels is valid (the spec ignores trailing texels) and reads
  that many Gaussians.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import SplatFileError
from ..fileio import open_atomic
from .ply import GaussianPly
from .quantize import (SH_COUNT, from_smallest_three, kmeans, kmeans_1d, logit, morton_order, sigmoid,
                       smallest_three)
from .splat_file import MAX_SPLATS, as_gaussians, check_finite, finish, need

__all__ = ["FORMAT", "VERSION", "read_sog", "write_sog", "encode_sog", "default_palette"]

FORMAT = "SOG"
VERSION = 2
_SQRT2 = float(np.sqrt(2.0))
_BANDS = {3: 1, 8: 2, 15: 3}
_MAX_META_BYTES = 16 << 20   # meta.json: codebooks and names, a few KB in practice
MAX_PER_BYTE = 8            # Gaussians a byte of the data set, at most (real SOG: about 1 in 14 bytes)


def default_palette(n: int) -> int:
    """SH palette entries for n Gaussians: a power of two near n / 8, 64 to 65,536 (the
    k-means cost grows with n x palette; the labels are 16-bit)."""
    return int(min(65536, max(64, 2 ** int(np.floor(np.log2(max(n, 1) / 8.0))))))


def _size(n: int) -> tuple[int, int]:
    w = 4 * int(np.ceil(np.sqrt(max(n, 1)) / 4))
    return w, 4 * int(np.ceil(n / w / 4))


def _webp(texels: np.ndarray, w: int, h: int, pad_alpha: int = 255) -> bytes:
    """Lossless WebP of [k, 4] uint8 texels (k <= w h; the rest RGB zero, alpha
    ``pad_alpha``), RGB kept exactly under any alpha."""
    from PIL import Image

    img = np.zeros((h * w, 4), np.uint8)
    img[:, 3] = pad_alpha
    img[:len(texels)] = texels
    buf = io.BytesIO()
    Image.fromarray(img.reshape(h, w, 4), "RGBA").save(buf, format="WEBP", lossless=True, quality=100, method=4,
                                                       exact=True)
    return buf.getvalue()


def _rgba(*cols, alpha=None) -> np.ndarray:
    n = len(cols[0])
    out = np.zeros((n, 4), np.uint8)
    for i, c in enumerate(cols):
        out[:, i] = c
    out[:, 3] = 255 if alpha is None else alpha
    return out


def encode_sog(g: GaussianPly, palette: int | None = None, iterations: int = 8) -> dict[str, bytes]:
    """{file name: bytes} of a SOG v2 data set (meta.json and the images) for N >= 1 Gaussians."""
    g = as_gaussians(g)
    need(len(g) > 0, "<memory>", FORMAT, "no Gaussians to write")
    g = g.subset(morton_order(g.means))
    n = len(g)
    w, h = _size(n)
    files: dict[str, bytes] = {}
    m = np.asarray(g.means, np.float64)
    lg = np.sign(m) * np.log1p(np.abs(m))
    lo, hi = lg.min(axis=0), lg.max(axis=0)
    lo32, hi32 = lo.astype(np.float32).astype(np.float64), hi.astype(np.float32).astype(np.float64)
    span = np.where(hi32 > lo32, hi32 - lo32, 1.0)
    q = np.clip(np.rint((lg - lo32) / span * 65535.0), 0, 65535).astype(np.uint32)
    files["means_l.webp"] = _webp(_rgba(*(q & 0xFF).T), w, h)
    files["means_u.webp"] = _webp(_rgba(*(q >> 8).T), w, h)
    scale_cb, scale_lab = kmeans_1d(g.scales, 256)
    files["scales.webp"] = _webp(_rgba(*scale_lab.reshape(n, 3).T), w, h)
    idx, rest = smallest_three(g.quats)
    qb = np.clip(np.rint(255.0 * (rest * _SQRT2 * 0.5 + 0.5)), 0, 255).astype(np.uint8)
    files["quats.webp"] = _webp(_rgba(*qb.T, alpha=252 + idx), w, h, pad_alpha=0)  # padding: no quaternion
    sh0_cb, sh0_lab = kmeans_1d(g.sh0, 256)
    alpha = np.clip(np.rint(sigmoid(g.opacities) * 255.0), 0, 255).astype(np.uint8)
    files["sh0.webp"] = _webp(_rgba(*sh0_lab.reshape(n, 3).T, alpha=alpha), w, h)
    meta = {"version": VERSION, "asset": {"generator": "Spirula Studio"}, "count": n, "antialias": False,
            "means": {"mins": lo32.tolist(), "maxs": hi32.tolist(), "files": ["means_l.webp", "means_u.webp"]},
            "scales": {"codebook": scale_cb.tolist(), "files": ["scales.webp"]},
            "quats": {"files": ["quats.webp"]},
            "sh0": {"codebook": sh0_cb.tolist(), "files": ["sh0.webp"]}}
    coeffs = g.shN.shape[1]
    if coeffs:
        k = min(int(palette or default_palette(n)), 65536)
        cent, lab = kmeans(np.asarray(g.shN, np.float32).reshape(n, -1), k, iterations, fit_rows=16 * k)
        k = len(cent)
        sh_cb, sh_lab = kmeans_1d(cent, 256)
        rows = -(-k // 64)
        tex = np.zeros((rows * 64 * coeffs, 4), np.uint8)
        tex[:, 3] = 255
        tex[:k * coeffs, :3] = sh_lab.reshape(k * coeffs, 3)   # entry e, coefficient j at texel e * coeffs + j
        files["shN_centroids.webp"] = _webp(tex, 64 * coeffs, rows)
        files["shN_labels.webp"] = _webp(_rgba(lab & 0xFF, lab >> 8), w, h)
        meta["shN"] = {"count": k, "bands": _BANDS[coeffs], "codebook": sh_cb.tolist(),
                       "files": ["shN_centroids.webp", "shN_labels.webp"]}
    files = {"meta.json": json.dumps(meta).encode("utf-8"), **files}
    return files


def write_sog(path: str | os.PathLike, g: GaussianPly, palette: int | None = None, iterations: int = 8) -> int:
    """Write ``g`` as a .sog bundle (a zip of meta.json and the WebP images, stored: the
    images are compressed already) atomically; returns the byte count."""
    g = check_finite(path, FORMAT, g)
    try:
        files = encode_sog(g, palette, iterations)
    except SplatFileError as e:
        raise SplatFileError(path, FORMAT, e.what) from None
    with open_atomic(Path(path)) as f:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
            for name, data in files.items():
                z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    return Path(path).stat().st_size


def _source(path: Path):
    """(meta.json bytes, a function (name, byte limit) -> bytes, the data set's bytes) for
    a .sog zip, a meta.json or a folder. The function refuses a name that is no plain file
    name, a missing file and one larger than the limit (checked before reading it)."""
    p = Path(path)
    if p.is_dir():
        p = p / "meta.json"

    def plain(name) -> str:
        need(isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name, path,
             FORMAT, f"meta.json names the file {name!r}, which is no plain file name beside it")
        return name

    if p.name != "meta.json" and p.is_file() and not zipfile.is_zipfile(p):
        raise SplatFileError(path, FORMAT, "not a zip bundle (a .sog is a zip of meta.json and the images; truncated?)")
    if p.name == "meta.json" or not zipfile.is_zipfile(p):
        need(p.is_file(), path, FORMAT, f"no {p.name} (a SOG data set is a .sog zip or a folder with meta.json)")
        folder = p.parent

        def get(name, limit: int) -> bytes:
            f = folder / plain(name)
            need(f.is_file(), path, FORMAT, f"the image {name} that meta.json names is missing")
            size = f.stat().st_size
            need(size <= limit, path, FORMAT, f"{name} is {size:,} bytes, more than its data can take ({limit:,})")
            return f.read_bytes()

        def total(names) -> int:
            return sum((folder / n).stat().st_size for n in {plain(n) for n in names} if (folder / n).is_file())

        return get(p.name, _MAX_META_BYTES), get, total
    try:
        z = zipfile.ZipFile(p)
        infos = {Path(i.filename).name: i for i in z.infolist()}
        need("meta.json" in infos, path, FORMAT, "the bundle holds no meta.json")

        def get(name, limit: int) -> bytes:
            need(plain(name) in infos, path, FORMAT, f"the image {name} that meta.json names is not in the bundle")
            size = infos[name].file_size
            need(size <= limit, path, FORMAT, f"{name} inflates to {size:,} bytes, more than its data can take "
                 f"({limit:,})")
            try:
                return z.read(infos[name])    # zipfile stops at file_size and checks the CRC
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError) as e:
                why = ("its deflate data is invalid" if isinstance(e, zlib.error) else str(e)
                       if isinstance(e, zipfile.BadZipFile) else "its entry points outside the bundle's data")
                raise SplatFileError(path, FORMAT, f"{name} in the bundle is corrupt ({why})") from None

        return get("meta.json", _MAX_META_BYTES), get, lambda names: p.stat().st_size
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise SplatFileError(path, FORMAT, f"corrupt or truncated zip bundle ({e})") from None


_IMAGE_MODES = ("RGB", "RGBA", "P", "PA", "L", "LA")   # 8 bits a channel; RGBA conversion keeps the values


def _image(path, get, name: str, max_texels: int, shape=None):
    """The image ``name`` opened (size read, pixels not yet decoded): refused when it is
    no image, not 8 bits a channel, of another size than ``shape`` (W, H) when given, or of
    more than ``max_texels`` texels."""
    from PIL import Image, UnidentifiedImageError

    data = get(name, 64 * max_texels + (1 << 16))   # a lossless image never needs 64 bytes a texel
    try:
        img = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise SplatFileError(path, FORMAT, f"the image {name} is no image format Pillow reads (SOG uses lossless "
                             "WebP)") from None
    except Image.DecompressionBombError:
        raise SplatFileError(path, FORMAT, f"the image {name} declares more pixels than Pillow's safety "
                             "limit") from None
    except Exception as e:  # noqa: BLE001 -- Pillow raises many types for a bad header
        raise SplatFileError(path, FORMAT, f"the image {name} has a corrupt header ({e})") from None
    w, h = img.size
    need(img.mode in _IMAGE_MODES, path, FORMAT,
         f"the image {name} is of pixel mode {img.mode} (SOG images have 8 bits a channel: RGB or RGBA)")
    ow, oh = shape or (w, h)
    need((w, h) == (ow, oh), path, FORMAT, f"the image {name} is {w} x {h}; the other images are {ow} x {oh}")
    need(w * h <= max_texels, path, FORMAT, f"the image {name} is {w} x {h}, more texels than its data needs "
         f"(at most {max_texels:,})")
    return img


def _pixels(path, img, name: str, count: int) -> np.ndarray:
    """[count, 4] uint8 RGBA of the first ``count`` texels of ``img`` (row-major)."""
    try:
        img.load()
        a = np.asarray(img.convert("RGBA"), np.uint8).reshape(-1, 4)
    except Exception as e:  # noqa: BLE001 -- Pillow raises many types for bad pixel data
        raise SplatFileError(path, FORMAT, f"the image {name} is corrupt or truncated ({e})") \
            from None
    return a[:count]


def _numbers(path, meta, where: str, length: int) -> np.ndarray:
    """meta.json's list ``where`` (a dotted path) as float64 [length]; refused unless it is a
    list of ``length`` numbers."""
    v = meta
    for key in where.split("."):
        v = v.get(key) if isinstance(v, dict) else None
    ok = isinstance(v, list) and len(v) == length and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
    need(ok, path, FORMAT, f"meta.json's {where} is {_said(v)}; it must be a list of {length} numbers")
    return np.asarray(v, np.float64)


def _said(v) -> str:
    """A short description of a JSON value for an error line ("missing", "1.5", "true",
    'the string "abc"', "a list of 2", "an object")."""
    if v is None:
        return "missing"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    if isinstance(v, str):
        return f"the string {json.dumps(v[:40])}"
    if isinstance(v, list):
        return f"a list of {len(v)}"
    return "an object"


def _integer(path, meta, where: str, lo: int, hi: int) -> int:
    v = meta
    for key in where.split("."):
        v = v.get(key) if isinstance(v, dict) else None
    need(isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi, path, FORMAT,
         f"meta.json's {where} is {_said(v)}; it must be a whole number from {lo:,} to {hi:,}")
    return int(v)


def _files(path, meta, where: str, k: int) -> list[str]:
    v = meta.get(where, {}).get("files") if isinstance(meta.get(where), dict) else None
    need(isinstance(v, list) and len(v) >= k and all(isinstance(x, str) for x in v[:k]), path, FORMAT,
         f"meta.json's {where}.files is {_said(v)}; it must list {k} image file name{'s' if k > 1 else ''}")
    return v[:k]


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # non-finite results are dropped with a note (finish)
def read_sog(path: str | os.PathLike) -> GaussianPly:
    """Read a SOG v2 data set (a .sog bundle, a meta.json or its folder) into [N] Gaussians
    (float32, our axes; see GaussianPly and the module docstring). SplatFileError naming the
    file, the format and the problem for anything malformed or another version, and for a
    data set whose meta.json disagrees with its images (see the module docstring)."""
    raw, get, total = _source(Path(path))
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        where = f" at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise SplatFileError(path, FORMAT, f"meta.json is not valid JSON{where}") from None
    need(isinstance(meta, dict), path, FORMAT, "meta.json is not an object")
    version = meta.get("version")
    if version is None:
        raise SplatFileError(path, FORMAT, "version 1 (the 2024 SOGS layout, no 'version' in meta.json) is not "
                             "supported; convert it to version 2 with splat-transform (`splat-transform in/meta.json "
                             "out.sog`)")
    need(version == VERSION and not isinstance(version, bool), path, FORMAT,
         f"unknown version {version!r} (this reader knows version 2)")
    n = _integer(path, meta, "count", 1, MAX_SPLATS)
    lo, hi = _numbers(path, meta, "means.mins", 3), _numbers(path, meta, "means.maxs", 3)
    scale_cb, sh0_cb = _numbers(path, meta, "scales.codebook", 256), _numbers(path, meta, "sh0.codebook", 256)
    f_means, (f_scales,), (f_quats,), (f_sh0,) = (_files(path, meta, "means", 2), _files(path, meta, "scales", 1),
                                                   _files(path, meta, "quats", 1), _files(path, meta, "sh0", 1))
    has_sh = "shN" in meta
    if has_sh:
        k, bands = _integer(path, meta, "shN.count", 1, 65536), _integer(path, meta, "shN.bands", 1, 3)
        sh_cb = _numbers(path, meta, "shN.codebook", 256)
        f_cent, f_lab = _files(path, meta, "shN", 2)
    names = [*f_means, f_scales, f_quats, f_sh0] + ([f_cent, f_lab] if has_sh else [])
    size = total(["meta.json", *names])
    need(n <= MAX_PER_BYTE * size, path, FORMAT,
         f"meta.json's count {n:,} is more than {MAX_PER_BYTE} Gaussians a byte of the data set's {size:,} bytes: "
         "no SOG compresses that well (a wrong count or a decompression bomb); nothing was decoded")
    max_texels = 4 * n + (1 << 16)   # any layout of W x H >= count, padded; more is a wrong count or a bomb
    first = _image(path, get, f_means[0], max_texels)
    shape = first.size
    need(shape[0] * shape[1] >= n, path, FORMAT,
         f"meta.json's count {n:,} exceeds the {shape[0]} x {shape[1]} = {shape[0] * shape[1]:,} texels of "
         f"{f_means[0]} (wrong count)")
    images = {f_means[0]: first}
    for name in [f_means[1], f_scales, f_quats, f_sh0] + ([f_lab] if has_sh else []):   # one texel a Gaussian
        if name not in images:
            images[name] = _image(path, get, name, max_texels, shape)
    ml, mu = _pixels(path, images[f_means[0]], f_means[0], n), _pixels(path, images[f_means[1]], f_means[1], n)
    nn = lo + (hi - lo) * ((mu[:, :3].astype(np.uint32) << 8) | ml[:, :3]) / 65535.0
    means = np.sign(nn) * np.expm1(np.abs(nn))
    scales = scale_cb[_pixels(path, images[f_scales], f_scales, n)[:, :3]]
    qt = _pixels(path, images[f_quats], f_quats, n)
    bad = np.flatnonzero(qt[:, 3] < 252)
    need(len(bad) == 0, path, FORMAT,
         f"{f_quats} has {len(bad):,} texels of the {n:,} Gaussians whose mode byte (alpha) is outside 252..255, the "
         f"first at Gaussian {bad[0] if len(bad) else 0:,} (a count larger than the data, or a corrupt image)")
    quats = from_smallest_three(qt[:, 3] - 252, (qt[:, :3] / 255.0 - 0.5) * _SQRT2)
    c0 = _pixels(path, images[f_sh0], f_sh0, n)
    shn = np.zeros((n, 0, 3))
    if has_sh:
        coeffs = SH_COUNT[bands]
        rows = -(-k // 64)
        cimg = _image(path, get, f_cent, 64 * coeffs * 1024)
        cw, ch = cimg.size
        need(cw == 64 * coeffs and ch >= rows, path, FORMAT,
             f"{f_cent} is {cw} x {ch}; {k:,} palette entries of {coeffs} coefficients (bands {bands}) need "
             f"{64 * coeffs} x {rows}")
        cent = _pixels(path, cimg, f_cent, rows * 64 * coeffs)
        e = np.arange(k)
        texel = ((e // 64) * 64 * coeffs + (e % 64) * coeffs)[:, None] + np.arange(coeffs)[None, :]
        pal = sh_cb[cent[texel][..., :3]]                          # [k, coeffs, 3]
        lt = _pixels(path, images[f_lab], f_lab, n)
        lab = lt[:, 0].astype(np.int64) | (lt[:, 1].astype(np.int64) << 8)
        need(bool(np.all(lab < k)), path, FORMAT, f"{f_lab} has labels beyond the {k}-entry palette")
        shn = pal[lab]
    return finish(path, FORMAT, means, scales, quats, logit(c0[:, 3] / 255.0, 0.5 / 255.0), sh0_cb[c0[:, :3]], shn, [])
