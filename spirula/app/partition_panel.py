"""The Partition panel: the dataset's cameras and SfM points seen from above, the cells
(solid) and their training regions (dashed) drawn over them, counts per part (cameras,
points, estimated Gaussians and VRAM), sliders for the parts and the overlap, and a Train
button that has the engine thread, which owns the device, run spirula/engine/partition/job.py (split
-> the parts as Ray tasks -> merge; M.TrainPartition, spirula/engine/studio/partitioning.py) with a
progress row per part from its messages (:meth:`PartitionPanel.handle`); the merged model is
handed to the viewport (``merged_ready``).

The preview is the engine's own split (spirula/engine/partition/split.py split_scene) of the
model's poses and points, recomputed when a slider moves; nothing is written until Train."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from spirula.engine.studio import protocol as M

from .plots import ACCENT

CELL_COLOURS = ["#ffaa3c", "#5ac8ff", "#7be07b", "#ff6f91", "#c39bff", "#ffe066", "#4fd1c5", "#f78c6b"]
MAX_DRAWN_POINTS = 6000


class TopView(QtWidgets.QWidget):
    """Cameras (dots), SfM points (grey) and the cells, in ground coordinates, from above."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMinimumHeight(220)
        self.cams = np.zeros((0, 2))
        self.points = np.zeros((0, 2))
        self.cells: list = []
        self.bounds = [0.0, 1.0, 0.0, 1.0]

    def set_data(self, cams: np.ndarray, points: np.ndarray, cells: list, bounds) -> None:
        self.cams, self.points, self.cells, self.bounds = cams, points, cells, list(bounds)
        self.update()

    def _mapper(self):
        x0, x1, y0, y1 = self.bounds
        pad = 0.08 * max(x1 - x0, y1 - y0, 1e-9)
        x0, x1, y0, y1 = x0 - pad, x1 + pad, y0 - pad, y1 + pad
        s = min(self.width() / (x1 - x0), self.height() / (y1 - y0))
        ox = (self.width() - s * (x1 - x0)) / 2
        oy = (self.height() - s * (y1 - y0)) / 2
        return lambda x, y: (ox + s * (np.asarray(x) - x0), self.height() - (oy + s * (np.asarray(y) - y0)))

    def paintEvent(self, _event) -> None:
        p = QtGui.QPainter(self)
        p.fillRect(self.rect(), QtGui.QColor("#15171c"))
        if not len(self.cams):
            p.setPen(QtGui.QColor("#888"))
            p.drawText(self.rect(), QtCore.Qt.AlignmentFlag.AlignCenter, "Open a COLMAP dataset to partition it")
            return
        f = self._mapper()
        p.setPen(QtCore.Qt.PenStyle.NoPen)
        p.setBrush(QtGui.QColor(150, 150, 150, 110))
        px, py = f(self.points[:, 0], self.points[:, 1])
        for x, y in zip(px, py):  # a few thousand dots, drawn once per repaint
            p.drawRect(QtCore.QRectF(x, y, 1.5, 1.5))
        for k, c in enumerate(self.cells):
            colour = QtGui.QColor(CELL_COLOURS[k % len(CELL_COLOURS)])
            for box, style, width in ((c.extent, QtCore.Qt.PenStyle.SolidLine, 2), (c.region, QtCore.Qt.PenStyle.DashLine, 1)):
                (ax, ay), (bx, by) = f(box[0], box[2]), f(box[1], box[3])
                p.setPen(QtGui.QPen(colour, width, style))
                p.setBrush(QtCore.Qt.BrushStyle.NoBrush)
                p.drawRect(QtCore.QRectF(QtCore.QPointF(float(ax), float(by)), QtCore.QPointF(float(bx), float(ay))))
            cx, cy = f(0.5 * (c.extent[0] + c.extent[1]), 0.5 * (c.extent[2] + c.extent[3]))
            p.setPen(colour)
            p.drawText(QtCore.QPointF(float(cx) - 8, float(cy)), f"{k}")
        p.setPen(QtCore.Qt.PenStyle.NoPen)
        p.setBrush(QtGui.QColor(*ACCENT))
        cx, cy = f(self.cams[:, 0], self.cams[:, 1])
        for x, y in zip(cx, cy):
            p.drawEllipse(QtCore.QPointF(float(x), float(y)), 2.5, 2.5)


