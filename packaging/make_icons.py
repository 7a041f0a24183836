#!/usr/bin/env python3
"""Regenerate the platform icons from resources/icons/spirula.svg (run after changing the SVG):

    .venv/bin/python packaging/make_icons.py

writes packaging/windows/spirula.ico (16..256 px) and packaging/macos/spirula.icns (16..1024 px).
The SVG is rendered by PySide6's QtSvg (offscreen), the containers are written by Pillow.
The Linux package renders its PNGs at build time (packaging/linux/build_deb.py).
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SVG = REPO / "resources" / "icons" / "spirula.svg"


def render(size: int):
    from PIL import Image
    from PySide6 import QtCore, QtGui, QtSvg

    renderer = QtSvg.QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"{SVG} is not a valid SVG")
    img = QtGui.QImage(size, size, QtGui.QImage.Format.Format_ARGB32)
    img.fill(0)
    p = QtGui.QPainter(img)
    p.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
    renderer.render(p)
    p.end()
    buf = QtCore.QBuffer()
    buf.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    img.save(buf, "PNG")
    return Image.open(io.BytesIO(bytes(buf.data()))).convert("RGBA")


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import QtGui

    app = QtGui.QGuiApplication(sys.argv[:1])  # noqa: F841  (QPainter needs one)
    big = render(1024)
    ico = REPO / "packaging" / "windows" / "spirula.ico"
    render(256).save(ico, format="ICO", sizes=[(s, s) for s in (16, 24, 32, 48, 64, 128, 256)])
    icns = REPO / "packaging" / "macos" / "spirula.icns"
    big.save(icns, format="ICNS")
    for p in (ico, icns):
        print(f"wrote {p.relative_to(REPO)} ({p.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
