"""The ``.splat`` file of antimatter15/splat (the web viewer's own format; read by SuperSplat,
splat-transform, Spark, gsplat.js and others). There is no written spec beyond the viewer's
converter; the layout it fixes, which every reader follows:

- no header and no magic: the file is N records of 32 bytes, N = file size / 32;
- per record, little-endian: position x, y, z as float32 (12 bytes, world units, the PLY's
  axes); scale x, y, z as float32 (12 bytes, the standard deviations themselves, not their
  log); colour r, g, b, a as uint8 (4 bytes): ``rgb = round(255 * (0.5 + SH_C0 * sh0))``
  clipped, ``a = round(255 * sigmoid(opacity))``; rotation as 4 uint8 (4 bytes) in the
  order w, x, y, z: ``round(128 * q / |q| + 128)`` clipped to 0..255.
- No spherical harmonics beyond the DC colour: higher SH are dropped on write (with a note
  in the write's return) and read back as degree 0.

Precision: positions and scales exact (float32); colour 1/255 (0.5/255 after rounding);
opacity 1/255 in alpha; rotation components 1/128 before renormalising. A colour outside
[0, 1] (which the DC term allows) is clipped.

Refused (:class:`spirula.engine.errors.SplatFileError` naming the file): a size that is not a
multiple of 32 (truncated or not a .splat), an empty file.
"""

from __future__ import annotations

import os

import numpy as np

from .ply import GaussianPly
from .quantize import logit, rgb_from_sh0, sh0_from_rgb, sigmoid, unit_quats
from .splat_file import as_gaussians, check_finite, finish, need, read_bytes, write_bytes

__all__ = ["FORMAT", "BYTES_PER_SPLAT", "read_splat", "write_splat", "encode_splat"]

FORMAT = ".splat"
BYTES_PER_SPLAT = 32
_RECORD = np.dtype([("pos", "<f4", 3), ("scale", "<f4", 3), ("rgba", "u1", 4), ("rot", "u1", 4)])


def encode_splat(g: GaussianPly) -> bytes:
    """The file's bytes for N Gaussians (see the module docstring)."""
    g = as_gaussians(g)
    rec = np.zeros(len(g), _RECORD)
    rec["pos"] = g.means
    rec["scale"] = np.exp(np.asarray(g.scales, np.float64)).astype(np.float32)
    rgba = np.empty((len(g), 4))
    rgba[:, :3] = rgb_from_sh0(g.sh0)
    rgba[:, 3] = sigmoid(g.opacities)
    rec["rgba"] = np.clip(np.rint(rgba * 255.0), 0, 255).astype(np.uint8)
    rec["rot"] = np.clip(np.rint(unit_quats(g.quats) * 128.0 + 128.0), 0, 255).astype(np.uint8)
    return rec.tobytes()


def write_splat(path: str | os.PathLike, g: GaussianPly) -> int:
    """Write ``g`` as a .splat file atomically; returns the byte count (32 N)."""
    g = check_finite(path, FORMAT, g)
    return write_bytes(path, encode_splat(g))


def read_splat(path: str | os.PathLike) -> GaussianPly:
    """Read a .splat file: [N] Gaussians, SH degree 0, float32 (see GaussianPly). Records
    with non-finite values or a zero rotation are dropped with a note. SplatFileError for
    an empty file or one whose size is not a multiple of 32 bytes."""
    data = read_bytes(path, FORMAT)
    need(len(data) % BYTES_PER_SPLAT == 0, path, FORMAT,
         f"{len(data)} bytes is not a whole number of 32-byte records (truncated, or not a .splat file)")
    rec = np.frombuffer(data, _RECORD)
    n = len(rec)
    with np.errstate(divide="ignore", invalid="ignore"):
        scales = np.log(rec["scale"].astype(np.float64))
    rgba = rec["rgba"].astype(np.float64) / 255.0
    quats = (rec["rot"].astype(np.float64) - 128.0) / 128.0
    return finish(path, FORMAT, rec["pos"], scales, quats, logit(rgba[:, 3], 0.5 / 255.0), sh0_from_rgb(rgba[:, :3]),
                  np.zeros((n, 0, 3)), [])
