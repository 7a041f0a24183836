"""pyqtgraph for the panels: its Qt binding and colours, and the panels' plot widget."""

from __future__ import annotations

import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg  # noqa: E402

pg.setConfigOptions(antialias=False, background=(24, 25, 29), foreground=(200, 200, 205))

ACCENT = (255, 170, 60)
BLUE = (90, 200, 255)
GREEN = (120, 220, 120)


def plot(title: str, left: str, log_y: bool = False) -> pg.PlotWidget:
    w = pg.PlotWidget()
    w.setTitle(title, size="9pt")
    w.setLabel("bottom", "step")
    w.setLabel("left", left)
    w.showGrid(x=True, y=True, alpha=0.2)
    w.setLogMode(y=log_y)
    w.getAxis("left").enableAutoSIPrefix(False)
    w.getAxis("bottom").enableAutoSIPrefix(False)
    w.setMinimumHeight(110)
    w.setMouseEnabled(x=False, y=False)
    w.hideButtons()
    return w
