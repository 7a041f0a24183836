"""The splat file formats by name: which one a path holds, reading and writing any of them,
and the size each would have (the studio's export chooser).

Formats (name: module, spec in its docstring):

- ``ply``: the 3DGS PLY, lossless, the default (engine/io/ply.py);
- ``compressed-ply``: PlayCanvas / SuperSplat's chunked PLY (engine/io/compressed_ply.py);
- ``spz``: Niantic's SPZ, version 4 by default, 2 and 3 on request (engine/io/spz.py);
- ``sog``: PlayCanvas's SOG version 2, a .sog bundle (engine/io/sog.py);
- ``splat``: antimatter15's .splat, no SH (engine/io/dot_splat.py).

Detection (:func:`detect`) by the name first, then the first bytes: a folder or a
``meta.json`` is SOG; ``.sog`` (a zip), ``.spz`` (gzip or "NGSP"), ``.splat``; a ``.ply``
is compressed when its header has the ``chunk`` element and ``packed_*`` properties. An
unknown extension is sniffed: zip -> sog, gzip or NGSP -> spz, "ply" -> ply. Anything
else is a :class:`engine.errors.SplatFileError` naming the file and the formats known.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from ..errors import SplatFileError
from .ply import GaussianPly, PlyWarning

__all__ = ["FORMATS", "EXTENSIONS", "SPLAT_SUFFIXES", "detect", "format_for_output", "read_any", "open_splat_file",
           "write_any", "estimated_bytes", "is_splat_file"]

FORMATS = ("ply", "compressed-ply", "spz", "sog", "splat")
EXTENSIONS = {"ply": ".ply", "compressed-ply": ".compressed.ply", "spz": ".spz", "sog": ".sog", "splat": ".splat"}
LABELS = {"ply": "PLY (lossless)", "compressed-ply": "compressed PLY (SuperSplat)", "spz": "SPZ (Niantic)",
          "sog": "SOG (PlayCanvas)", "splat": ".splat (no SH)"}
SPLAT_SUFFIXES = (".ply", ".spz", ".sog", ".splat")   # what the studio opens as splats (plus meta.json)

# Bytes per Gaussian of the two entropy-coded formats, measured on trained scenes
# (benchmarks/results/2026-12-02-formats/README.md: book and fox at SH degree 3); by SH degree.
_SPZ_BYTES = {0: 14.0, 1: 16.5, 2: 19.0, 3: 21.3}
_SOG_BYTES = {0: 14.5, 1: 20.5, 2: 23.5, 3: 25.9}


def _sniff(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return None
    if head[:4] == b"PK\x03\x04":
        return "sog"
    if head[:2] == b"\x1f\x8b" or head == b"NGSP":
        return "spz"
    if head[:3] == b"ply":
        return "ply"
    return None


def detect(path: str | os.PathLike) -> str:
    """The format name of the file or folder ``path`` (see the module docstring);
    SplatFileError when it is none of them or does not exist."""
    p = Path(path)
    if p.is_dir():
        if (p / "meta.json").is_file():
            return "sog"
        raise SplatFileError(p, "splat", "a folder that holds no meta.json (a SOG data set); the splat formats are "
                             + ", ".join(FORMATS))
    if not p.is_file():
        raise SplatFileError(p, "splat", "no such file")
    name = p.name.lower()
    fmt = {".sog": "sog", ".spz": "spz", ".splat": "splat", ".ply": "ply"}.get(p.suffix.lower())
    if name == "meta.json":
        fmt = "sog"
    elif fmt is None:
        fmt = _sniff(p)
    if fmt == "ply":
        from .compressed_ply import is_compressed_ply

        return "compressed-ply" if is_compressed_ply(p) else "ply"
    if fmt is None:
        raise SplatFileError(p, "splat", f"'{p.suffix or 'no extension'}' is none of the splat formats "
                             f"({', '.join(EXTENSIONS.values())}, or a SOG folder / meta.json)")
    return fmt


def is_splat_file(path: str | os.PathLike) -> bool:
    """True when ``path`` has a splat extension or is a SOG meta.json (no reading)."""
    p = Path(path)
    return p.suffix.lower() in SPLAT_SUFFIXES or p.name.lower() == "meta.json"


def format_for_output(path: str | os.PathLike) -> str:
    """The format an output path's name asks for: ``*.compressed.ply`` -> compressed-ply,
    ``.ply``, ``.spz``, ``.sog``, ``.splat``; ValueError for another name."""
    name = Path(path).name.lower()
    if name.endswith(".compressed.ply"):
        return "compressed-ply"
    for fmt, ext in EXTENSIONS.items():
        if name.endswith(ext):
            return fmt
    raise ValueError(f"{path}: cannot tell the format from the name; use one of {', '.join(EXTENSIONS.values())} "
                     "or give --format")


def read_any(path: str | os.PathLike, fmt: str | None = None, *, warn: bool = True) -> GaussianPly:
    """[N] Gaussians from a file of any splat format (``fmt`` or :func:`detect`'s). The
    repairs (dropped invalid Gaussians, SH cut) are in ``result.notes`` and issued as
    PlyWarnings unless ``warn`` is False. SplatFileError / PlyError naming the file."""
    fmt = fmt or detect(path)
    if fmt == "ply":
        from .ply import read_ply

        return read_ply(path, warn=warn)
    if fmt == "compressed-ply":
        from .compressed_ply import read_compressed_ply as reader
    elif fmt == "spz":
        from .spz import read_spz as reader
    elif fmt == "sog":
        from .sog import read_sog as reader
    elif fmt == "splat":
        from .dot_splat import read_splat as reader
    else:
        raise ValueError(f"unknown splat format {fmt!r}; one of {', '.join(FORMATS)}")
    g = reader(path)
    for note in g.notes if warn else ():
        warnings.warn(note, PlyWarning, stacklevel=2)
    return g


def open_splat_file(path: str | os.PathLike, *, warn: bool = True) -> GaussianPly:
    """What the viewer opens: :func:`read_any`, except that a PLY point cloud or mesh is
    shown as round splats (engine/io/ply_points.py's :func:`open_splats`)."""
    fmt = detect(path)
    if fmt == "ply":
        from .ply_points import open_splats

        return open_splats(path, warn=warn)
    return read_any(path, fmt, warn=warn)


def write_any(path: str | os.PathLike, g: GaussianPly, fmt: str | None = None, *, spz_version: int = 4,
              sog_palette: int | None = None) -> int:
    """Write ``g`` to ``path`` in ``fmt`` (default: :func:`format_for_output` of the name),
    atomically; returns the bytes written."""
    fmt = fmt or format_for_output(path)
    if fmt == "ply":
        from .ply import write_ply

        Path(path).parent.mkdir(parents=True, exist_ok=True)  # as open_atomic does for the others
        write_ply(path, g)
        return Path(path).stat().st_size
    if fmt == "compressed-ply":
        from .compressed_ply import write_compressed_ply

        return write_compressed_ply(path, g)
    if fmt == "spz":
        from .spz import write_spz

        return write_spz(path, g, spz_version)
    if fmt == "sog":
        from .sog import write_sog

        return write_sog(path, g, sog_palette)
    if fmt == "splat":
        from .dot_splat import write_splat

        return write_splat(path, g)
    raise ValueError(f"unknown splat format {fmt!r}; one of {', '.join(FORMATS)}")


def estimated_bytes(fmt: str, n: int, sh_degree: int) -> tuple[int, bool]:
    """(bytes, exact) of ``n`` Gaussians of ``sh_degree`` (0..3) in ``fmt``: exact for PLY,
    compressed PLY and .splat (fixed-size records; headers counted), an estimate from the
    measured bytes per Gaussian (``_SPZ_BYTES``, ``_SOG_BYTES``) for SPZ and SOG, whose
    entropy coding depends on the data."""
    m = {0: 0, 1: 3, 2: 8, 3: 15}[sh_degree]
    if fmt == "ply":
        from .ply import _header_bytes

        return len(_header_bytes(n, sh_degree)) + n * 4 * (17 + 3 * m), True
    if fmt == "compressed-ply":
        from .compressed_ply import CHUNK, header_bytes

        return len(header_bytes(n, m)) + -(-n // CHUNK) * 72 + n * (16 + 3 * m), True
    if fmt == "splat":
        return 32 * n, True
    if fmt == "spz":
        return int(round(n * _SPZ_BYTES[sh_degree])) + 64, False
    if fmt == "sog":
        return int(round(n * _SOG_BYTES[sh_degree])) + 4096, False
    raise ValueError(f"unknown splat format {fmt!r}; one of {', '.join(FORMATS)}")
