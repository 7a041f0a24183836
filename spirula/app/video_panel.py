"""The Video panel: keyframes taken from the viewport's camera (a list: remove, clear; saved to
and loaded from the keyframe JSON file `spirula render --keyframes` reads, times included), a
preview that plays the interpolated path in the viewport, and "Export video…": an orbit or
the keyframes at a width, height, frame rate and duration, rendered on the engine thread
(M.RenderVideo: spirula/engine/studio/rendering.py) with its progress and Cancel."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from spirula.engine.jobs.render_video import VideoSettings
from spirula.engine.errors import SpirulaError
from spirula.engine.splat.camera_path import keyframe_path, read_keyframes, write_keyframes
from spirula.engine.studio import protocol as M

# a software device renders a short small video in a minute; a GPU takes the defaults
SOFTWARE_VIDEO = dict(width=640, height=360, fps=24, seconds=4.0)


class VideoPanel(QtWidgets.QWidget):
    export_requested = QtCore.Signal()        # ask where, then render_command(path)
    cancel_requested = QtCore.Signal()
    preview_view = QtCore.Signal(tuple, float)  # a preview frame's w2c (16 floats) and fov
    preview_ended = QtCore.Signal()
    path_changed = QtCore.Signal()            # the keyframes or the frame's shape changed: path_overlay() again

    def __init__(self, current_view, parent=None):
        """``current_view()``: the viewport camera's (c2w [4, 4] float64, OpenCV axes; vertical fov degrees)."""
        super().__init__(parent)
        self.current_view = current_view
        self.source = ""
        self.keyframes: list[tuple[tuple, float]] = []   # (c2w 16 floats row-major, fov degrees)
        self.key_times: list[float] | None = None        # seconds, from a loaded file; None: spread evenly
        self.rendering = False
        self._preview: tuple[np.ndarray, np.ndarray] | None = None
        self._preview_i = 0
        self.timer = QtCore.QTimer(self)
        self.timer.timeout.connect(self._preview_step)

        lay = QtWidgets.QVBoxLayout(self)
        keys = QtWidgets.QGroupBox("Keyframes (from the viewport's camera)")
        kl = QtWidgets.QVBoxLayout(keys)
        self.key_list = QtWidgets.QListWidget()
        self.key_list.setMaximumHeight(140)
        kl.addWidget(self.key_list)
        row = QtWidgets.QHBoxLayout()
        self.add_btn = QtWidgets.QPushButton("Add keyframe")
        self.remove_btn = QtWidgets.QPushButton("Remove")
        self.clear_btn = QtWidgets.QPushButton("Clear")
        self.add_btn.clicked.connect(self.add_keyframe)
        self.remove_btn.clicked.connect(self.remove_keyframe)
        self.clear_btn.clicked.connect(self.clear_keyframes)
        for b in (self.add_btn, self.remove_btn, self.clear_btn):
            row.addWidget(b)
        kl.addLayout(row)
        row = QtWidgets.QHBoxLayout()
        self.save_btn = QtWidgets.QPushButton("Save keyframes…")
        self.load_btn = QtWidgets.QPushButton("Load keyframes…")
        self.save_btn.setToolTip("A JSON file `spirula render --keyframes FILE` reads (camera-to-world, "
                                 "field of view and time of each keyframe)")
        self.save_btn.clicked.connect(self._ask_save)
        self.load_btn.clicked.connect(self._ask_load)
        row.addWidget(self.save_btn)
        row.addWidget(self.load_btn)
        kl.addLayout(row)
        self.preview_btn = QtWidgets.QPushButton("Preview path")
        self.preview_btn.setCheckable(True)
        self.preview_btn.toggled.connect(self._preview_toggled)
        kl.addWidget(self.preview_btn)
        lay.addWidget(keys)

        box = QtWidgets.QGroupBox("Video (H.264 MP4)")
        form = QtWidgets.QFormLayout(box)
        d = VideoSettings()
        self.path = QtWidgets.QComboBox()
        self.path.addItem("Orbit about the subject", "orbit")
        self.path.addItem("The keyframes", "keyframes")
        self.width = QtWidgets.QSpinBox(minimum=16, maximum=8192, singleStep=2, value=d.width)
        self.height = QtWidgets.QSpinBox(minimum=16, maximum=8192, singleStep=2, value=d.height)
        self.fps = QtWidgets.QSpinBox(minimum=1, maximum=240, value=d.fps)
        self.seconds = QtWidgets.QDoubleSpinBox(minimum=0.1, maximum=3600.0, decimals=2, value=d.seconds)
        self.path.currentIndexChanged.connect(lambda _: self._update())
        self.width.valueChanged.connect(lambda _: self.path_changed.emit())
        self.height.valueChanged.connect(lambda _: self.path_changed.emit())
        for label, w in (("Camera path", self.path), ("Width (px)", self.width), ("Height (px)", self.height),
                         ("Frames per second", self.fps), ("Seconds", self.seconds)):
            form.addRow(label, w)
        row = QtWidgets.QHBoxLayout()
        self.export_btn = QtWidgets.QPushButton("Export video…")
        self.cancel_btn = QtWidgets.QPushButton("Cancel")
        self.export_btn.clicked.connect(self.export_requested)
        self.cancel_btn.clicked.connect(self.cancel_requested)
        row.addWidget(self.export_btn, 1)
        row.addWidget(self.cancel_btn)
        form.addRow(row)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status = QtWidgets.QLabel("Open a trained project or a splat file first")
        self.status.setWordWrap(True)
        self.status.setObjectName("dim")
        form.addRow(self.progress)
        form.addRow(self.status)
        lay.addWidget(box)
        lay.addStretch(1)
        self._update()

    def use_software_defaults(self, software: bool) -> None:
        if software:
            self.width.setValue(SOFTWARE_VIDEO["width"])
            self.height.setValue(SOFTWARE_VIDEO["height"])
            self.fps.setValue(SOFTWARE_VIDEO["fps"])
            self.seconds.setValue(SOFTWARE_VIDEO["seconds"])

    def values(self) -> dict:
        """The video settings, remembered for the next launch (spirula/app/remembered.py)."""
        return {"width": self.width.value(), "height": self.height.value(), "fps": self.fps.value(),
                "seconds": self.seconds.value()}

    def restore(self, v: dict) -> None:
        try:
            for name, cast in (("width", int), ("height", int), ("fps", int), ("seconds", float)):
                if name in v:
                    getattr(self, name).setValue(cast(v[name]))
        except (TypeError, ValueError):
            return

    # --- the source ------------------------------------------------------------------------------
    def set_source(self, source: str) -> None:
        """What the video shows: a trained project folder or a splat file ("" none)."""
        self.source = source
        if not self.rendering:
            self.status.setText(f"Ready: {source}" if source else "Open a trained project or a splat file first")
        self._update()

    # --- keyframes -------------------------------------------------------------------------------
    def add_keyframe(self) -> None:
        c2w, fov = self.current_view()
        c2w = np.asarray(c2w, np.float64).reshape(4, 4)
        self.keyframes.append((tuple(float(v) for v in c2w.reshape(-1)), float(fov)))
        self.key_times = None  # a new keyframe: spread them evenly again
        if len(self.keyframes) >= 2:  # keyframes taken: the video follows them
            self.path.setCurrentIndex(self.path.findData("keyframes"))
        self._relist()

    def remove_keyframe(self) -> None:
        k = self.key_list.currentRow()
        if k < 0:
            k = len(self.keyframes) - 1
        if k < 0:
            return
        del self.keyframes[k]
        if self.key_times is not None:
            del self.key_times[k]
        self._relist()

    def clear_keyframes(self) -> None:
        self.keyframes.clear()
        self.key_times = None
        self._relist()

    def _times(self) -> np.ndarray | None:
        return None if self.key_times is None else np.asarray(self.key_times, np.float64)

    def _relist(self) -> None:
        self.key_list.clear()
        for i, (c2w, fov) in enumerate(self.keyframes):
            x, y, z = c2w[3], c2w[7], c2w[11]
            when = f" at {self.key_times[i]:.2f} s" if self.key_times is not None else ""
            self.key_list.addItem(f"{i + 1}: at ({x:.2f}, {y:.2f}, {z:.2f}), fov {fov:.0f}°{when}")
        self._update()
        self.path_changed.emit()

    # --- keyframe files --------------------------------------------------------------------------
    def save_keyframes(self, path: str) -> None:
        """Write the keyframes to ``path`` (spirula/engine/splat/camera_path.py write_keyframes) with the
        times the video gives them (loaded, or spread evenly over the duration)."""
        c2w = np.array([np.reshape(k[0], (4, 4)) for k in self.keyframes])
        fovs = np.array([k[1] for k in self.keyframes])
        times = self._times()
        if times is None:
            n = max(int(round(self.fps.value() * self.seconds.value())), 1)
            times = np.linspace(0.0, (n - 1) / self.fps.value(), len(c2w)) if len(c2w) > 1 else np.zeros(1)
        try:
            write_keyframes(path, c2w, fovs, times)
        except OSError as e:
            self.status.setText(f"cannot write {path}: {e.strerror or e}")
            return
        self.status.setText(f"Saved {len(c2w)} keyframes to {path}")

    def load_keyframes(self, path: str) -> None:
        """Replace the keyframes with those of ``path`` (read_keyframes; its times kept, and the
        duration made long enough to reach the last); a bad file's one line in the status."""
        try:
            c2w, fovs, times = read_keyframes(path)
        except SpirulaError as e:
            self.status.setText(str(e))
            return
        self.keyframes = [(tuple(float(v) for v in m.reshape(-1)), float(f)) for m, f in zip(c2w, fovs)]
        self.key_times = None if times is None else [float(t) for t in times]
        if times is not None and times[-1] + 1.0 / self.fps.value() > self.seconds.value():
            self.seconds.setValue(float(times[-1]) + 1.0 / self.fps.value())
        if len(self.keyframes) >= 2:
            self.path.setCurrentIndex(self.path.findData("keyframes"))
        self._relist()
        self.status.setText(f"Loaded {len(self.keyframes)} keyframes from {path}")

    def _ask_save(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save keyframes", "keyframes.json", "Keyframes (*.json)")
        if path:
            self.save_keyframes(path)

    def _ask_load(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Load keyframes", "", "Keyframes (*.json)")
        if path:
            self.load_keyframes(path)

    def path_cameras(self) -> tuple[np.ndarray, np.ndarray]:
        """([F, 4, 4] c2w, [F] fov) of the keyframe path at the panel's fps and duration
        (spirula/engine/splat/camera_path.py keyframe_path, as the video renders it)."""
        c2w = np.array([np.reshape(k[0], (4, 4)) for k in self.keyframes])
        fovs = np.array([k[1] for k in self.keyframes])
        n = max(int(round(self.fps.value() * self.seconds.value())), 1)
        return keyframe_path(c2w, fovs, self._times(), n, self.fps.value())

    def path_overlay(self, size: float) -> M.SetPath:
        """The keyframes as frustums ``size`` world units deep and the path through them (64
        points, as keyframe_path spreads the keyframes), for the viewport to draw."""
        points = ()
        if len(self.keyframes) >= 2:
            c2w = np.array([np.reshape(k[0], (4, 4)) for k in self.keyframes])
            times = self._times()
            fps = 64.0 if times is None else 63.0 / max(float(times[-1]), 1e-6)  # 64 points from 0 to the last
            centres = keyframe_path(c2w, np.array([k[1] for k in self.keyframes]), times, 64, fps)[0][:, :3, 3]
            points = tuple(tuple(float(v) for v in p) for p in centres)
        return M.SetPath(tuple(self.keyframes), points, float(size), self.width.value() / self.height.value())

    # --- preview ---------------------------------------------------------------------------------
    def _preview_toggled(self, on: bool) -> None:
        if on and len(self.keyframes) >= 2:
            self._preview = self.path_cameras()
            self._preview_i = 0
            self.timer.start(max(int(1000 / self.fps.value()), 1))
        else:
            self.stop_preview()

    def _preview_step(self) -> None:
        if self._preview is None:
            return
        c2w, fovs = self._preview
        if self._preview_i >= len(c2w):
            self.stop_preview()
            return
        w2c = np.linalg.inv(c2w[self._preview_i])
        self.preview_view.emit(tuple(float(v) for v in w2c.reshape(-1)), float(fovs[self._preview_i]))
        self._preview_i += 1

    def stop_preview(self) -> None:
        was = self._preview is not None
        self.timer.stop()
        self._preview = None
        self.preview_btn.blockSignals(True)
        self.preview_btn.setChecked(False)
        self.preview_btn.blockSignals(False)
        if was:
            self.preview_ended.emit()
        self._update()

    # --- export ----------------------------------------------------------------------------------
    def render_command(self, output: str) -> M.RenderVideo:
        path = self.path.currentData()
        return M.RenderVideo(self.source, output, width=self.width.value(), height=self.height.value(),
                             fps=self.fps.value(), seconds=self.seconds.value(), camera_path=path,
                             keyframes=tuple(self.keyframes) if path == "keyframes" else (),
                             times=tuple(self.key_times) if path == "keyframes" and self.key_times else ())

    def started(self) -> None:
        self.rendering = True
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status.setText("Rendering the video…")
        self._update()

    def on_progress(self, msg: M.StageProgress) -> None:
        self.rendering = True
        self.progress.setRange(0, max(msg.total, 1))
        self.progress.setValue(msg.done)
        self.status.setText(f"Video: frame {msg.done} of {msg.total}")
        self._update()

    def ended(self, text: str, ok: bool) -> None:
        self.rendering = False
        if ok:
            self.progress.setValue(self.progress.maximum())
        self.status.setText(text)
        self._update()

    def _update(self) -> None:
        enough = len(self.keyframes) >= 2
        self.remove_btn.setEnabled(bool(self.keyframes))
        self.clear_btn.setEnabled(bool(self.keyframes))
        self.save_btn.setEnabled(bool(self.keyframes))
        self.preview_btn.setEnabled(enough or self._preview is not None)
        self.export_btn.setEnabled(bool(self.source) and not self.rendering
                                   and (self.path.currentData() != "keyframes" or enough))
        self.cancel_btn.setEnabled(self.rendering)
        for w in (self.path, self.width, self.height, self.fps, self.seconds):
            w.setEnabled(not self.rendering)
