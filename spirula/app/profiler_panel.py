"""The Profiler panel, from the engine's ProfilerSnapshot messages:

- GPU time per training step by kernel, a stacked timeline (ms per step against the step):
  the difference of two snapshots' training totals over the steps between them;
- a table of the kernels sorted by share, training and viewer apart (the viewer renders
  with the training's kernels; the engine counts them under the scope "viewer"), with
  ms per step, µs per call and the call count;
- VRAM by category, a stacked area over time with the device's budget, the legend beside
  the plot, not over the data.

Per-kernel timestamps are switched on with the check box (while a training runs: spirula/engine/
studio/profiling.py); they are not on by default (PROFILE_BY_DEFAULT: their cost was
measured over 3%). VRAM comes without them."""

from __future__ import annotations

import time

import numpy as np
from PySide6 import QtCore, QtWidgets

from spirula.engine.studio import protocol as M

from .plots import ACCENT, BLUE, GREEN, fit_y, pg, plot, show_empty

PALETTE = [ACCENT, BLUE, GREEN, (220, 120, 220), (240, 220, 90), (160, 160, 170), (255, 110, 110)]
TOP = 6                     # kernels drawn apart in the timeline; the rest is "other"
# Timestamps around every dispatch cost too much to be on by default (the studio allows 3%):
# book at 240 px on software Vulkan, 3 x 120 steps each way, medians: 10.4 steps/s off,
# 8.1 on (28% slower; the Python dispatch wrapper and the timestamp reads). Not measured on
# a GPU, where the kernels are longer against the same per-dispatch cost.
PROFILE_BY_DEFAULT = False
COLUMNS = ("kernel", "scope", "share", "ms / step", "µs / call", "calls")


def scope_of(k: dict) -> str:
    return "viewer" if k.get("scope") == "viewer" else "training"


