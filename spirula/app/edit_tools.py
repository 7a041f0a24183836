"""The Edit menu: splat editing before export (spirula/engine/io/splat_edit.py, run on the engine
thread by spirula/engine/studio/editing.py). Box and brush selection tools for the viewport (a left
drag selects; Shift adds, Ctrl removes), Select all / none, Invert, Delete, a crop box (its
world bounds in a small dialog, drawn in the viewport with face handles: a left drag on one
moves that face, as the mesh box's do (spirula/app/bounds_drag.py), each drag one undoable "crop"
command), Undo / Redo (Ctrl+Z /
Ctrl+Shift+Z). The actions are window-wide; they are enabled by the engine's EditState
(a splat file's scene is editable, a training or a mesh is not). The engine saves the edit
into the project after each change; every export of the splats applies it.

Undo / Redo act on what is on show: during a dataset's review (no splats to edit yet) they
undo and redo its split (the Dataset panel's include / exclude / hold out:
spirula/app/dataset_panel.py), else the splat edit."""

from __future__ import annotations

import math

import numpy as np
from PySide6 import QtGui, QtWidgets

from spirula.engine.studio import protocol as M


class EditActions:
    """The Edit menu of ``window`` (spirula/app/window.py MainWindow) and its crop dialog."""

    def __init__(self, window, menu: QtWidgets.QMenu):
        self.w = window
        self.state = M.EditState(False)
        self.scene_bounds: tuple = ()   # (x0, y0, z0, x1, y1, z1) to start a crop from
        self.up = (0.0, -1.0, 0.0)      # the scene's up: the crop box turns about it
        self.crop_dialog: CropDialog | None = None
        K = QtGui.QKeySequence

        def act(text, slot, shortcut=None, checkable=False):
            a = QtGui.QAction(text, window, checkable=checkable)
            if shortcut is not None:
                a.setShortcut(K(shortcut))
            a.triggered.connect(slot)
            menu.addAction(a)
            return a

        self.undo = act("Undo", lambda: self._history("undo"), K.StandardKey.Undo)
        self.redo = act("Redo", lambda: self._history("redo"), "Ctrl+Shift+Z")
        menu.addSeparator()
        self.box = act("Box select", lambda on: self.set_tool("box" if on else "orbit"), "B", True)
        self.brush = act("Brush select", lambda on: self.set_tool("brush" if on else "orbit"), "R", True)
        self.box.setToolTip("Left drag a rectangle to select the splats in it (Shift adds, Ctrl removes)")
        self.brush.setToolTip("Left drag to paint a selection (Shift adds, Ctrl removes)")
        self.select_all = act("Select all", lambda: self.send("select_all"), K.StandardKey.SelectAll)
        self.select_none = act("Select none", lambda: self.send("select_none"), "Ctrl+Shift+A")
        self.invert = act("Invert selection", lambda: self.send("invert"), "Ctrl+I")
        self.delete = act("Delete selected", lambda: self.send("delete"), K.StandardKey.Delete)
        menu.addSeparator()
        self.crop = act("Crop box…", self.show_crop, "C")
        self.actions = (self.undo, self.redo, self.box, self.brush, self.select_all, self.select_none, self.invert,
                        self.delete, self.crop)
        c = window.controller   # a face of the crop box dragged in the viewport: drawn, then one command
        c.crop_dragged.connect(lambda box: self.send("handles", crop=box, highlight=c.crop_face))
        c.crop_released.connect(lambda box: self.send("crop", crop=box))
        self.apply(self.state)
        dataset = getattr(window, "dataset", None)
        if dataset is not None and hasattr(dataset, "history_changed"):
            dataset.history_changed.connect(self._update_history)

    def _split_history(self):
        """The Dataset panel while its split can be edited (a review), else None."""
        d = getattr(self.w, "dataset", None)
        return d if d is not None and getattr(d, "editable", False) else None

    def _history(self, op: str) -> None:
        d = self._split_history()
        if d is not None:
            getattr(d, op)()
        else:
            self.send(op)

    def _update_history(self) -> None:
        """Undo / Redo named and enabled for what they act on (see the module's docstring)."""
        d = self._split_history()
        st = self.state
        undo, redo = (d.undo_text(), d.redo_text()) if d is not None else (
            (st.undo, st.redo) if st.available else ("", ""))
        self.undo.setEnabled(bool(undo))
        self.redo.setEnabled(bool(redo))
        self.undo.setText(f"Undo {undo}" if undo else "Undo")
        self.redo.setText(f"Redo {redo}" if redo else "Redo")

    def send(self, op: str, **kw) -> None:
        self.w.session.send(M.EditSplats(op, **kw))

    def set_tool(self, tool: str) -> None:
        """The viewport's left drag: "orbit", "box" or "brush"."""
        self.w.controller.tool = tool
        self.box.setChecked(tool == "box")
        self.brush.setChecked(tool == "brush")

    def set_scene(self, msg: M.SceneLoaded) -> None:
        self._update_history()  # a review's split, or the splats' edit
        c, r = msg.center, msg.radius
        self.up = tuple(msg.up)
        self.scene_bounds = tuple([c[i] - r for i in range(3)] + [c[i] + r for i in range(3)])

    def apply(self, st: M.EditState) -> None:
        """The engine's EditState: what can be done, Undo / Redo named, a note of the change."""
        self.state = st
        for a in self.actions:
            a.setEnabled(st.available)
        self._update_history()
        self.delete.setEnabled(st.available and st.selected > 0)
        self.w.controller.crop = st.crop_box if st.available else ()   # its handles drag
        if st.available and st.crop_box and self.crop_dialog is not None and self.crop_dialog.isVisible():
            self.crop_dialog.fill_box(st.crop_box)   # a dragged face shows in the dialog
        if not st.available:
            self.set_tool("orbit")
            if self.crop_dialog is not None:
                self.crop_dialog.hide()
        elif st.label:
            self.w.note(f"{st.label}: {st.kept:,} of {st.total:,} splats kept, {st.selected:,} selected"
                        + (f" (saved in {st.saved})" if st.saved else ""))

    def training_ended(self) -> None:
        """The training's splat.ply is written: the first edit command opens it for editing."""
        for a in self.actions:
            a.setEnabled(a not in (self.undo, self.redo))

    def show_crop(self) -> CropDialog:
        if self.crop_dialog is None:
            self.crop_dialog = CropDialog(self)
        if self.state.crop_box:
            self.crop_dialog.fill_box(self.state.crop_box)
        else:
            self.crop_dialog.fill(self.scene_bounds)
        self.crop_dialog.show()
        self.crop_dialog.raise_()
        return self.crop_dialog


