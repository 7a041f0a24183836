"""What every splat format reader and writer shares: reading a file's bytes, refusing with
a :class:`spirula.engine.errors.SplatFileError` that names the file, the format and the problem,
writing atomically (spirula/engine/fileio.py: a temporary file renamed into place, so an error
leaves no partial file and an existing one untouched), and the checks on decoded Gaussians
(spirula/engine/io/splat_checks.py: non-finite values and zero rotations are dropped with a note,
as :func:`spirula.engine.io.ply.read_ply` does)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import SplatFileError
from ..fileio import open_atomic
from .ply import GaussianPly
from .splat_checks import invalid_values

__all__ = ["read_bytes", "write_bytes", "need", "finish", "as_gaussians", "check_finite", "MAX_SPLATS"]

MAX_SPLATS = 1 << 28   # a header claiming more is refused before anything is allocated


def read_bytes(path: str | os.PathLike, fmt: str) -> bytes:
    """The whole file; SplatFileError naming it when it cannot be read or is empty."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise SplatFileError(path, fmt, f"cannot read ({e.strerror or e})") from e
    if not data:
        raise SplatFileError(path, fmt, "the file is empty")
    return data


def write_bytes(path: str | os.PathLike, data: bytes | list[bytes]) -> int:
    """Write ``data`` (one buffer or several, in order) to ``path`` atomically; returns the
    byte count."""
    parts = [data] if isinstance(data, (bytes, bytearray, memoryview)) else list(data)
    with open_atomic(Path(path)) as f:
        for part in parts:
            f.write(part)
    return sum(len(p) for p in parts)


def need(ok: bool, path, fmt: str, what: str) -> None:
    """Raise SplatFileError(path, fmt, what) unless ``ok``."""
    if not ok:
        raise SplatFileError(path, fmt, what)


def as_gaussians(g: GaussianPly | Mapping) -> GaussianPly:
    """A GaussianPly from one or a dict with means, scales, quats, opacities, sh0, shN
    (float32 C arrays, shapes checked by GaussianPly.validate)."""
    if not isinstance(g, GaussianPly):
        g = GaussianPly(**{k: np.asarray(g[k], np.float32) for k in
                           ("means", "scales", "quats", "opacities", "sh0", "shN")})
    g.validate()
    return g


def check_finite(path, fmt: str, g: GaussianPly) -> GaussianPly:
    """``g`` as a GaussianPly, or SplatFileError naming the output file when a Gaussian
    has a NaN/Inf value or a zero rotation (nothing is written then)."""
    g = as_gaussians(g)
    n = len(g)
    bad = invalid_values(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN.reshape(n, 3 * g.shN.shape[1]))
    found = {r: int(m.sum()) for r, m in bad.items() if m.any()}
    if found:
        raise SplatFileError(path, fmt, "not written: Gaussians with invalid values ("
                             + ", ".join(f"{r}: {c}" for r, c in found.items()) + ")")
    return g


def finish(path, fmt: str, means, scales, quats, opacities, sh0, shN, notes: list[str]) -> GaussianPly:
    """A GaussianPly (float32) of decoded arrays, without the Gaussians that have a
    non-finite value or a zero rotation; each drop is a note naming the file and the count
    per reason (``notes`` carries the decoder's own notes, e.g. an SH degree cut)."""
    f32 = lambda a: np.ascontiguousarray(a, np.float32)  # noqa: E731
    g = GaussianPly(means=f32(means), scales=f32(scales), quats=f32(quats), opacities=f32(opacities),
                    sh0=f32(sh0), shN=f32(shN))
    n = len(g)
    bad = invalid_values(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN.reshape(n, 3 * g.shN.shape[1]))
    drop = np.zeros(n, bool)
    by = {}
    for reason, mask in bad.items():
        if mask.any():
            by[reason] = int(mask.sum())
            drop |= mask
    if drop.any():
        g = g.subset(~drop)
        counts = ", ".join(f"{r}: {c}" for r, c in by.items())
        notes = notes + [f"{path}: {fmt} file: dropped {int(drop.sum())} of {n} Gaussians with invalid values ({counts})"]
    g.dropped, g.dropped_by, g.notes = int(drop.sum()), by, list(notes)
    return g
