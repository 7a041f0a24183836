"""pyqtgraph for the panels: its Qt binding and colours, and the panels' plot widget."""

from __future__ import annotations

import math
import os

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg  # noqa: E402

pg.setConfigOptions(antialias=False, background=(24, 25, 29), foreground=(200, 200, 205))

ACCENT = (255, 170, 60)
BLUE = (90, 200, 255)
GREEN = (120, 220, 120)


LABEL_PX = 18   # the least distance between two value labels of the left axis


class SparseAxis(pg.AxisItem):
    """A left axis whose value labels never overlap: pyqtgraph keeps at least two or three
    major ticks however short the axis is, and the panels' plots are short on a small screen."""

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802,N803 (pyqtgraph names)
        levels = super().tickSpacing(minVal, maxVal, size)
        dif = abs(maxVal - minVal)
        if not levels or dif == 0 or size <= 0 or self._tickSpacing is not None or self.logMode:
            return levels
        least = dif * LABEL_PX / size
        if levels[0][0] >= least:
            return levels
        e = math.floor(math.log10(least))
        step = min(m * 10.0 ** k for k in (e, e + 1) for m in (1, 2, 5) if m * 10.0 ** k >= least)
        return [(step, 0)]


def plot(title: str, left: str, log_y: bool = False) -> pg.PlotWidget:
    w = pg.PlotWidget(axisItems={"left": SparseAxis("left")})
    w.setTitle(title, size="9pt")
    w.setLabel("bottom", "step")
    w.setLabel("left", left)
    w.showGrid(x=True, y=True, alpha=0.2)
    w.setLogMode(y=log_y)
    w.getAxis("left").enableAutoSIPrefix(False)
    w.getAxis("bottom").enableAutoSIPrefix(False)
    w.setMinimumHeight(90)  # three in the Training panel fit a 1440 x 900 window unscrolled
    w.setMouseEnabled(x=False, y=False)
    w.hideButtons()
    return w


def show_empty(w: pg.PlotWidget, empty: bool, what: str = "no data yet") -> None:
    """An empty plot shows its title with ``what`` and no axes (no made-up 0-1 ticks)."""
    base = getattr(w, "base_title", None)
    if base is None:
        base = w.base_title = w.plotItem.titleLabel.text
    w.setTitle(f"{base} — {what}" if empty else base, size="9pt")
    for side in ("left", "bottom"):
        w.getAxis(side).setStyle(showValues=not empty)


def show_last(w: pg.PlotWidget, x, y, text: str, ys=()) -> None:
    """A plot with data: its values on the axes, and ``text`` (the last value, as a person
    reads it: "24.31 dB at step 2,000") after its title and beside its last point (left of
    it; below it when it lies in the upper half of the series ``ys``, above it otherwise,
    so that it stays inside the plot)."""
    show_empty(w, False)
    w.setTitle(f"{w.base_title} — {text}", size="9pt")
    label = getattr(w, "last_label", None)
    if label is None:
        label = w.last_label = pg.TextItem(color=(235, 235, 240), anchor=(1.0, 1.0))
        w.addItem(label, ignoreBounds=True)
    finite = [float(v) for v in ys if math.isfinite(float(v))] or [float(y)]
    upper = float(y) >= (min(finite) + max(finite)) / 2
    label.setAnchor((1.0, 0.0) if upper else (1.0, 1.0))
    label.setText(text.split(" at ")[0])
    label.setPos(float(x), float(y))


def hide_last(w: pg.PlotWidget) -> None:
    label = getattr(w, "last_label", None)
    if label is not None:
        label.setText("")


def value_labels(lo: float, hi: float, n: int, integer: bool = False) -> list[tuple[float, str]]:
    """``n`` (>= 2) evenly spaced values from ``lo`` to ``hi`` with their labels, given the
    decimals that tell neighbours apart ("0.021", "0.046"; counts with thousands separators)."""
    values = [lo + (hi - lo) * k / (n - 1) for k in range(n)]
    if integer and hi - lo >= n - 1:
        return [(v, f"{round(v):,}") for v in values]
    step = (hi - lo) / (n - 1)
    decimals = max(0, 1 - math.floor(math.log10(step))) if step > 0 else 2
    return [(v, f"{v:,.{decimals}f}") for v in values]


def fit_y(w: pg.PlotWidget, values, include_zero: bool = False, log: bool = False, integer: bool = False) -> None:
    """A y range that makes sense for ``values``: a flat series gets a band around its value
    (not +-1 or a range across zero), counts start at zero. On a linear axis the lowest and
    highest value (and evenly spaced ones between, as many as the plot's height holds) are
    labelled, with room for their labels inside the axis: a short plot still shows numbers
    (pyqtgraph's own ticks leave out every label that would cross the axis' ends)."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v)) and (not log or float(v) > 0)]
    if not vals:
        return
    lo, hi = min(vals), max(vals)
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    if include_zero and not log:
        lo = min(lo, 0.0)
    span = hi - lo
    if span <= 1e-9 * max(abs(hi), 1.0):
        span = max(abs(hi) * 0.1, 1e-3 if log or abs(hi) < 1 else 1.0)
        lo, hi = (lo - span, hi + span) if not include_zero else (lo, hi + span)
    axis = w.getAxis("left")
    if log:
        axis.setTicks(None)
        w.setYRange(lo, hi, padding=0.05)
        return
    height = max(float(w.getViewBox().height()), 2.0 * LABEL_PX)   # pixels (a guess before the first layout)
    n = int(min(max(height // (1.6 * LABEL_PX), 2), 5))
    margin = (0.5 * LABEL_PX + 2) * (hi - lo) / max(height - LABEL_PX - 4, 1.0)   # half a label, in values
    w.setYRange(lo - margin, hi + margin, padding=0)
    axis.setTicks([value_labels(lo, hi, n, integer)])
