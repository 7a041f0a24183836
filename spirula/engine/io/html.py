"""One self-contained HTML page that shows the splats in a browser, opened from disk with no
server (`spirula export --format html`).

The viewer is PlayCanvas's SuperSplat viewer, npm package ``@playcanvas/supersplat-viewer``
(MIT licence, (c) PlayCanvas Ltd; version :data:`VIEWER_VERSION`), taken at build time:
its prebuilt standalone bundle ``public/index.js`` (an ES module exporting
``createViewer``, the PlayCanvas engine inside; about 3.3 MB) and ``public/index.css``.
They are looked for, in order, in ``$SPIRULA_WEB_VIEWER``, ``resources/web_viewer/`` (where a
packaged build copies them, with the package's LICENSE) and ``.tools/node_modules/
@playcanvas/supersplat-viewer/public/`` (scripts/setup.sh installs the pinned package there).

The page (our own assembly, not the package's template): the stylesheet in a ``<style>``,
then one ``<script type="module">`` holding the bundle (its final ``export`` statement
removed, every ``</script`` escaped), the splats as a SOG bundle (spirula/engine/io/sog.py, the
format the viewer reads best) in base64, decoded into a Blob, and a call of
``createViewer`` with the Blob as the content (named ``scene.sog``, the viewer picks the
parser by the name), WebGL 2 as the renderer (WebGPU is not everywhere), and settings of
the viewer's version-2 schema: no tone mapping, a dark grey background (:data:`BACKGROUND`),
and a start camera looking at the splats' robust extent (5th-95th percentile box) from
20 degrees above, at the distance where the box's bounding sphere fills a 50 degree view.

Coordinates: the viewer turns a PLY-frame splat set (ours: x right, y down, z forward) half a
turn about z to show it y-up, so the start camera's position and target are given in that
turned frame, ``(-x, -y, z)``.

Size: the SOG bytes x 4/3 plus the viewer (about 3.4 MB). Refused with
:class:`spirula.engine.errors.SplatFileError` naming the output: no Gaussians, non-finite values,
and a missing viewer bundle (the message says how to install it); nothing is written then.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import SplatFileError
from .ply import GaussianPly
from .splat_file import check_finite, write_bytes

__all__ = ["FORMAT", "VIEWER_PACKAGE", "VIEWER_VERSION", "BACKGROUND", "viewer_dir", "encode_html", "write_html",
           "viewer_bytes"]

FORMAT = "HTML"
VIEWER_PACKAGE = "@playcanvas/supersplat-viewer"
VIEWER_VERSION = "1.36.2"
BACKGROUND = (0.12, 0.12, 0.14)
_REPO = Path(__file__).resolve().parents[3]
_FILES = ("index.js", "index.css")


def viewer_dir() -> Path | None:
    """The folder holding the viewer's index.js and index.css (module docstring), or None."""
    candidates = [os.environ.get("SPIRULA_WEB_VIEWER"), _REPO / "resources" / "web_viewer",
                  _REPO / ".tools" / "node_modules" / "@playcanvas" / "supersplat-viewer" / "public"]
    for c in candidates:
        if c and all((Path(c) / f).is_file() for f in _FILES):
            return Path(c)
    return None


def viewer_bytes() -> int:
    """Bytes the viewer adds to a page (0 when it is not installed)."""
    d = viewer_dir()
    return sum((d / f).stat().st_size for f in _FILES) if d else 0


def _start_camera(means: np.ndarray) -> dict:
    """The viewer's initial camera (position, target in its turned frame, fov degrees)."""
    means = np.asarray(means, np.float64)
    lo, hi = np.percentile(means, 5, axis=0), np.percentile(means, 95, axis=0)
    centre, half = (lo + hi) / 2.0, float(np.linalg.norm(hi - lo) / 2.0) or 1.0
    fov = 50.0
    dist = half / math.sin(math.radians(fov) / 2.0)
    el = math.radians(20.0)
    # ours: up is -y, the camera in front (-z side) and above
    eye = centre + dist * np.array([0.0, -math.sin(el), -math.cos(el)])
    turn = np.array([-1.0, -1.0, 1.0])
    return {"position": [float(v) for v in eye * turn], "target": [float(v) for v in centre * turn], "fov": fov}


