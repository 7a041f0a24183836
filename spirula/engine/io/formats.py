"""The splat file formats by name: which one a path holds, reading and writing any of them,
and the size each would have (the studio's export chooser).

Formats (name: module, spec in its docstring):

- ``ply``: the 3DGS PLY, lossless, the default (spirula/engine/io/ply.py);
- ``compressed-ply``: PlayCanvas / SuperSplat's chunked PLY (spirula/engine/io/compressed_ply.py);
- ``spz``: Niantic's SPZ, version 4 by default, 2 and 3 on request (spirula/engine/io/spz.py);
- ``sog``: PlayCanvas's SOG version 2, a .sog bundle (spirula/engine/io/sog.py);
- ``splat``: antimatter15's .splat, no SH (spirula/engine/io/dot_splat.py);
- ``glb`` / ``gltf``: glTF 2.0 with KHR_gaussian_splatting, binary or JSON with the buffer
  embedded (spirula/engine/io/gltf.py).

Export only (:data:`EXPORT_FORMATS`): ``html``, one page that shows the splats in a browser
(spirula/engine/io/html.py); it is written, never read.

Detection (:func:`detect`) by the name first, then the first bytes: a folder or a
``meta.json`` is SOG; ``.sog`` (a zip), ``.spz`` (gzip or "NGSP"), ``.splat``, ``.glb``, ``.gltf``; a ``.ply``
is compressed when its header has the ``chunk`` element and ``packed_*`` properties. An
unknown extension is sniffed: zip -> sog, gzip or NGSP -> spz, "ply" -> ply, "glTF" -> glb. Anything
else is a :class:`spirula.engine.errors.SplatFileError` naming the file and the formats known.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from ..errors import SplatFileError
from .ply import GaussianPly, PlyWarning

__all__ = ["FORMATS", "EXPORT_FORMATS", "EXTENSIONS", "SPLAT_SUFFIXES", "detect", "format_for_output", "read_any",
           "open_splat_file",
           "write_any", "estimated_bytes", "is_splat_file"]

FORMATS = ("ply", "compressed-ply", "spz", "sog", "splat", "glb", "gltf")   # read and written
EXPORT_FORMATS = FORMATS + ("html",)                                      # written
EXTENSIONS = {"ply": ".ply", "compressed-ply": ".compressed.ply", "spz": ".spz", "sog": ".sog", "splat": ".splat",
              "glb": ".glb", "gltf": ".gltf", "html": ".html"}
LABELS = {"ply": "PLY (lossless)", "compressed-ply": "compressed PLY (SuperSplat)", "spz": "SPZ (Niantic)",
          "sog": "SOG (PlayCanvas)", "splat": ".splat (no SH)", "glb": "glTF binary (KHR_gaussian_splatting)",
          "gltf": "glTF JSON (KHR_gaussian_splatting)", "html": "web page (SuperSplat viewer)"}
# what the studio opens as splats (plus meta.json); not .glb / .gltf, which the studio opens as meshes
SPLAT_SUFFIXES = (".ply", ".spz", ".sog", ".splat")

# Bytes per Gaussian of the two entropy-coded formats, by SH degree: degree 3 as measured on
# book and fox trained 1,500 steps (benchmarks/results/formats-2026-12-02/README.md: SPZ v4
# 16.1-16.8, SOG 13.4-15.0); lower degrees scaled down by their smaller raw records. A model
# trained longer has busier high SH bands and compresses less (a session before measured
# SPZ 21.3 and SOG 25.9 B at degree 3), hence "about" in the chooser.
_SPZ_BYTES = {0: 12.0, 1: 13.5, 2: 15.0, 3: 16.5}
_SOG_BYTES = {0: 11.0, 1: 12.5, 2: 13.5, 3: 14.2}


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
    if head == b"glTF":
        return "glb"
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
    fmt = {".sog": "sog", ".spz": "spz", ".splat": "splat", ".ply": "ply", ".glb": "glb", ".gltf": "gltf"}.get(
        p.suffix.lower())
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
    elif fmt in ("glb", "gltf"):
        from .gltf import read_gltf as reader
    else:
        raise ValueError(f"unknown splat format {fmt!r}; one of {', '.join(FORMATS)}")
    g = reader(path)
    for note in g.notes if warn else ():
        warnings.warn(note, PlyWarning, stacklevel=2)
    return g


def open_splat_file(path: str | os.PathLike, *, warn: bool = True) -> GaussianPly:
    """What the viewer opens: :func:`read_any`, except that a PLY point cloud or mesh is
    shown as round splats (spirula/engine/io/ply_points.py's :func:`open_splats`)."""
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
    if fmt in ("glb", "gltf"):
        from .gltf import write_gltf

        return write_gltf(path, g, binary=fmt == "glb")
    if fmt == "html":
        from .html import write_html

        return write_html(path, g, sog_palette)
    raise ValueError(f"unknown splat format {fmt!r}; one of {', '.join(FORMATS)}")


def estimated_bytes(fmt: str, n: int, sh_degree: int) -> tuple[int, bool]:
    """(bytes, exact) of ``n`` Gaussians of ``sh_degree`` (0..3) in ``fmt``: exact for PLY,
    compressed PLY and .splat (fixed-size records; headers counted), an estimate from the
    measured bytes per Gaussian (``_SPZ_BYTES``, ``_SOG_BYTES``) for SPZ and SOG, whose
    entropy coding depends on the data, for glTF (:func:`_gltf_bytes`: the arrays exact,
    the JSON about) and for the HTML page (SOG's estimate in base64 plus the viewer)."""
    m = {0: 0, 1: 3, 2: 8, 3: 15}[sh_degree]
    if fmt == "ply":
        from .ply import _header_bytes

        return len(_header_bytes(n, sh_degree)) + n * 4 * (17 + 3 * m), True
    if fmt == "compressed-ply":
        from .compressed_ply import CHUNK, header_bytes

        return len(header_bytes(n, m)) + -(-n // CHUNK) * 72 + n * (16 + 3 * m), True
    if fmt == "splat":
        return 32 * n, True
    if fmt in ("glb", "gltf"):
        return _gltf_bytes(n, sh_degree, fmt == "glb"), False
    if fmt == "html":
        from .html import viewer_bytes

        sog = int(round(n * _SOG_BYTES[sh_degree])) + 4096
        return -(-sog // 3) * 4 + viewer_bytes() + 3000, False
    if fmt == "spz":
        return int(round(n * _SPZ_BYTES[sh_degree])) + 64, False
    if fmt == "sog":
        return int(round(n * _SOG_BYTES[sh_degree])) + 4096, False
    raise ValueError(f"unknown splat format {fmt!r}; one of {', '.join(FORMATS)}")


def _gltf_bytes(n: int, sh_degree: int, binary: bool) -> int:
    """About the size of a glTF of ``n`` Gaussians: 4 bytes per float (positions 3, colour
    4, rotation 4, scale 3, opacity 1, SH 3 per coefficient), base64 (4/3) in a .gltf, plus
    the JSON (about 1 kB and 170 bytes per attribute; its digits depend on the data)."""
    floats = 3 + 4 + 4 + 3 + 1 + 3 * (sh_degree + 1) ** 2
    data = 4 * floats * n
    attrs = 5 + (sh_degree + 1) ** 2
    return (data if binary else -(-data // 3) * 4) + 1000 + 170 * attrs