class PartitionPanel(QtWidgets.QWidget):
    merged_ready = QtCore.Signal(str)     # the merged splat.ply, for the viewport

    def __init__(self, parent=None):
        super().__init__(parent)
        self.geo = None
        self.partition = None
        self.running = False      # a TrainPartition is under way (its Done or Error ends it)
        self.send = None          # the session's send (spirula/app/window.py): TrainPartition, Cancel
        self.dataset: Path | None = None
        lay = QtWidgets.QVBoxLayout(self)
        self.summary = QtWidgets.QLabel("No dataset")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)
        for label in (self.summary,):  # a long path must not widen the dock (and shrink the viewport)
            label.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
        self.view = TopView()
        lay.addWidget(self.view, 1)
        form = QtWidgets.QFormLayout()
        self.parts = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.parts.setRange(1, 16)
        self.parts.setValue(4)
        self.overlap = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.overlap.setRange(0, 45)
        self.overlap.setValue(15)
        self.parts_label, self.overlap_label = QtWidgets.QLabel(), QtWidgets.QLabel()
        for label, slider in ((self.parts_label, self.parts), (self.overlap_label, self.overlap)):
            row = QtWidgets.QHBoxLayout()
            row.addWidget(slider, 1)
            row.addWidget(label)
            form.addRow("Parts" if slider is self.parts else "Overlap", row)
            slider.valueChanged.connect(self.refresh)
        lay.addLayout(form)
        self.table = QtWidgets.QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["part", "cameras", "points", "Gaussians", "VRAM"])
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        lay.addWidget(self.table)
        self.train_button = QtWidgets.QPushButton("Train parts")
        self.train_button.clicked.connect(self.train)
        self.stop_button = QtWidgets.QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addWidget(self.train_button)
        buttons.addWidget(self.stop_button)
        lay.addLayout(buttons)
        self.progress = QtWidgets.QVBoxLayout()
        lay.addLayout(self.progress)
        self.rows: dict[str, QtWidgets.QProgressBar] = {}
        self.status = QtWidgets.QLabel("")
        self.status.setWordWrap(True)
        self.status.setObjectName("dim")
        self.status.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
        lay.addWidget(self.status)
        self._set_enabled(False)

    def _set_enabled(self, on: bool) -> None:
        running = self.running
        self.train_button.setEnabled(on and not running)
        self.stop_button.setEnabled(running)
        self.parts.setEnabled(not running)
        self.overlap.setEnabled(not running)

    def settings(self):
        from spirula.engine.partition.split import SplitSettings

        return SplitSettings(parts=self.parts.value(), overlap=self.overlap.value() / 100.0, min_cameras=4)

    def set_scene(self, msg: M.SceneLoaded) -> None:
        """A dataset was opened: read its COLMAP model (poses and points, no pixels)."""
        from spirula.engine.errors import SpirulaError
        from spirula.engine.partition.geometry import read_geometry

        self.geo, self.partition = None, None
        if msg.kind not in ("dataset", "review"):  # a dataset under review or training
            self.summary.setText("Partitioning needs a COLMAP dataset (open one)")
            self.view.set_data(np.zeros((0, 2)), np.zeros((0, 2)), [], [0, 1, 0, 1])
            self._set_enabled(False)
            return
        try:
            self.geo = read_geometry(Path(msg.path))
        except SpirulaError as e:
            self.summary.setText(f"Cannot partition {msg.name}: {e}")
            self._set_enabled(False)
            return
        self.dataset = Path(msg.path)
        self.refresh()

    def refresh(self) -> None:
        """Split again with the sliders' values and redraw."""
        from spirula.engine.errors import SpirulaError
        from spirula.engine.partition.geometry import ground_frame, to_ground, up_axis
        from spirula.engine.partition.split import split_scene

        self.parts_label.setText(str(self.parts.value()))
        self.overlap_label.setText(f"{self.overlap.value()} %")
        if self.geo is None:
            return
        geo = self.geo
        try:
            self.partition = split_scene(geo, self.settings())
        except (SpirulaError, ValueError) as e:
            self.partition = None
            self.summary.setText(f"{geo.root.name}: {e}")
            frame = ground_frame(up_axis(geo.w2c, geo.centers))
            cams = to_ground(geo.centers, frame)
            lo, hi = cams.min(axis=0), cams.max(axis=0)
            self.view.set_data(cams, np.zeros((0, 2)), [], [lo[0], hi[0], lo[1], hi[1]])
            self.table.setRowCount(0)
            self._set_enabled(False)
            return
        part = self.partition
        pts = geo.points[:: max(1, len(geo.points) // MAX_DRAWN_POINTS)]
        self.view.set_data(to_ground(geo.centers, part.frame), to_ground(pts, part.frame), part.cells, part.bounds)
        crowded = part.crowding_warning(len(geo.points))
        self.summary.setText(f"{geo.root.name}: {len(geo.names)} cameras, {len(geo.points):,} SfM points, "
                             f"{len(part.cells)} parts, {len(part.test)} held-out views"
                             + (f". Note: {crowded}" if crowded else ""))
        self.table.setRowCount(len(part.cells))
        for r, c in enumerate(part.cells):
            for col, text in enumerate((str(c.index), f"{len(c.cameras)} ({len(c.joined)} seen)", f"{c.points:,}",
                                        f"~{c.gaussians:,}", f"~{c.vram_bytes / 2**30:.2f} GiB")):
                self.table.setItem(r, col, QtWidgets.QTableWidgetItem(text))
        self._set_enabled(True)

    def train(self) -> None:
        """Run split -> train (Ray) -> merge on the engine thread, which owns the device
        (M.TrainPartition, spirula/engine/studio/partitioning.py); its messages come back through
        :meth:`handle`."""
        from spirula.engine.partition.run_parts import INSTALL_HINT, _import_ray

        if self.partition is None or self.dataset is None or self.send is None:
            return
        for bar in self.rows.values():
            bar.deleteLater()
        self.rows.clear()
        parts_dir = self.dataset.parent / f"{self.dataset.name}-parts"
        project = self.dataset.parent / f"{self.dataset.name}-partitioned"
        self.running = True
        self.send(M.TrainPartition(str(self.dataset), str(parts_dir), str(project), self.settings()))
        ray_note = "" if _import_ray() is not None else f" Ray is not installed ({INSTALL_HINT}): one part after another."
        self.status.setText(f"Training {len(self.partition.cells)} parts into {parts_dir}.{ray_note}")
        self._set_enabled(True)

    def stop(self) -> None:
        """Stop the parts (they checkpoint and end; Train again resumes them)."""
        if self.running and self.send is not None:
            self.send(M.Cancel(save=True))

    def handle(self, msg) -> None:
        """A message of the partition job (M.PartitionMessage's) -> one progress row per part,
        then the merged model."""
        from spirula.engine.messages import Done, Error, StageFinished, StageProgress, StageStarted, Warning

        if isinstance(msg, StageStarted) and msg.stage.startswith("part_"):
            bar = QtWidgets.QProgressBar()
            bar.setRange(0, msg.total or 1)
            bar.setFormat(f"{msg.stage}: %v / %m steps")
            self.progress.addWidget(bar)
            self.rows[msg.stage] = bar
        elif isinstance(msg, StageProgress) and msg.stage in self.rows:
            self.rows[msg.stage].setValue(msg.done)
            self.rows[msg.stage].setToolTip(msg.detail)
        elif isinstance(msg, StageFinished) and msg.stage in self.rows:
            bar = self.rows[msg.stage]
            bar.setValue(msg.summary.get("step") or bar.value())
            peak = msg.summary.get("peak_vram_mib")
            done = "already trained" if msg.cached else ("done" if msg.summary.get("done") else "stopped")
            bar.setFormat(f"{msg.stage}: {done}" + (f", peak {peak:.0f} MiB" if peak else ""))
        elif isinstance(msg, Warning):
            self.status.setText(msg.text)
        elif isinstance(msg, Error):
            self.status.setText(f"<span style='color:#ff6f6f'>{msg.text}</span>")
            self.running = False
        elif isinstance(msg, Done):
            self.running = False
            ply = msg.result.get("ply")
            if ply:
                psnr = msg.result.get("psnr")
                self.status.setText(f"Merged {msg.result['num_gaussians']:,} Gaussians into {ply}"
                                    + (f" · held-out PSNR {psnr:.2f} dB" if psnr is not None else ""))
                self.merged_ready.emit(ply)
            else:
                self.status.setText("Stopped: Train again resumes the unfinished parts")
        if not self.running:
            self._set_enabled(self.partition is not None)
