"""The Training panel: the run's settings (presets, strategy, budget), start / pause / stop,
progress with the time left, and the loss, Gaussian count and held-out PSNR curves."""

from __future__ import annotations

import math

from PySide6 import QtCore, QtWidgets

from spirula.engine import settings as table
from spirula.engine.config import TrainConfig, preset_settings
from spirula.engine.studio import protocol as M

from .plots import ACCENT, BLUE, GREEN, fit_y, hide_last, pg, plot, show_empty, show_last


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

    # The studio's presets: their engine settings are spirula/engine/settings.py PRESETS' (software: a
    # machine without a GPU, why its values in its comment there; fast: `--preset fast`), set
    # there only; the rest (image size, init points, held-out PSNR interval) are the panel's.
    PRESETS = {
        "Software device (2,000 steps)": {**preset_settings("software")},
        "Quick": dict(steps=7_000, max_size=960, init_random_points=100_000, eval_interval=1_000, densify_from=500),
        "Full (3DGS)": dict(steps=30_000, max_size=1600, init_random_points=100_000, eval_interval=5_000,
                            densify_from=500),
        "Fast (10,000 steps)": dict(max_size=1600, init_random_points=100_000, eval_interval=1_000, densify_from=500,
                                    max_gaussians=TrainConfig.mcmc_budget, **preset_settings("fast")),
    }

    MOMENTS = (("float32", "fp32"), ("bfloat16 (half the memory)", "bf16"))
    STRATEGIES = (("Auto (MCMC; ADC for short runs)", "auto"), ("ADC (3DGS)", "adc"), ("MCMC (exact budget)", "mcmc"))
    APPEARANCES = (("Automatic (exposure for a video)", None), ("Off", "off"),
                   ("Exposure (gain per channel)", "exposure"), ("Affine (3x4 colour matrix)", "affine"),
                   ("Bilateral grid", "bilagrid"))

    def __init__(self, parent=None):
        super().__init__(parent)
        self.dataset: str | None = None
        self.preset_extra: dict = {}  # the chosen preset's settings without a widget (_apply_preset)
        self.advanced: dict = {}      # settings set in the All options editor without a widget here
        lay = QtWidgets.QVBoxLayout(self)
        self.source = QtWidgets.QLabel("Drop a dataset, project or photo folder, a video or a splat file on the window")
        self.source.setWordWrap(True)
        self.source.setObjectName("heading")
        lay.addWidget(self.source)

        form = QtWidgets.QFormLayout()
        form.setVerticalSpacing(2)  # the basic group is ten rows with masks: the panel must fit its dock unscrolled
        self.preset = QtWidgets.QComboBox()
        self.preset.addItems(list(self.PRESETS))
        self.preset.currentTextChanged.connect(self._apply_preset)
        # the basic group of the settings table (spirula/engine/settings.py): its labels, ranges and help
        self.all_options = QtWidgets.QPushButton("All options…")
        self.all_options.setToolTip("Every training setting (spirula/engine/settings.py), as `spirula train --help` lists them")
        self.all_options.clicked.connect(self._edit_all)
        top = QtWidgets.QHBoxLayout()  # beside the preset: the panel must fit a small screen unscrolled
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.preset, 1)
        top.addWidget(self.all_options)
        form.addRow("Preset", top)
        filters = QtWidgets.QHBoxLayout()  # the switches share one row: the window must fit a small screen
        filters.setContentsMargins(0, 0, 0, 0)
        for name in self.ORDER:
            st = table.BY_NAME[name]
            w = self._basic_widget(st)
            w.setToolTip(f"{st.help} ({st.option})")
            setattr(self, self.WIDGETS[name], w)
            if st.type is bool:
                filters.addWidget(w)
                if name == self.ORDER[-2]:
                    filters.addStretch(1)
                    form.addRow("Training with", filters)
            else:
                form.addRow(st.title, w)
        self.strategy.currentIndexChanged.connect(self._strategy_changed)
        self._strategy_changed()  # Max Gaussians starts at the default strategy's number
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
        self.progress.setFormat("no training yet")  # "%v / %m steps" once a run has its length
        lay.addWidget(self.progress)
        self.status = QtWidgets.QLabel("idle")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)

        self.loss_plot = plot("Training loss (L1 + D-SSIM)", "loss")
        self.count_plot = plot("Gaussians", "count")
        self.psnr_plot = plot("Held-out PSNR", "dB")
        self.loss_curve = self.loss_plot.plot(pen=pg.mkPen(ACCENT, width=2))
        self.count_curve = self.count_plot.plot(pen=pg.mkPen(BLUE, width=2))
        self.psnr_curve = self.psnr_plot.plot(pen=pg.mkPen(GREEN, width=2), symbol="o", symbolSize=6,
                                              symbolBrush=GREEN)
        for p in (self.loss_plot, self.count_plot, self.psnr_plot):
            # the x axis is steps (the titles say "at step N"): its label's room goes to the values
            p.getAxis("bottom").showLabel(False)
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
        self._redraw()

    # the basic settings' rows, in this order: every setting of the table's basic group, once
    # (tests/app/test_training_panel.py); the switches (bools) share the row before the last
    ORDER = ("steps", "max_size", "eval_interval", "init_random_points", "strategy", "densify_from", "max_gaussians",
             "masks", "adam_moments", "antialias", "geometry", "appearance")
    # how the panel shows some of them (the rest: the table's range, labels and default)
    # masks (spirula/engine/ingest/masks.py): the review's notes say what "auto" found
    MASKS = (("Automatic (ignore a masks folder, cut out alpha)", "auto"), ("Ignore masked pixels", "ignore"),
             ("Cut out (masked = empty space)", "cutout"), ("Off", "off"))
    CHOICE_LABELS = {"strategy": STRATEGIES, "adam_moments": MOMENTS, "appearance": APPEARANCES, "masks": MASKS}
    PANEL_DEFAULTS = {"geometry": True}   # the studio exports meshes: the geometry phase is on
    SPIN = {"steps": dict(singleStep=100), "max_size": dict(singleStep=16, suffix=" px", special="as stored"),
            "eval_interval": dict(singleStep=100, special="at the end"), "init_random_points": dict(singleStep=1000),
            "densify_from": dict(singleStep=100), "max_gaussians": dict(singleStep=500_000, groups=True)}

    def _basic_widget(self, st):
        """The panel's widget of basic setting ``st`` (spirula/engine/settings.py Setting)."""
        default = self.PANEL_DEFAULTS.get(st.name, st.default)
        if st.type is bool:
            box = QtWidgets.QCheckBox(st.title[0].lower() + st.title[1:])
            box.setChecked(bool(default))
            return box
        if st.choices:
            combo = QtWidgets.QComboBox()
            for label, value in self.CHOICE_LABELS.get(st.name, [(str(c), c) for c in st.choices]):
                combo.addItem(label, value)
            return combo
        opts = self.SPIN.get(st.name, {})
        spin = QtWidgets.QSpinBox(minimum=0 if st.zero else int(st.low or 0), maximum=2_000_000_000,
                                  singleStep=opts.get("singleStep", 1))
        if "suffix" in opts:
            spin.setSuffix(opts["suffix"])
        if opts.get("special"):
            spin.setSpecialValueText(opts["special"])
        spin.setGroupSeparatorShown(bool(opts.get("groups")))
        spin.setValue(int(default))
        return spin

    # the basic settings with a widget here: table name -> attribute
    WIDGETS = {"steps": "steps", "max_size": "max_size", "init_random_points": "init_points",
               "eval_interval": "eval_interval", "densify_from": "densify_from", "max_gaussians": "max_gaussians",
               "strategy": "strategy", "adam_moments": "adam_moments", "antialias": "antialias",
               "geometry": "geometry", "appearance": "appearance", "masks": "masks"}

    def _apply_preset(self, name: str) -> None:
        p = self.PRESETS.get(name)
        if not p:
            return
        self._set_widgets(p)
        # the preset's settings without a widget, sent with the others
        self.preset_extra = {k: v for k, v in p.items() if k not in self.WIDGETS}

    def _set_widgets(self, values: dict) -> None:
        """Show the settings of ``values`` that have a widget here."""
        for name, attr in self.WIDGETS.items():
            if name not in values:
                continue
            w, v = getattr(self, attr), values[name]
            if isinstance(w, QtWidgets.QComboBox):
                k = 0 if v is None and w.itemData(0) is None else w.findData(v)
                if k >= 0:
                    w.setCurrentIndex(k)
            elif isinstance(w, QtWidgets.QCheckBox):
                w.setChecked(str(v).lower() in ("1", "true", "on"))
            else:
                try:
                    w.setValue(int(v))
                except (TypeError, ValueError):
                    pass

    def _strategy_changed(self) -> None:
        """Max Gaussians takes the chosen strategy's default (a cap for ADC, the budget for MCMC
        and Auto: Auto's number is MCMC's budget or ADC's cap, whichever it picks)."""
        if getattr(self, "_restoring", False):
            return
        adc = self.strategy.currentData() == "adc"
        self.max_gaussians.setValue(TrainConfig.max_gaussians if adc else TrainConfig.mcmc_budget)

    def use_software_defaults(self, software: bool) -> None:
        self.preset.setCurrentIndex(0 if software else 2)
        self._apply_preset(self.preset.currentText())

    def settings(self) -> dict:
        """The settings as StartTraining fields (spirula/engine/settings.py names): the widgets', the
        preset's without a widget, and those set in the All options editor (they win)."""
        out = dict(self.preset_extra)
        out.update(steps=self.steps.value(), max_size=self.max_size.value(),
                   init_random_points=self.init_points.value(), eval_interval=self.eval_interval.value(),
                   max_gaussians=self.max_gaussians.value(), adam_moments=self.adam_moments.currentData(),
                   strategy=self.strategy.currentData(), antialias=self.antialias.isChecked(),
                   appearance=self.appearance.currentData(), densify_from=self.densify_from.value(),
                   geometry=self.geometry.isChecked(), masks=self.masks.currentData())
        out.update(self.advanced)
        return out

    def values(self) -> dict:
        """The settings and the preset, to remember (spirula/app/remembered.py)."""
        return dict(self.settings(), preset=self.preset.currentText())

    def restore(self, v: dict) -> None:
        """Settings remembered from an earlier session or of a project to restart (unknown or
        missing keys are skipped): the basic ones into the widgets, the others kept as set in
        the All options editor."""
        from spirula.engine import settings as table

        v = {("init_random_points" if k == "init_points" else k): x for k, x in v.items()}  # remembered before
        if v.get("preset") in self.PRESETS:
            self.preset.setCurrentText(v["preset"])
        self._restoring = True  # the strategy's default count must not replace the one restored
        try:
            self._set_widgets(v)
        finally:
            self._restoring = False
        self.advanced = {k: x for k, x in v.items() if k in table.BY_NAME and k not in self.WIDGETS
                         and k not in self.preset_extra and x is not None}
        self.advanced.update({k: v[k] for k in self.preset_extra if k in v and v[k] is not None})

    def all_settings(self) -> dict:
        """Every setting this panel would train with (what the All options editor shows)."""
        from spirula.engine.config import run_config, settings_of

        return settings_of(run_config(self.settings()))

    def _edit_all(self) -> None:
        from .settings_editor import edit

        shown = self.all_settings()
        automatic = self.appearance.currentData() is None

        def done(values: dict) -> None:
            if automatic and values.get("appearance") == shown["appearance"]:
                values = dict(values, appearance=None)  # left as it was: still by the input kind
            self.restore(values)

        self.editor = edit(self, shown, done)

    def _pause_clicked(self) -> None:
        (self.resume_requested if self.state == "paused" else self.pause_requested).emit()

    def set_dataset(self, path: str | None) -> None:
        if path != self.dataset and self.state == "finished":
            self.state = "idle"           # another dataset: its first run, not "Train again"
        self.dataset = path
        self.source.setText(f"Dataset: {path}" if path else
                            "Drop a dataset, project or photo folder, a video or a splat file on the window")
        self.set_state(self.state)

    def set_state(self, state: str, detail: str = "") -> None:
        self.state = state
        running = state in ("running", "paused", "loading", "stopping", "meshing", "partitioning")
        self.start_btn.setEnabled(self.dataset is not None and not running)
        # after a finished run Start trains a new project from the same dataset: say so
        again = state == "finished"
        self.start_btn.setText("Train again" if again else "Start")
        self.start_btn.setToolTip("Trains a new project from the same dataset; the finished one stays on disk"
                                  if again else "Train the dataset with these settings")
        self.pause_btn.setEnabled(state in ("running", "paused"))
        self.pause_btn.setText("Resume" if state == "paused" else "Pause")
        # while loading or reconstructing (decode, SfM) the same button cancels: what finished stays on disk
        self.stop_btn.setEnabled(state in ("running", "paused", "loading"))
        self.stop_btn.setText("Cancel" if state == "loading" else "Stop && save")
        for w in (self.preset, self.steps, self.max_size, self.eval_interval, self.init_points, self.max_gaussians,
                  self.adam_moments, self.antialias, self.appearance, self.strategy, self.densify_from, self.geometry,
                  self.all_options):
            w.setEnabled(not running)
        self.status.setText(f"{state}: {detail}" if detail else state)

    def set_total(self, total: int) -> None:
        self.total = total
        self.progress.setRange(0, max(total, 1))
        self.progress.setFormat("%v / %m steps")

    def reset_curves(self, total: int) -> None:
        self.steps_x, self.loss_y, self.count_y, self.psnr_x, self.psnr_y = [], [], [], [], []
        self.rate = None
        self.set_total(total)
        self.progress.setValue(0)
        for p in (self.loss_plot, self.count_plot, self.psnr_plot):  # a fixed x axis: no re-layout per point
            p.enableAutoRange(x=False)
            p.setXRange(0, max(total, 1), padding=0.02)
        self._redraw()

    def clear(self) -> None:
        """Another project: no curves, no progress, and a finished or failed state gone
        (the settings stay: they are the user's)."""
        self.steps_x, self.loss_y, self.count_y, self.psnr_x, self.psnr_y = [], [], [], [], []
        self.rate, self.total = None, 0
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("no training yet")
        for p in (self.loss_plot, self.count_plot, self.psnr_plot):
            p.enableAutoRange(x=True)
        if self.state in ("finished", "failed"):
            self.set_state("idle")
        self._redraw()

    def show_resumed(self, m: M.TrainingResumed) -> None:
        """A project's training continues: where it had stopped (the curves up to there
        follow as TrainMetrics)."""
        self.reset_curves(m.steps)
        self.steps.setValue(m.steps)
        self.progress.setValue(min(m.step, self.progress.maximum()))
        self.source.setText(f"Dataset: {self.dataset}\nResumed at step {m.step:,} of {m.steps:,} "
                            f"(checkpoint of {m.saved.replace('T', ' ')})")

    def show_viewed(self, m: M.ProjectViewed) -> None:
        """A finished project on view: its run's length and where it ended (its curves follow
        as TrainMetrics)."""
        self.reset_curves(m.steps)
        self.progress.setValue(min(m.step, self.progress.maximum()))
        psnr = f", held-out PSNR {m.psnr:.2f} dB" if m.psnr is not None else ""
        self.source.setText(f"Viewing {m.project}: trained {m.step:,} of {m.steps:,} steps{psnr}")

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

    # per plot: its curve's data, the words while empty, and how its last value reads
    LAST = {0: lambda v: f"{v:.4f}", 1: lambda v: f"{int(v):,}", 2: lambda v: f"{v:.2f} dB"}

    def _set_data(self, k: int) -> None:
        plot, curve, x, y = ((self.loss_plot, self.loss_curve, self.steps_x, self.loss_y),
                             (self.count_plot, self.count_curve, self.steps_x, self.count_y),
                             (self.psnr_plot, self.psnr_curve, self.psnr_x, self.psnr_y))[k]
        curve.setData(x, y)
        if y:  # the last value in the title and beside the point, the values on the axes
            show_last(plot, x[-1], y[-1], f"{self.LAST[k](y[-1])} at step {x[-1]:,}", y)
        else:
            show_empty(plot, True, "after the first evaluation" if k == 2 else "waiting for the first steps")
            hide_last(plot)
        fit_y(plot, y, include_zero=k == 1, integer=k == 1)

    def _redraw(self) -> None:
        self.stale = set()
        for k in range(3):
            self._set_data(k)
