"""The export panel's format chooser, without Qt: each splat format with the size the
current Gaussians would have in it (spirula/engine/io/formats.py estimated_bytes: exact for PLY,
compressed PLY and .splat; an estimate, marked "about", for SPZ, SOG, glTF and the web page), and the file
dialog's filter and default name for it."""

from __future__ import annotations

from dataclasses import dataclass

from spirula.engine.io.formats import EXPORT_FORMATS, EXTENSIONS, LABELS, estimated_bytes

FILTERS = {"ply": "3DGS PLY (*.ply)", "compressed-ply": "Compressed PLY (*.compressed.ply)", "spz": "SPZ (*.spz)",
           "sog": "SOG bundle (*.sog)", "splat": ".splat (*.splat)", "glb": "glTF binary (*.glb)",
           "gltf": "glTF JSON (*.gltf)", "html": "Web page (*.html)"}


@dataclass(frozen=True)
class Choice:
    format: str         # spirula/engine/io/formats.py name
    label: str          # what the chooser shows, with the size
    size: int           # bytes (estimated for SPZ and SOG)
    exact: bool
    filter: str         # QFileDialog name filter
    extension: str


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} GB"


def choices(num_gaussians: int, sh_degree: int) -> list[Choice]:
    """One Choice per format, in EXPORT_FORMATS order (PLY first: the lossless default)."""
    out = []
    for fmt in EXPORT_FORMATS:
        size, exact = estimated_bytes(fmt, max(int(num_gaussians), 0), sh_degree)
        per = f", {size / num_gaussians:.0f} B/splat" if num_gaussians else ""
        out.append(Choice(fmt, f"{LABELS[fmt]} — {'' if exact else 'about '}{human_bytes(size)}{per}", size, exact,
                          FILTERS[fmt], EXTENSIONS[fmt]))
    return out


def default_name(folder: str, fmt: str) -> str:
    """The dialog's starting file name: <folder>/export<ext> (or export<ext> without one)."""
    name = f"export{EXTENSIONS[fmt]}"
    return f"{folder.rstrip('/')}/{name}" if folder else name
