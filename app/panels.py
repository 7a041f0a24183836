"""The side panels: Training, Dataset, Profiler, Export. They show engine messages and
emit Qt signals for what the user asks; the window turns those into engine commands."""

from __future__ import annotations

import math
import os
import time

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
from PySide6 import QtCore, QtGui, QtWidgets  # noqa: E402

from engine import messages as M  # noqa: E402
from engine.config import TrainConfig  # noqa: E402

pg.setConfigOptions(antialias=False, background=(24, 25, 29), foreground=(200, 200, 205))

ACCENT = (255, 170, 60)
BLUE = (90, 200, 255)
GREEN = (120, 220, 120)


def _plot(title: str, left: str, log_y: bool = False) -> pg.PlotWidget:
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


def format_eta(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "–"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


class TrainingPanel(QtWidgets.QWidget):
    start_requested = QtCore.Signal()
    pause_requested = QtCore.Signal()
    resume_requested = QtCore.Signal()
    stop_requested = QtCore.Signal()

    PRESETS = {
        "Preview (software Vulkan)": dict(steps=400, max_size=240, init_points=10_000, eval_interval=100),
        "Quick": dict(steps=7_000, max_size=960, init_points=100_000, eval_interval=1_000),
        "Full (3DGS)": dict(steps=30_000, max_size=1600, init_points=100_000, eval_interval=5_000),
    }

    MOMENTS = (("float32", "fp32"), ("bfloat16 (half the memory)", "bf16"))
    STRATEGIES = (("Auto (MCMC with SfM points)", "auto"), ("ADC (3DGS)", "adc"), ("MCMC (exact budget)", "mcmc"))
    APPEARANCES = (("Automatic (affine for a video)", ""), ("Off", "off"), ("Affine (exposure, white balance)", "affine"),
                   ("Bilateral grid", "bilagrid"))

    def __init__(self, parent=None):
        super().__init__(parent)
        self.dataset: str | None = None
        lay = QtWidgets.QVBoxLayout(self)
        self.source = QtWidgets.QLabel("Drop a dataset folder, a video or a .ply on the window")
        self.source.setWordWrap(True)
        self.source.setObjectName("heading")
        lay.addWidget(self.source)

        form = QtWidgets.QFormLayout()
        self.preset = QtWidgets.QComboBox()
        self.preset.addItems(list(self.PRESETS))
        self.preset.currentTextChanged.connect(self._apply_preset)
        self.steps = QtWidgets.QSpinBox(minimum=1, maximum=1_000_000, singleStep=100)
        self.max_size = QtWidgets.QSpinBox(minimum=32, maximum=8192, singleStep=16)
        self.max_size.setSuffix(" px")
        self.eval_interval = QtWidgets.QSpinBox(minimum=0, maximum=1_000_000, singleStep=100)
        self.eval_interval.setSpecialValueText("at the end")
        self.init_points = QtWidgets.QSpinBox(minimum=100, maximum=10_000_000, singleStep=1000)
        self.max_gaussians = QtWidgets.QSpinBox(minimum=1_000, maximum=100_000_000, singleStep=500_000)
        self.max_gaussians.setGroupSeparatorShown(True)
        self.max_gaussians.setValue(TrainConfig.max_gaussians)
        self.max_gaussians.setToolTip("Densification stops growing here (the largest gradients grow first)")
        self.strategy = QtWidgets.QComboBox()
        for label, value in self.STRATEGIES:
            self.strategy.addItem(label, value)
        self.strategy.setToolTip("ADC clones and splits where the image gradient is large, up to Max Gaussians; "
                                 "MCMC moves transparent Gaussians onto opaque ones and grows to exactly Max Gaussians; "
                                 "Auto takes MCMC when the dataset has SfM points and ADC when it starts from random "
                                 "points (Max Gaussians is then MCMC's budget or ADC's cap)")
        self.strategy.currentIndexChanged.connect(self._strategy_changed)
        self._strategy_changed()  # Max Gaussians starts at the default strategy's number
        self.adam_moments = QtWidgets.QComboBox()
        for label, value in self.MOMENTS:
            self.adam_moments.addItem(label, value)
        self.adam_moments.setToolTip("bfloat16 halves the optimizer's memory: for very large models")
        self.antialias = QtWidgets.QCheckBox("Mip-Splatting filters")
        self.antialias.setChecked(TrainConfig.antialias)
        self.antialias.setToolTip("Anti-aliased training: a 3D smoothing filter from the training cameras' "
                                  "sampling rates and the 2D Mip filter, so the splats hold up when zooming in "
                                  "or out; the exported PLY has the 3D filter baked in")
        self.appearance = QtWidgets.QComboBox()
        for label, value in self.APPEARANCES:
            self.appearance.addItem(label, value)
        self.appearance.setToolTip("A colour transform learned per image, so exposure and white-balance changes "
                                   "between frames are not baked into the splats (held-out views use none)")
        form.addRow("Preset", self.preset)
        form.addRow("Steps", self.steps)
        form.addRow("Image size", self.max_size)
        form.addRow("Held-out PSNR every", self.eval_interval)
        form.addRow("Random init points", self.init_points)
        form.addRow("Densification", self.strategy)
        form.addRow("Max Gaussians", self.max_gaussians)
        form.addRow("Adam moments", self.adam_moments)
        form.addRow("Anti-aliasing", self.antialias)
        form.addRow("Per-image appearance", self.appearance)
        lay.addLayout(form)

        row = QtWidgets.QHBoxLayout()
        self.start_btn = QtWidgets.QPushButton("Start")
        self.pause_btn = QtWidgets.QPushButton("Pause")
        self.stop_btn = QtWidgets.QPushButton("Stop && save")
        for b in (self.start_btn, self.pause_btn, self.stop_btn):
            row.addWidget(b)
        lay.addLayout(row)
        self.start_btn.clicked.connect(self.start_requested)
        self.pause_btn.clicked.connect(self._pause_clicked)
        self.stop_btn.clicked.connect(self.stop_requested)

        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("%v / %m steps")
        lay.addWidget(self.progress)
        self.status = QtWidgets.QLabel("idle")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)

        self.loss_plot = _plot("Training loss (L1 + D-SSIM)", "loss")
        self.count_plot = _plot("Gaussians", "count")
        self.psnr_plot = _plot("Held-out PSNR", "dB")
        self.loss_curve = self.loss_plot.plot(pen=pg.mkPen(ACCENT, width=2))
        self.count_curve = self.count_plot.plot(pen=pg.mkPen(BLUE, width=2))
        self.psnr_curve = self.psnr_plot.plot(pen=pg.mkPen(GREEN, width=2), symbol="o", symbolSize=6,
                                              symbolBrush=GREEN)
        for p in (self.loss_plot, self.count_plot, self.psnr_plot):
            lay.addWidget(p, 1)
        self.steps_x: list[int] = []
        self.loss_y: list[float] = []
        self.count_y: list[int] = []
        self.psnr_x: list[int] = []
        self.psnr_y: list[float] = []
        self.state = "idle"
        self.stale: set[int] = set()
        self._next_plot = 0
        self.total = 0
        self.rate = None
        self._apply_preset(self.preset.currentText())
        self.set_state("idle")

    def _apply_preset(self, name: str) -> None:
        p = self.PRESETS.get(name)
        if not p:
            return
        self.steps.setValue(p["steps"])
        self.max_size.setValue(p["max_size"])
        self.init_points.setValue(p["init_points"])
        self.eval_interval.setValue(p["eval_interval"])

    def _strategy_changed(self) -> None:
        """Max Gaussians takes the chosen strategy's default (a cap for ADC, the budget for MCMC
        and Auto: Auto's number is MCMC's budget or ADC's cap, whichever it picks)."""
        adc = self.strategy.currentData() == "adc"
        self.max_gaussians.setValue(TrainConfig.max_gaussians if adc else TrainConfig.mcmc_budget)

    def use_software_defaults(self, software: bool) -> None:
        self.preset.setCurrentIndex(0 if software else 2)
        self._apply_preset(self.preset.currentText())

    def settings(self) -> dict:
        """The settings as StartTraining / StartPipeline fields."""
        return dict(steps=self.steps.value(), max_size=self.max_size.value(), init_points=self.init_points.value(),
                    eval_interval=self.eval_interval.value(), max_gaussians=self.max_gaussians.value(),
                    adam_moments=self.adam_moments.currentData(), strategy=self.strategy.currentData(),
                    antialias=self.antialias.isChecked(), appearance=self.appearance.currentData())

    def _pause_clicked(self) -> None:
        (self.resume_requested if self.state == "paused" else self.pause_requested).emit()

    def set_dataset(self, path: str | None) -> None:
        self.dataset = path
        self.source.setText(f"Dataset: {path}" if path else "Drop a dataset folder, a video or a .ply on the window")
        self.set_state(self.state)

    def set_state(self, state: str, detail: str = "") -> None:
        self.state = state
        running = state in ("running", "paused", "loading", "stopping")
        self.start_btn.setEnabled(self.dataset is not None and not running)
        self.pause_btn.setEnabled(state in ("running", "paused"))
        self.pause_btn.setText("Resume" if state == "paused" else "Pause")
        self.stop_btn.setEnabled(state in ("running", "paused"))
        for w in (self.preset, self.steps, self.max_size, self.eval_interval, self.init_points, self.max_gaussians,
                  self.adam_moments, self.antialias, self.appearance):
            w.setEnabled(not running)
        self.status.setText(f"{state}: {detail}" if detail else state)

    def reset_curves(self, total: int) -> None:
        self.steps_x, self.loss_y, self.count_y, self.psnr_x, self.psnr_y = [], [], [], [], []
        self.total = total
        self.rate = None
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(0)
        for p in (self.loss_plot, self.count_plot, self.psnr_plot):  # a fixed x axis: no re-layout per point
            p.enableAutoRange(x=False)
            p.setXRange(0, max(total, 1), padding=0.02)
        self._redraw()

    def show_resumed(self, m: M.TrainingResumed) -> None:
        """A project's training continues: where it had stopped (the curves up to there
        follow as TrainMetrics)."""
        self.reset_curves(m.steps)
        self.steps.setValue(m.steps)
        self.progress.setValue(min(m.step, self.progress.maximum()))
        self.source.setText(f"Dataset: {self.dataset}\nResumed at step {m.step:,} of {m.steps:,} "
                            f"(checkpoint of {m.saved.replace('T', ' ')})")

    def on_metrics(self, m: M.TrainMetrics) -> None:
        if m.psnr is not None:
            self.psnr_x.append(m.step)
            self.psnr_y.append(m.psnr)
        if math.isfinite(m.loss):
            self.steps_x.append(m.step)
            self.loss_y.append(max(m.loss, 1e-6))
            self.count_y.append(m.num_gaussians)
            if m.steps_per_sec > 0:
                self.rate = m.steps_per_sec if self.rate is None else 0.7 * self.rate + 0.3 * m.steps_per_sec
            self.progress.setValue(min(m.step, self.progress.maximum()))
            eta = (self.total - m.step) / self.rate if self.rate else None
            self.status.setText(f"step {m.step:,} / {self.total:,} · loss {m.loss:.4f} · {m.num_gaussians:,} Gaussians · "
                                f"{m.steps_per_sec:.1f} steps/s · ETA {format_eta(eta)}")
            self.stale |= {0, 1}
        if m.psnr is not None:
            self.stale.add(2)

    def refresh(self) -> None:
        """Redraw one plot whose data changed (the window calls this several times a
        second, round robin: plotting on every message, or all plots in one paint, would
        cost the GUI thread more than it shows)."""
        if not self.stale or not self.isVisible():
            return
        for _ in range(3):
            k = self._next_plot
            self._next_plot = (k + 1) % 3
            if k in self.stale:
                self.stale.discard(k)
                self._set_data(k)
                return

    def _set_data(self, k: int) -> None:
        if k == 0:
            self.loss_curve.setData(self.steps_x, self.loss_y)
        elif k == 1:
            self.count_curve.setData(self.steps_x, self.count_y)
        else:
            self.psnr_curve.setData(self.psnr_x, self.psnr_y)

    def _redraw(self) -> None:
        self.stale = set()
        for k in range(3):
            self._set_data(k)