def _settings(g: GaussianPly) -> dict:
    off = {"enabled": False}
    return {
        "version": 2, "tonemapping": "none", "highPrecisionRendering": False,
        "background": {"color": list(BACKGROUND)},
        "postEffectSettings": {"sharpness": dict(off, amount=0), "bloom": dict(off, intensity=1, blurLevel=2),
                               "grading": dict(off, brightness=0, contrast=1, saturation=1, tint=[1, 1, 1]),
                               "vignette": dict(off, intensity=0.5, inner=0.3, outer=0.75, curvature=1),
                               "fringing": dict(off, intensity=0.5)},
        "animTracks": [], "cameras": [{"initial": _start_camera(g.means)}], "annotations": [], "startMode": "default",
    }


def _sog_bytes(g: GaussianPly, palette: int | None) -> bytes:
    from .sog import encode_sog

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in encode_sog(g, palette).items():
            z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def encode_html(g: GaussianPly, title: str = "Gaussian splats", palette: int | None = None) -> list[bytes]:
    """The page's bytes (in pieces, written in order) for N >= 1 Gaussians; ValueError when
    the viewer is not installed or there are no Gaussians."""
    if len(g) == 0:
        raise ValueError("no Gaussians to show")
    d = viewer_dir()
    if d is None:
        raise ValueError(f"the web viewer ({VIEWER_PACKAGE} {VIEWER_VERSION}) is not installed: run scripts/setup.sh "
                         "(npm) or set SPIRULA_WEB_VIEWER to a folder with its index.js and index.css")
    js = (d / "index.js").read_text(encoding="utf-8")
    cut = js.rfind("export {")
    if cut < 0 or "createViewer" not in js[cut:]:
        raise ValueError(f"{d / 'index.js'} does not end by exporting createViewer (another viewer version?)")
    js = js[:cut].replace("</script", "<\\/script")
    css = (d / "index.css").read_text(encoding="utf-8").replace("</style", "<\\/style")
    data = base64.b64encode(_sog_bytes(g, palette))
    settings = json.dumps(_settings(g))
    esc = title.replace("&", "&amp;").replace("<", "&lt;")
    bg = "rgb({},{},{})".format(*(int(round(255 * c)) for c in BACKGROUND))
    head = (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc}</title>\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1.0, user-scalable=no">\n'
            f'<meta name="generator" content="Spirula Studio; viewer {VIEWER_PACKAGE} {VIEWER_VERSION} (MIT)">\n'
            f"<style>\n{css}\n</style>\n<style>html, body {{ height: 100%; margin: 0; overflow: hidden; "
            f"background: {bg}; }}</style>\n</head><body>\n<script type=\"module\">\n")
    tail = ("\n;\n(() => {\n"
            "  const bytes = Uint8Array.from(atob(SPIRULA_SPLATS), (c) => c.charCodeAt(0));\n"
            "  const blob = new Blob([bytes], { type: 'application/octet-stream' });\n"
            "  const url = URL.createObjectURL(blob);\n"
            f"  createViewer({{ container: document.body, settings: Promise.resolve({settings}),\n"
            "    contentUrl: url, contentFilename: 'scene.sog', contents: Promise.resolve(new Response(blob)),\n"
            "    ui: true, renderer: 'webgl' });\n"
            "})();\n</script>\n</body></html>\n")
    return [head.encode(), js.encode(), b"\nconst SPIRULA_SPLATS = \"", data, b"\";\n", tail.encode()]


def write_html(path: str | os.PathLike, g: GaussianPly, palette: int | None = None) -> int:
    """Write the page for ``g`` to ``path`` atomically; returns the byte count. SplatFileError
    naming the file for no Gaussians, non-finite values or a missing viewer (nothing written)."""
    g = check_finite(path, FORMAT, g)
    try:
        parts = encode_html(g, Path(path).stem, palette)
    except ValueError as e:
        raise SplatFileError(path, FORMAT, f"not written: {e}") from None
    return write_bytes(path, parts)