class ProfilerPanel(QtWidgets.QWidget):
    profiling_toggled = QtCore.Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QtWidgets.QVBoxLayout(self)
        self.enable = QtWidgets.QCheckBox("Per-kernel GPU timestamps")
        self.enable.setToolTip("Timestamps around every GPU dispatch: time per kernel and per step")
        self.enable.toggled.connect(self.profiling_toggled)
        lay.addWidget(self.enable)
        self.step_plot = plot("GPU ms per training step, by kernel", "ms")
        self.step_plot.setMinimumHeight(150)
        lay.addWidget(self.step_plot, 2)
        self.step_legend = QtWidgets.QLabel("")
        self.step_legend.setWordWrap(True)
        self.step_legend.setObjectName("dim")
        lay.addWidget(self.step_legend)
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.table.setMinimumHeight(120)
        lay.addWidget(self.table, 2)
        self.vram_plot = plot("VRAM by category", "MiB")
        self.vram_plot.setLabel("bottom", "seconds")
        self.vram_plot.setMinimumHeight(140)
        lay.addWidget(self.vram_plot, 2)
        self.vram_legend = QtWidgets.QLabel("")
        self.vram_legend.setWordWrap(True)
        self.vram_legend.setObjectName("dim")
        lay.addWidget(self.vram_legend)
        self.text = QtWidgets.QLabel("Waiting for the engine's first snapshot…")
        self.text.setWordWrap(True)
        self.text.setObjectName("mono")
        self.text.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.text)
        self.t0 = time.perf_counter()
        self.vram_t: list[float] = []
        self.vram: dict[str, list[float]] = {}
        self.vram_items: list = []
        self.vram_names: list[str] = []
        self.budget_line = None
        self.kernels: list[dict] = []
        self.snapshots = 0
        self.latest: dict | None = None
        self.step = 0                      # the training's step (the window passes it on)
        self._last: tuple[int, dict] | None = None   # (step, training totals) of the previous snapshot
        self.per_step: list[tuple[int, dict]] = []   # (step, {kernel: ms per step})
        self.step_items: list = []
        show_empty(self.step_plot, True, "no per-kernel timing yet")
        show_empty(self.vram_plot, True, "no snapshot yet")

    # --- data ------------------------------------------------------------------------------------
    def set_step(self, step: int) -> None:
        self.step = step

    def on_snapshot(self, msg: M.ProfilerSnapshot) -> None:
        data = msg.data if isinstance(msg.data, dict) else {}
        if "devices" in data and data["devices"]:
            data = data["devices"][0]
        self.snapshots += 1
        ks = [k for k in (data.get("kernels") or []) if isinstance(k, dict) and "name" in k]
        if ks:
            self.kernels = ks
            self._record_steps(ks)
        self._record_vram(data.get("vram") or {})
        self.latest = data

    def _record_steps(self, ks: list[dict]) -> None:
        totals: dict[str, float] = {}
        for k in ks:
            if scope_of(k) == "training":
                totals[k["name"]] = totals.get(k["name"], 0.0) + float(k.get("total_ms") or 0.0)
        last, self._last = self._last, (self.step, totals)
        if last is None:
            return
        if self.step < last[0]:  # a new run: a new timeline
            self.per_step = []
            return
        steps = self.step - last[0]
        if steps <= 0:
            self._last = last  # no step between them: the next snapshot measures from here
            return
        self.per_step.append((self.step, {n: max(ms - last[1].get(n, 0.0), 0.0) / steps for n, ms in totals.items()}))
        del self.per_step[:-600]

    def _record_vram(self, v: dict) -> None:
        cats = v.get("categories") or {}
        if not cats:
            return
        self.vram_t.append(time.perf_counter() - self.t0)
        for name, e in cats.items():
            series = self.vram.setdefault(name, [0.0] * (len(self.vram_t) - 1))
            series.append(float(e.get("current_mib") or 0.0))
        for series in self.vram.values():
            if len(series) < len(self.vram_t):
                series.append(series[-1] if series else 0.0)
        if len(self.vram_t) > 3600:  # an hour at 1 Hz
            del self.vram_t[:-3600]
            for series in self.vram.values():
                del series[:-3600]

    def clear(self) -> None:
        """Another project: its per-step kernel times go (the VRAM timeline is the device's
        and stays)."""
        for it in self.step_items:
            self.step_plot.removeItem(it)
        self.step_items, self.per_step, self._last, self.step = [], [], None, 0
        self.step_legend.setText("")
        show_empty(self.step_plot, True, "waiting for training steps" if self.kernels else "no per-kernel timing yet")

    # --- drawing ---------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Draw the newest snapshot (the window's refresh timer, when visible)."""
        if self.latest is None or not self.isVisible():
            return
        data, self.latest = self.latest, None
        self._draw_steps()
        self._fill_table()
        self._draw_vram(data.get("vram") or {})
        self._timing(data)

    def _stack(self, w, items: list, x, layers: list[tuple[str, np.ndarray]]) -> tuple[list, np.ndarray]:
        """Stacked areas of ``layers`` over ``x`` in ``w`` (the old items replaced); returns
        the new items and the top curve."""
        for it in items:
            w.removeItem(it)
        items, base = [], np.zeros(len(x))
        prev = w.plot(x, base, pen=None)
        items.append(prev)
        for i, (name, ys) in enumerate(layers):
            color = PALETTE[i % len(PALETTE)]
            base = base + ys
            curve = w.plot(x, base, pen=pg.mkPen(color, width=1.2))
            fill = pg.FillBetweenItem(curve, prev, brush=pg.mkBrush(*color, 90))
            w.addItem(fill)
            items += [curve, fill]
            prev = curve
        return items, base

    @staticmethod
    def legend(names: list[str], values: list[float], unit: str) -> str:
        parts = []
        for i, (n, v) in enumerate(zip(names, values)):
            c = PALETTE[i % len(PALETTE)]
            parts.append(f"<span style='color:rgb({c[0]},{c[1]},{c[2]})'>■</span> {n} {v:.2f} {unit}")
        return " · ".join(parts)

    def _draw_steps(self) -> None:
        if len(self.per_step) < 1:
            show_empty(self.step_plot, True, "waiting for training steps" if self.kernels else
                       "turn on per-kernel timestamps")
            return
        show_empty(self.step_plot, False)
        x = np.array([s for s, _ in self.per_step], float)
        names = sorted(self.per_step[-1][1], key=lambda n: -self.per_step[-1][1][n])
        top, rest = names[:TOP], names[TOP:]
        layers = [(n, np.array([d.get(n, 0.0) for _, d in self.per_step])) for n in top]
        if rest:
            layers.append(("other", np.array([sum(d.get(n, 0.0) for n in rest) for _, d in self.per_step])))
        self.step_items, total = self._stack(self.step_plot, self.step_items, x, layers)
        fit_y(self.step_plot, list(total) + [0.0], include_zero=True)
        self.step_plot.enableAutoRange(x=True)
        last = [ys[-1] for _, ys in layers]
        self.step_legend.setText(f"{total[-1]:.1f} ms per step at step {int(x[-1]):,}: "
                                 + self.legend([n for n, _ in layers], last, "ms"))

    def _fill_table(self) -> None:
        per_step = self.per_step[-1][1] if self.per_step else {}
        rows = []
        for scope in ("training", "viewer"):
            ks = [k for k in self.kernels if scope_of(k) == scope]
            total = sum(float(k.get("total_ms") or 0.0) for k in ks) or 1.0
            for k in sorted(ks, key=lambda k: -float(k.get("total_ms") or 0.0)):
                share = 100.0 * float(k.get("total_ms") or 0.0) / total
                ms = per_step.get(k["name"]) if scope == "training" else None
                us = k.get("us_per_call")
                rows.append((k["name"], scope, f"{share:.1f} %", "–" if ms is None else f"{ms:.3f}",
                             "–" if us is None else f"{us:,.1f}", f"{int(k.get('calls') or 0):,}"))
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QtWidgets.QTableWidgetItem(text)
                if c >= 2:
                    item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, item)

    def _draw_vram(self, v: dict) -> None:
        if not self.vram_t:
            return
        show_empty(self.vram_plot, False)
        names = sorted(self.vram)
        layers = [(n, np.asarray(self.vram[n])) for n in names]
        self.vram_items, total = self._stack(self.vram_plot, self.vram_items, np.asarray(self.vram_t), layers)
        budget = device_budget_mib(v)
        top = float(total.max()) if len(total) else 0.0
        shown = budget is not None and budget <= 4 * max(top, 1.0)  # a budget far above the data: in words
        if shown:
            if self.budget_line is None:
                self.budget_line = pg.InfiniteLine(angle=0, pen=pg.mkPen((255, 80, 80), style=QtCore.Qt.PenStyle.DashLine))
                self.vram_plot.addItem(self.budget_line)
            self.budget_line.setValue(budget)
        elif self.budget_line is not None:
            self.vram_plot.removeItem(self.budget_line)
            self.budget_line = None
        fit_y(self.vram_plot, [0.0, top] + ([budget] if shown else []), include_zero=True)
        self.vram_plot.enableAutoRange(x=True)
        note = "" if budget is None else (f" · <span style='color:#ff5050'>- - budget</span> {budget:,.0f} MiB"
                                          + ("" if shown else " (off the chart)"))
        now = float(total[-1]) if len(total) else 0.0
        self.vram_legend.setText(f"{now:.1f} MiB now: " + self.legend(names, [self.vram[n][-1] for n in names], "MiB")
                                 + note)

    def _timing(self, data: dict) -> None:
        lines = [str(data["device"])] if data.get("device") else []
        t = data.get("timing")
        if isinstance(t, dict):
            keys = [("wall_ms", "wall"), ("gpu_exec_ms", "GPU execution"), ("blocked_ms", "blocked on GPU"),
                    ("host_ms", "host")]
            lines.append(" · ".join(f"{label} {t[k] / 1000:.2f} s" for k, label in keys
                                    if isinstance(t.get(k), (int, float))))
        tot = (data.get("vram") or {}).get("total") or {}
        if tot:
            lines.append(f"VRAM now {tot.get('current_mib', 0):.1f} MiB, high-water {tot.get('high_water_mib', 0):.1f} MiB")
        if not self.kernels:
            lines.append("Per-kernel timing is off: tick the box above to see GPU time by kernel.")
        self.text.setText("\n".join(x for x in lines if x))


def device_budget_mib(v: dict) -> float | None:
    """The driver's memory budget of the device-local heaps (VK_EXT_memory_budget), or None."""
    heaps = (((v.get("driver") or {}).get("vk_budget") or {}).get("heaps")) or []
    local = [float(h["budget_mib"]) for h in heaps if h.get("device_local") and h.get("budget_mib")]
    return max(local) if local else None
