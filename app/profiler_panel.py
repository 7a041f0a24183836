"""The Profiler panel: per-kernel GPU time, the VRAM breakdown over time and the timing
buckets, from the engine's ProfilerSnapshot messages (VRAM only while profiling is off)."""

from __future__ import annotations

import time

import numpy as np
from PySide6 import QtCore, QtWidgets

from engine.studio import messages as M

from .plots import ACCENT, BLUE, GREEN, pg


class ProfilerPanel(QtWidgets.QWidget):
    """Live per-kernel GPU time and VRAM by category from ProfilerSnapshot messages."""

    profiling_toggled = QtCore.Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QtWidgets.QVBoxLayout(self)
        self.enable = QtWidgets.QCheckBox("Per-kernel GPU timestamps (costs a little speed)")
        self.enable.toggled.connect(self.profiling_toggled)
        lay.addWidget(self.enable)
        self.kernel_plot = pg.PlotWidget()
        self.kernel_plot.setTitle("GPU ms per kernel (since profiling started)", size="9pt")
        self.kernel_plot.setMouseEnabled(x=False, y=False)
        self.kernel_plot.hideButtons()
        self.kernel_plot.setMinimumHeight(140)
        lay.addWidget(self.kernel_plot, 1)
        self.vram_plot = pg.PlotWidget()
        self.vram_plot.setTitle("VRAM by category (MiB)", size="9pt")
        self.vram_plot.setLabel("bottom", "s")
        self.vram_plot.addLegend(offset=(5, 5), labelTextSize="8pt", brush=pg.mkBrush(24, 25, 29, 210))
        self.vram_plot.setMouseEnabled(x=False, y=False)
        self.vram_plot.hideButtons()
        self.vram_plot.setMinimumHeight(140)
        lay.addWidget(self.vram_plot, 1)
        self.text = QtWidgets.QLabel("Waiting for the engine's first snapshot…")
        self.text.setWordWrap(True)
        self.text.setObjectName("mono")
        self.text.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.text)
        self.t0 = time.perf_counter()
        self.vram_t: list[float] = []
        self.vram: dict[str, list[float]] = {}
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.fills: list = []
        self.base_curve = None
        self.high_line = None
        self.kernels: list[dict] = []
        self.snapshots = 0
        self.latest: dict | None = None

    def on_snapshot(self, msg: M.ProfilerSnapshot) -> None:
        data = msg.data if isinstance(msg.data, dict) else {}
        if "devices" in data and data["devices"]:
            data = data["devices"][0]
        self.snapshots += 1
        self.kernels = [k for k in (data.get("kernels") or []) if isinstance(k, dict) and "name" in k]
        self._record_vram(data.get("vram") or {})
        self.latest = data

    def refresh(self) -> None:
        """Draw the newest snapshot (called by the window's refresh timer when visible)."""
        if self.latest is None or not self.isVisible():
            return
        data, self.latest = self.latest, None
        self._kernels(self.kernels)
        self._vram(data.get("vram") or {})
        self._timing(data)

    def _kernels(self, ks: list) -> None:
        self.kernel_plot.clear()
        if not self.kernels:
            return
        top = sorted(self.kernels, key=lambda k: -float(k.get("total_ms") or 0.0))[:12]
        ms = [float(k.get("total_ms") or 0.0) for k in top]
        bars = pg.BarGraphItem(x0=0, y=np.arange(len(top)), height=0.7, width=ms, brush=pg.mkBrush(*ACCENT))
        self.kernel_plot.addItem(bars)
        ax = self.kernel_plot.getAxis("left")
        ax.setTicks([[(i, k["name"][:24]) for i, k in enumerate(top)]])
        self.kernel_plot.getViewBox().invertY(True)

    def _record_vram(self, v: dict) -> None:
        cats = v.get("categories") or {}
        if not cats:
            return
        t = time.perf_counter() - self.t0
        self.vram_t.append(t)
        for name, e in cats.items():
            series = self.vram.setdefault(name, [0.0] * (len(self.vram_t) - 1))
            series.append(float(e.get("current_mib") or 0.0))
        for name, series in self.vram.items():
            if len(series) < len(self.vram_t):
                series.append(series[-1] if series else 0.0)
        if len(self.vram_t) > 3600:  # an hour at 1 Hz
            del self.vram_t[:-3600]
            for series in self.vram.values():
                del series[:-3600]

    def _vram(self, v: dict) -> None:
        if not self.vram_t:
            return
        # stacked area: cumulative sums, filled between consecutive curves (items made once
        # per set of categories; FillBetweenItem follows its curves' data)
        names = sorted(self.vram)
        if names != sorted(self.curves):
            for item in self.fills + list(self.curves.values()):
                self.vram_plot.removeItem(item)
            self.fills, self.curves = [], {}
            palette = [ACCENT, BLUE, GREEN, (220, 120, 220), (240, 220, 90), (160, 160, 170), (255, 110, 110)]
            self.base_curve = self.vram_plot.plot([0.0], [0.0], pen=None)
            self.fills.append(self.base_curve)
            prev = self.base_curve
            for i, name in enumerate(names):
                color = palette[i % len(palette)]
                curve = self.curves[name] = self.vram_plot.plot(pen=pg.mkPen(color, width=1.5), name=name)
                fill = pg.FillBetweenItem(curve, prev, brush=pg.mkBrush(*color, 80))
                self.vram_plot.addItem(fill)
                self.fills.append(fill)
                prev = curve
        base = np.zeros(len(self.vram_t))
        self.base_curve.setData(self.vram_t, base)
        for name in names:
            base = base + np.asarray(self.vram[name])
            self.curves[name].setData(self.vram_t, base)
        hw = (v.get("total") or {}).get("high_water_mib")
        if hw is not None:
            if self.high_line is None:
                self.high_line = pg.InfiniteLine(angle=0, pen=pg.mkPen((255, 80, 80), style=QtCore.Qt.PenStyle.DashLine),
                                                 label="high-water {value:.1f} MiB",
                                                 labelOpts={"color": (255, 120, 120), "position": 0.85, "anchors": [(1, 1), (1, 1)]})
                self.vram_plot.addItem(self.high_line)
            self.high_line.setValue(float(hw))

    def _timing(self, data: dict) -> None:
        lines = []
        if data.get("device"):
            lines.append(str(data["device"]))
        t = data.get("timing")
        if isinstance(t, dict):
            keys = [("wall_ms", "wall"), ("gpu_exec_ms", "GPU execution"), ("blocked_ms", "blocked on GPU"),
                    ("host_ms", "host")]
            lines.append(" · ".join(f"{label} {t[k] / 1000:.2f} s" for k, label in keys if isinstance(t.get(k), (int, float))))
        tot = (data.get("vram") or {}).get("total") or {}
        if tot:
            lines.append(f"VRAM now {tot.get('current_mib', 0):.1f} MiB, high-water {tot.get('high_water_mib', 0):.1f} MiB")
        if not self.kernels:
            lines.append("Per-kernel timing is off: tick the box above to see GPU time by kernel.")
        self.text.setText("\n".join(x for x in lines if x))
