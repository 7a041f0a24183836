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

The palette is made by k-means (:func:`engine.io.quantize.kmeans`, ``palette`` entries, at
most 65,536) over the Gaussians' SH vectors (fitted on at most 16 rows per entry, then every
Gaussian assigned: on the CPU, so a million Gaussians take minutes); the codebooks by 1-D k-means. Positions keep
our (the PLY's) axes, as the spec says. The writer orders the Gaussians along a Morton
curve (the "spatially ordered"), so the order of the Gaussians is not kept.

Precision: position 1/65535 of the log-domain range (finest near the origin); scales,
DC colour and SH the codebook's and palette's errors (measured in the tests); opacity
1/255; rotation components sqrt(2)/255.

Refused with :class:`engine.errors.SplatFileError` naming the file: no ``meta.json``, a
version other than 2 (version 1, the 2024 "SOGS" layout with per-property ``shape``, says
so and points at splat-transform for converting it), missing keys or images, an image
that is not a WebP/PNG or has too few texels, a quaternion mode byte outside 252..255, a
label beyond the palette, a corrupt zip.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import SplatFileError
from ..fileio import open_atomic
from .ply import GaussianPly
from .quantize import (SH_COUNT, from_smallest_three, kmeans, kmeans_1d, logit, morton_order, sigmoid,
                       smallest_three)
from .splat_file import as_gaussians, check_finite, finish, need

__all__ = ["FORMAT", "VERSION", "read_sog", "write_sog", "encode_sog", "default_palette"]

FORMAT = "SOG"
VERSION = 2
_SQRT2 = float(np.sqrt(2.0))
_BANDS = {3: 1, 8: 2, 15: 3}


def default_palette(n: int) -> int:
    """SH palette entries for n Gaussians: a power of two near n / 8, 64 to 65,536 (the
    k-means cost grows with n x palette; the labels are 16-bit)."""
    return int(min(65536, max(64, 2 ** int(np.floor(np.log2(max(n, 1) / 8.0))))))


def _size(n: int) -> tuple[int, int]:
    w = 4 * int(np.ceil(np.sqrt(max(n, 1)) / 4))
    return w, 4 * int(np.ceil(n / w / 4))


def _webp(texels: np.ndarray, w: int, h: int) -> bytes:
    """Lossless WebP of [k, 4] uint8 texels (k <= w h, the rest zero), RGB kept exactly
    under any alpha."""
    from PIL import Image

    img = np.zeros((h * w, 4), np.uint8)
    img[:, 3] = 255
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
    files["quats.webp"] = _webp(_rgba(*qb.T, alpha=252 + idx), w, h)
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
    """(meta.json bytes, a function name -> bytes) for a .sog zip, a meta.json or a folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "meta.json"
    if p.name == "meta.json" or not zipfile.is_zipfile(p):
        need(p.is_file(), path, FORMAT, f"no {p.name} (a SOG data set is a .sog zip or a folder with meta.json)")
        folder = p.parent

        def get(name: str) -> bytes:
            f = folder / name
            need(f.is_file(), path, FORMAT, f"the image {name} that meta.json names is missing")
            return f.read_bytes()

        return p.read_bytes(), get
    try:
        z = zipfile.ZipFile(p)
        names = {Path(i).name: i for i in z.namelist()}
        need("meta.json" in names, path, FORMAT, "the bundle holds no meta.json")

        def get(name: str) -> bytes:
            need(name in names, path, FORMAT, f"the image {name} that meta.json names is not in the bundle")
            return z.read(names[name])

        return z.read(names["meta.json"]), get
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise SplatFileError(path, FORMAT, f"corrupt or truncated zip bundle ({e})") from None


def _texels(path, get, name: str, count: int) -> np.ndarray:
    from PIL import Image

    try:
        img = Image.open(io.BytesIO(get(name)))
        img.load()
    except SplatFileError:
        raise
    except Exception as e:  # noqa: BLE001 -- Pillow raises many types for a bad image
        raise SplatFileError(path, FORMAT, f"the image {name} cannot be decoded ({e})") from None
    a = np.asarray(img.convert("RGBA"), np.uint8).reshape(-1, 4)
    need(len(a) >= count, path, FORMAT, f"the image {name} has {len(a)} texels for {count} Gaussians (wrong count)")
    return (a[:count] if count else a).astype(np.int64)  # count 0: every texel


def read_sog(path: str | os.PathLike) -> GaussianPly:
    """Read a SOG v2 data set (a .sog bundle, a meta.json or its folder) into [N] Gaussians
    (float32, our axes; see GaussianPly and the module docstring). SplatFileError naming the
    file, the format and the problem for anything malformed or another version."""
    raw, get = _source(Path(path))
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise SplatFileError(path, FORMAT, f"meta.json is not JSON ({e})") from None
    need(isinstance(meta, dict), path, FORMAT, "meta.json is not an object")
    version = meta.get("version")
    if version is None:
        raise SplatFileError(path, FORMAT, "version 1 (the 2024 SOGS layout, no 'version' in meta.json) is not "
                             "supported; convert it to version 2 with splat-transform (`splat-transform in/meta.json "
                             "out.sog`)")
    need(version == VERSION, path, FORMAT, f"unknown version {version!r} (this reader knows version 2)")
    try:
        n = int(meta["count"])
        lo, hi = np.asarray(meta["means"]["mins"], np.float64), np.asarray(meta["means"]["maxs"], np.float64)
        scale_cb = np.asarray(meta["scales"]["codebook"], np.float64)
        sh0_cb = np.asarray(meta["sh0"]["codebook"], np.float64)
        f_means, f_scales = meta["means"]["files"], meta["scales"]["files"][0]
        f_quats, f_sh0 = meta["quats"]["files"][0], meta["sh0"]["files"][0]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise SplatFileError(path, FORMAT, f"meta.json lacks or mangles {e}") from None
    need(n > 0 and lo.shape == (3,) and hi.shape == (3,) and len(scale_cb) == 256 and len(sh0_cb) == 256, path, FORMAT,
         "meta.json: a count, three mins and maxs and 256-entry codebooks are required")
    ml, mu = _texels(path, get, f_means[0], n), _texels(path, get, f_means[1], n)
    nn = lo + (hi - lo) * ((mu[:, :3] << 8) | ml[:, :3]) / 65535.0
    means = np.sign(nn) * np.expm1(np.abs(nn))
    scales = scale_cb[_texels(path, get, f_scales, n)[:, :3]]
    qt = _texels(path, get, f_quats, n)
    need(bool(np.all((qt[:, 3] >= 252) & (qt[:, 3] <= 255))), path, FORMAT,
         "quats.webp has a mode byte (alpha) outside 252..255")
    quats = from_smallest_three(qt[:, 3] - 252, (qt[:, :3] / 255.0 - 0.5) * _SQRT2)
    c0 = _texels(path, get, f_sh0, n)
    shn = np.zeros((n, 0, 3))
    if "shN" in meta:
        try:
            k, bands = int(meta["shN"]["count"]), int(meta["shN"]["bands"])
            sh_cb = np.asarray(meta["shN"]["codebook"], np.float64)
            f_cent, f_lab = meta["shN"]["files"][:2]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise SplatFileError(path, FORMAT, f"meta.json's shN lacks or mangles {e}") from None
        need(bands in (1, 2, 3) and len(sh_cb) == 256 and 0 < k <= 65536, path, FORMAT,
             f"meta.json's shN: bands {bands}, {len(sh_cb)} codebook entries, count {k}")
        coeffs = SH_COUNT[bands]
        cent = _texels(path, get, f_cent, 0)
        need(len(cent) >= -(-k // 64) * 64 * coeffs, path, FORMAT,
             f"{f_cent} has {len(cent)} texels for {k} palette entries of {coeffs} coefficients")
        e = np.arange(k)
        texel = ((e // 64) * 64 * coeffs + (e % 64) * coeffs)[:, None] + np.arange(coeffs)[None, :]
        pal = sh_cb[cent[texel][..., :3]]                          # [k, coeffs, 3]
        lt = _texels(path, get, f_lab, n)
        lab = lt[:, 0] | (lt[:, 1] << 8)
        need(bool(np.all(lab < k)), path, FORMAT, f"{f_lab} has labels beyond the {k}-entry palette")
        shn = pal[lab]
    return finish(path, FORMAT, means, scales, quats, logit(c0[:, 3] / 255.0, 0.5 / 255.0), sh0_cb[c0[:, :3]], shn, [])