class CropDialog(QtWidgets.QDialog):
    """The crop box: min / max in world units, turned about the scene's up axis through its
    centre; Apply crops to it, Remove crop keeps every splat."""

    def __init__(self, actions: EditActions):
        super().__init__(actions.w)
        self.actions = actions
        self.setWindowTitle("Crop box")
        form = QtWidgets.QFormLayout(self)
        self.spins = []
        for row, label in enumerate(("Min (x, y, z)", "Max (x, y, z)")):
            line = QtWidgets.QHBoxLayout()
            for _ in range(3):
                s = QtWidgets.QDoubleSpinBox()
                s.setRange(-1e6, 1e6)
                s.setDecimals(3)
                s.setSingleStep(0.05)
                line.addWidget(s)
                self.spins.append(s)
            form.addRow(label, line)
        self.turn = QtWidgets.QDoubleSpinBox()
        self.turn.setRange(-180.0, 180.0)
        self.turn.setDecimals(1)
        self.turn.setSuffix(" °")
        self.turn.setToolTip("Turn the box about the scene's up axis, through its centre (min / max are then "
                             "along the turned axes)")
        form.addRow("Turn about up", self.turn)
        buttons = QtWidgets.QDialogButtonBox()
        self.apply_button = buttons.addButton("Apply crop", QtWidgets.QDialogButtonBox.ButtonRole.ApplyRole)
        self.remove_button = buttons.addButton("Remove crop", QtWidgets.QDialogButtonBox.ButtonRole.ResetRole)
        buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Close).clicked.connect(self.hide)
        self.apply_button.clicked.connect(self.apply_crop)
        self.remove_button.clicked.connect(lambda: self.actions.send("crop", crop=()))
        form.addRow(buttons)

    def fill(self, bounds: tuple, turn: float = 0.0) -> None:
        for s, v in zip(self.spins, bounds):
            s.setValue(float(v))
        self.turn.setValue(turn)

    def fill_box(self, box: tuple) -> None:
        """An EditState's crop_box (centre, half extents, rotation): min / max along its axes
        and its turn about up."""
        c, h, r = np.asarray(box[:3]), np.asarray(box[3:6]), np.reshape(box[6:], (3, 3))
        u = np.asarray(self.actions.up, np.float64)
        u /= np.linalg.norm(u)
        axis = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]) / 2
        turn = math.degrees(math.atan2(float(axis @ u), (float(np.trace(r)) - 1) / 2))
        self.fill(tuple(c - h) + tuple(c + h), round(turn, 1))

    def bounds(self) -> tuple:
        return tuple(s.value() for s in self.spins)

    def crop(self) -> tuple:
        """The EditSplats crop: 6 bounds when not turned, else the oriented box's 15 numbers."""
        b = self.bounds()
        a = math.radians(self.turn.value())
        if a == 0.0:
            return b
        lo, hi = np.asarray(b[:3]), np.asarray(b[3:])
        u = np.asarray(self.actions.up, np.float64)
        u /= np.linalg.norm(u)
        k = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
        r = np.eye(3) + math.sin(a) * k + (1 - math.cos(a)) * k @ k   # Rodrigues: a about u
        return tuple(float(v) for v in (*(lo + hi) / 2, *np.abs(hi - lo) / 2, *r.reshape(-1)))

    def apply_crop(self) -> None:
        self.actions.send("crop", crop=self.crop())