class DatasetPanel(QtWidgets.QWidget):
    camera_activated = QtCore.Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QtWidgets.QVBoxLayout(self)
        self.summary = QtWidgets.QLabel("No dataset")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)
        self.list = QtWidgets.QListWidget()
        self.list.setViewMode(QtWidgets.QListView.ViewMode.IconMode)
        self.list.setIconSize(QtCore.QSize(112, 84))
        self.list.setResizeMode(QtWidgets.QListView.ResizeMode.Adjust)
        self.list.setMovement(QtWidgets.QListView.Movement.Static)
        self.list.setSpacing(4)
        self.list.setUniformItemSizes(True)
        self.list.itemActivated.connect(lambda it: self.camera_activated.emit(int(it.data(QtCore.Qt.ItemDataRole.UserRole))))
        self.list.itemDoubleClicked.connect(lambda it: self.camera_activated.emit(int(it.data(QtCore.Qt.ItemDataRole.UserRole))))
        lay.addWidget(self.list, 1)
        self.notes = QtWidgets.QLabel("")
        self.notes.setWordWrap(True)
        self.notes.setObjectName("dim")
        lay.addWidget(self.notes)
        self.legend = QtWidgets.QLabel("Frustums: <span style='color:#ffaa3c'>training</span> · "
                                       "<span style='color:#5ac8ff'>held out</span> · "
                                       "<span style='color:#ffffff'>looking through</span>. "
                                       "Double-click a thumbnail or click a frustum to look through it.")
        self.legend.setWordWrap(True)
        self.legend.setObjectName("dim")
        lay.addWidget(self.legend)

    def set_scene(self, msg: M.SceneLoaded) -> None:
        self.list.clear()
        n_test = sum(c.split == "test" for c in msg.cameras)
        if msg.kind == "ply":
            self.summary.setText(f"{msg.name}: {msg.num_gaussians:,} Gaussians (viewing a PLY, no cameras)")
        else:
            self.summary.setText(f"{msg.name}: {len(msg.cameras)} registered images "
                                 f"({len(msg.cameras) - n_test} training, {n_test} held out) · "
                                 f"{msg.num_gaussians:,} initial Gaussians")
        for i, c in enumerate(msg.cameras):
            it = QtWidgets.QListWidgetItem(self.list)
            it.setText(c.name if len(c.name) <= 16 else "…" + c.name[-15:])
            it.setToolTip(f"{c.name}\n{c.width}x{c.height} · {'held out' if c.split == 'test' else 'training'} · registered")
            it.setData(QtCore.Qt.ItemDataRole.UserRole, i)
            if c.thumbnail:
                img = QtGui.QImage(c.thumbnail, c.thumb_w, c.thumb_h, 3 * c.thumb_w, QtGui.QImage.Format.Format_RGB888).copy()
                pm = QtGui.QPixmap.fromImage(img)
                painter = QtGui.QPainter(pm)
                pen = QtGui.QPen(QtGui.QColor(*(BLUE if c.split == "test" else ACCENT)))
                pen.setWidth(4)
                painter.setPen(pen)
                painter.drawRect(pm.rect().adjusted(2, 2, -2, -2))
                painter.end()
                it.setIcon(QtGui.QIcon(pm))
        self.notes.setText("\n".join(msg.warnings[:6]))

    def select(self, index: int) -> None:
        for k in range(self.list.count()):
            it = self.list.item(k)
            if int(it.data(QtCore.Qt.ItemDataRole.UserRole)) == index:
                self.list.setCurrentItem(it)
                self.list.scrollToItem(it)
                return


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


