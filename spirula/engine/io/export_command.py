"""`spirula export <project|file> --format spz|sog|compressed-ply|splat|glb|gltf|html|ply -o <file>`:
convert trained Gaussians (a project folder's splat.ply, or any splat file) into another
splat format (registered by spirula/engine/cli/main.py; the work is :func:`export_splats`, which
only reports through ``emit`` so the studio can run it too).

The input is a project folder (its ``splat.ply``; a `spirula run` project's in exports/), a SOG folder, or a file of any format
spirula/engine/io/formats.py reads. The format is ``--format`` or, when that is left out, the
output name's (``*.compressed.ply``, ``.ply``, ``.spz``, ``.sog``, ``.splat``, ``.glb``, ``.gltf``,
``.html``: a page that shows the splats, spirula/engine/io/html.py). The output is written
atomically: an error leaves no partial file and an existing file untouched.

The splats are edited first (spirula/engine/io/splat_edit.py): ``--edit <edit.json>`` applies that
edit, and by default a project's own edit file (``<project>/edit.json``, the studio's Edit
menu saves it) is applied to the project's splat.ply with a one-line note (``--no-edit``:
not); ``--crop X0 Y0 Z0 X1 Y1 Z1`` keeps the splats whose centres lie in that axis-aligned
box (world units), after the edit. An edit made for another splat file is refused in one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from ..errors import SplatFileError
from ..fileio import remove_temporaries_of
from . import formats

__all__ = ["add_parser", "cmd_export", "export_splats", "source_file"]


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="convert trained Gaussians to SPZ, SOG, compressed PLY, .splat, glTF, PLY "
                                      "or a web page (.html)",
                       description="Read a project's splat.ply (or any splat file: .ply, .compressed.ply, .spz, .sog, "
                                   "SOG meta.json, .splat, .glb, .gltf) and write it in another format, atomically.")
    p.add_argument("source", type=Path, help="project folder (its splat.ply) or a splat file")
    p.add_argument("-o", "--output", type=Path, required=True, help="the file to write")
    p.add_argument("--format", choices=formats.EXPORT_FORMATS, default=None,
                   help="output format (default: from the output name: .spz, .sog, .compressed.ply, .splat, .glb, "
                        ".gltf, .html (a page that shows the splats in a browser), .ply)")
    p.add_argument("--spz-version", type=int, choices=(2, 3, 4), default=4,
                   help="SPZ version to write (default 4, zstd; 3 and 2 are gzip, for older readers)")
    p.add_argument("--sog-palette", type=int, default=None,
                   help="SOG: SH palette entries, 64..65536 (default: about a power of two near N / 8)")
    p.add_argument("--crop", type=float, nargs=6, metavar=("X0", "Y0", "Z0", "X1", "Y1", "Z1"), default=None,
                   help="keep only the splats whose centres lie in this axis-aligned box (world units)")
    e = p.add_mutually_exclusive_group()
    e.add_argument("--edit", type=Path, default=None,
                   help="apply this edit file (default: the project's edit.json, when there is one)")
    e.add_argument("--no-edit", action="store_true", help="do not apply the project's edit.json")


def source_file(source: Path) -> Path:
    """The splat file a source names: a project folder's splat.ply (`spirula train`'s at its
    top, `spirula run`'s in exports/ or train/), a SOG folder itself, or the file.
    SplatFileError naming the folder when it holds none of them."""
    source = Path(source)
    if source.is_dir():
        for ply in (source / "splat.ply", source / "exports" / "splat.ply", source / "train" / "splat.ply"):
            if ply.is_file():
                return ply
        if (source / "meta.json").is_file():
            return source
        raise SplatFileError(source, "splat", "a folder without splat.ply (a trained project) or meta.json (SOG)")
    return source


def export_splats(source: Path, output: Path, fmt: str | None = None, *, spz_version: int = 4,
                  sog_palette: int | None = None, emit: Callable[[str], None] | None = None,
                  edit: Path | bool | None = None, crop=None, note: Callable[[str], None] | None = None) -> dict:
    """Convert ``source`` (see :func:`source_file`) to ``output`` in ``fmt`` (default: the
    output name's). ``edit``: an edit file to apply, None for the project's own when
    ``source`` is a project folder or a splat.ply with one (spirula/engine/io/splat_edit.py
    edit_file_for), False for none; ``crop``: (x0, y0, z0, x1, y1, z1) world units, the
    axis-aligned box to keep, after the edit. Returns {"source", "output", "format",
    "count", "bytes", "bytes_per_splat", "notes", "edit"} ("edit": the applied edit's line
    lines, each also given to ``note``); each note (repairs on reading, SH dropped by .splat)
    also goes to ``emit``. SplatFileError / PlyError / EditFileError naming the file on a
    bad input."""
    from .splat_edit import CropBox, apply_saved_edit

    fmt = fmt or formats.format_for_output(output)
    src = source_file(source)
    g = formats.read_any(src, warn=False)
    n_read = len(g)
    notes = list(g.notes)
    applied = []
    if edit is not False and (edit is not None or Path(source).is_dir() or src.name == "splat.ply"):
        g, line = apply_saved_edit(src, g, edit if isinstance(edit, Path) else None)
        applied += [f"applied the edit {line}"] if line else []
    if crop is not None:
        n = len(g)
        g = g.subset(CropBox.from_bounds(crop[:3], crop[3:]).contains(g.means))
        applied.append(f"cropped to the box {' '.join(f'{v:g}' for v in crop)}: {len(g):,} of {n:,} kept")
    if n_read and len(g) == 0:  # the file has splats: say what removed them, in the one error line
        raise SplatFileError(src, formats.detect(src), f"nothing to export: {'; '.join(applied)}")
    for line in applied:
        (note or (lambda s: None))(line)
    if fmt == "splat" and g.sh_degree > 0:
        notes.append(f"{output}: .splat holds no SH: the degree-{g.sh_degree} view-dependent colour is dropped")
    if len(g) == 0:
        raise SplatFileError(src, formats.detect(src), "holds no Gaussians to export")
    remove_temporaries_of(output)  # what an earlier, killed export of this file left beside it
    size = formats.write_any(output, g, fmt, spz_version=spz_version, sog_palette=sog_palette)
    for note in notes:
        (emit or (lambda s: None))(note)
    return {"source": str(src), "output": str(output), "format": fmt, "count": len(g), "bytes": size,
            "bytes_per_splat": size / len(g), "notes": notes, "edit": applied}


def cmd_export(args: argparse.Namespace) -> int:
    import sys

    try:
        fmt = args.format or formats.format_for_output(args.output)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    r = export_splats(args.source, args.output, fmt, spz_version=args.spz_version, sog_palette=args.sog_palette,
                      emit=lambda s: print(f"warning: {s}", file=sys.stderr),
                      edit=False if args.no_edit else args.edit, crop=args.crop,
                      note=lambda s: print(f"note: {s}", file=sys.stderr))
    label = formats.LABELS[fmt] + (f" v{args.spz_version}" if fmt == "spz" else "")
    print(f"wrote {r['output']}: {r['count']:,} Gaussians, {r['bytes']:,} bytes ({r['bytes_per_splat']:.1f} B/splat), "
          f"{label}")
    return 0