class ExportPanel(QtWidgets.QWidget):
    export_ply_requested = QtCore.Signal()
    screenshot_requested = QtCore.Signal()
    open_project_requested = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QtWidgets.QVBoxLayout(self)
        self.project = QtWidgets.QLabel("Project folder: –")
        self.project.setWordWrap(True)
        self.project.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.project)
        self.ply_btn = QtWidgets.QPushButton("Export Gaussians as PLY…")
        self.shot_btn = QtWidgets.QPushButton("Save viewport screenshot…")
        self.mesh_btn = QtWidgets.QPushButton("Export textured mesh… (coming with the mesh stage)")
        self.mesh_btn.setEnabled(False)
        self.ply_btn.clicked.connect(self.export_ply_requested)
        self.shot_btn.clicked.connect(self.screenshot_requested)
        for b in (self.ply_btn, self.shot_btn, self.mesh_btn):
            lay.addWidget(b)
        lay.addWidget(QtWidgets.QLabel("Saved:"))
        self.saved = QtWidgets.QListWidget()
        lay.addWidget(self.saved, 1)
        self.ply_btn.setEnabled(False)

    def set_project(self, path: str) -> None:
        self.project.setText(f"Project folder: {path or '–'}")

    def set_can_export(self, ok: bool) -> None:
        self.ply_btn.setEnabled(ok)

    def on_saved(self, msg: M.Saved) -> None:
        self.saved.insertItem(0, f"{msg.kind}: {msg.path}" + (f"  ({msg.detail})" if msg.detail else ""))
