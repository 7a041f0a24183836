"""The Export panel: the Gaussians in a chosen splat format (the chooser shows the size each
format would have: spirula/app/export_formats.py), a viewport screenshot, the textured mesh (the
mesh stage, spirula/engine/jobs/mesh.py, on the engine thread: its settings, progress and Cancel;
the finished GLB opens in the viewport), and what was saved.

"Ask before meshing" (spirula/engine/settings.py STUDIO, on by default; issue 47 item 3): Mesh sends
ExportMesh with ``confirm``; the stage stops at its bounds step and its box (BoundsProposed:
``show_proposal``) fills the box fields and is drawn in the viewport, with why it was chosen;
the user drags its faces or types numbers, then Confirm (``bounds_confirmed``: () for the box
as proposed, else the six numbers and their axes) or Cancel. Nothing is meshed before Confirm. The proposed
box is oriented (an object's: its third axis up, its first along the object): while it is
shown the fields are its min / max along its own axes (``box_frame``), and an edited object
box is meshed as the proposal is, its bottom cut flat and capped."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from spirula.engine.mesh.mesh_config import MeshConfig
from spirula.engine.settings import STUDIO
from spirula.engine.studio import protocol as M

from .export_formats import choices

# the mesh settings a software device finishes in a minute or two; a GPU takes the defaults
SOFTWARE_MESH = dict(faces=100_000, texture_size=1024, resolution=256)
TEXTURE_SIZES = (256, 512, 1024, 2048, 4096, 8192)


class ExportPanel(QtWidgets.QWidget):
    export_ply_requested = QtCore.Signal()   # export in current_format()
    screenshot_requested = QtCore.Signal()
    open_project_requested = QtCore.Signal()
    mesh_requested = QtCore.Signal(object)   # M.ExportMesh
    mesh_cancel_requested = QtCore.Signal()
    open_mesh_requested = QtCore.Signal(str)
    bounds_changed = QtCore.Signal(tuple)    # the box to draw in the viewport (() = none)
    bounds_confirmed = QtCore.Signal(tuple, tuple)  # the proposed box confirmed: () as proposed, else 6 floats;
    #                                                 the axes they are along (box_frame)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.project_path = ""
        self.meshing = False
        self.proposal: M.BoundsProposed | None = None   # the box the held mesh stage waits on
        self._box_before = None                          # the box fields before it (restored after)
        self._frame: tuple = ()                          # the proposal's axes (9 floats) while shown
        lay = QtWidgets.QVBoxLayout(self)
        self.project = QtWidgets.QLabel("Project folder: –")
        self.project.setWordWrap(True)
        self.project.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.project)
        lay.addWidget(QtWidgets.QLabel("Format:"))
        self.format = QtWidgets.QComboBox()
        self.format.setToolTip("SPZ, SOG, glTF and web page sizes are estimates (their compression and headers "
                               "depend on the scene)")
        lay.addWidget(self.format)
        self.ply_btn = QtWidgets.QPushButton("Export Gaussians…")
        self.shot_btn = QtWidgets.QPushButton("Save viewport screenshot…")
        self.ply_btn.clicked.connect(self.export_ply_requested)
        self.shot_btn.clicked.connect(self.screenshot_requested)
        for b in (self.ply_btn, self.shot_btn):
            lay.addWidget(b)
        lay.addWidget(self._mesh_box())
        lay.addWidget(QtWidgets.QLabel("Saved (double-click a mesh to view it):"))
        self.saved = QtWidgets.QListWidget()
        self.saved.itemDoubleClicked.connect(self._saved_activated)
        lay.addWidget(self.saved, 1)
        self.ply_btn.setEnabled(False)
        self.sh_degree = 3
        self.set_scene_size(0)
        self._update_mesh_buttons()

    def _mesh_box(self) -> QtWidgets.QGroupBox:
        box = QtWidgets.QGroupBox("Textured mesh (GLB, OBJ + MTL + PNG, PLY)")
        form = QtWidgets.QFormLayout(box)
        d = MeshConfig()
        self.faces = QtWidgets.QSpinBox(minimum=0, maximum=20_000_000, singleStep=50_000)
        self.faces.setGroupSeparatorShown(True)
        self.faces.setSpecialValueText("all (no decimation)")
        self.faces.setValue(d.faces)
        self.texture = QtWidgets.QComboBox()
        for t in TEXTURE_SIZES:
            self.texture.addItem(f"{t} × {t}", t)
        self.texture.setCurrentIndex(TEXTURE_SIZES.index(d.texture_size))
        self.resolution = QtWidgets.QSpinBox(minimum=16, maximum=4096, singleStep=64)
        self.resolution.setValue(d.resolution)
        self.resolution.setToolTip("Voxels along the longest side of the subject's bounds (finer: more detail, "
                                   "more memory and time)")
        form.addRow("Faces", self.faces)
        form.addRow("Texture", self.texture)
        form.addRow("Voxels", self.resolution)
        form.addRow(self._bounds_box())
        ask = STUDIO["ask_before_meshing"]
        self.ask_box = QtWidgets.QCheckBox(ask.label)
        self.ask_box.setToolTip(ask.help)
        self.ask_box.setChecked(bool(ask.default))
        form.addRow(self.ask_box)
        form.addRow(self._proposal_box())
        row = QtWidgets.QHBoxLayout()
        self.mesh_btn = QtWidgets.QPushButton("Export textured mesh")
        self.mesh_cancel = QtWidgets.QPushButton("Cancel")
        self.mesh_btn.clicked.connect(self._mesh_clicked)
        self.mesh_cancel.clicked.connect(self.mesh_cancel_requested)
        row.addWidget(self.mesh_btn, 1)
        row.addWidget(self.mesh_cancel)
        form.addRow(row)
        self.mesh_progress = QtWidgets.QProgressBar()
        self.mesh_progress.setRange(0, 1)
        self.mesh_progress.setValue(0)
        self.mesh_progress.setFormat("%p%")
        self.mesh_status = QtWidgets.QLabel("Train or open a project first")
        self.mesh_status.setWordWrap(True)
        self.mesh_status.setObjectName("dim")
        form.addRow(self.mesh_progress)
        form.addRow(self.mesh_status)
        return box

    def _bounds_box(self) -> QtWidgets.QGroupBox:
        """Limit the mesh to a box (min and max per axis), drawn in the viewport while on."""
        box = self.bounds_group = QtWidgets.QGroupBox("Limit to a box (drawn in the viewport)")
        box.setCheckable(True)
        box.setChecked(False)
        grid = QtWidgets.QGridLayout(box)
        self.bound_spins = []
        for col, axis in enumerate("xyz"):
            grid.addWidget(QtWidgets.QLabel(axis), 0, col + 1, QtCore.Qt.AlignmentFlag.AlignCenter)
        for row, label in enumerate(("min", "max")):
            grid.addWidget(QtWidgets.QLabel(label), row + 1, 0)
            for col in range(3):
                spin = QtWidgets.QDoubleSpinBox(minimum=-1e6, maximum=1e6, decimals=3, singleStep=0.05)
                spin.valueChanged.connect(self._bounds_edited)
                grid.addWidget(spin, row + 1, col + 1)
                self.bound_spins.append(spin)
        box.toggled.connect(self._bounds_edited)
        return box

    def _proposal_box(self) -> QtWidgets.QGroupBox:
        """The proposed box's reason and Confirm / Cancel (shown while the stage waits)."""
        box = self.proposal_group = QtWidgets.QGroupBox("Box to mesh: drag its faces in the viewport or type")
        lay = QtWidgets.QVBoxLayout(box)
        self.proposal_text = QtWidgets.QLabel("")
        self.proposal_text.setWordWrap(True)
        self.proposal_text.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.proposal_text)
        row = QtWidgets.QHBoxLayout()
        self.confirm_btn = QtWidgets.QPushButton("Confirm and mesh")
        self.confirm_btn.setDefault(True)
        self.proposal_cancel = QtWidgets.QPushButton("Cancel")
        self.confirm_btn.clicked.connect(self._confirm_clicked)
        self.proposal_cancel.clicked.connect(self.mesh_cancel_requested)
        row.addWidget(self.confirm_btn, 1)
        row.addWidget(self.proposal_cancel)
        lay.addLayout(row)
        box.setVisible(False)
        return box

    def show_proposal(self, msg: M.BoundsProposed) -> None:
        """The held mesh stage's box: in the box fields (drawn in the viewport, editable) with
        why it was chosen, until Confirm or Cancel."""
        self.proposal = msg
        self._box_before = (self.bounds_group.isChecked(), [s.value() for s in self.bound_spins])
        self.meshing = True
        self._update_mesh_buttons()
        self.bounds_group.blockSignals(True)
        self.bounds_group.setChecked(True)
        self.bounds_group.blockSignals(False)
        box = msg.box if len(msg.box) == 6 and len(msg.frame) == 9 else msg.bounds
        self._frame = tuple(msg.frame) if box is msg.box else ()
        self.bounds_group.setTitle("Limit to a box (along the proposed box's axes)" if self._frame else
                                   "Limit to a box (drawn in the viewport)")
        lo, hi = box[:3], box[3:]
        step = max(max(h - l for l, h in zip(lo, hi)) / 20, 1e-3)
        for spin, v in zip(self.bound_spins, box):
            spin.blockSignals(True)
            spin.setSingleStep(step)
            spin.setValue(float(v))
            spin.blockSignals(False)
        kind = {"object": "the subject (its bottom cut flat and capped)", "scene": "the whole scene",
                "explicit": "the box given"}.get(msg.mode, msg.mode)
        edited = ("an edited box is meshed as drawn, its bottom cut flat and capped" if msg.mode == "object" else
                  "an edited box is meshed as drawn (clipped, no cap)")
        self.proposal_text.setText(f"Proposed: {kind}. Why: {msg.reason}. Nothing is meshed until you confirm; "
                                   f"{edited}.")
        self.proposal_group.setVisible(True)
        self.mesh_status.setText("Check the box in the viewport, then Confirm")
        self._bounds_edited()

    def _confirm_clicked(self) -> None:
        if self.proposal is None:
            return
        shown = tuple(s.value() for s in self.bound_spins)
        exact = tuple(float(v) for v in (self.proposal.box if self._frame else self.proposal.bounds))
        half_ulp = 0.5 * 10 ** -self.bound_spins[0].decimals()
        same = [abs(a - round(b, self.bound_spins[0].decimals())) <= half_ulp for a, b in zip(shown, exact)]
        # a field left as proposed keeps the proposal's exact number (the fields round it)
        box = tuple(b if k else a for a, b, k in zip(shown, exact, same))
        box = tuple(min(a, b) for a, b in zip(box[:3], box[3:])) + tuple(max(a, b) for a, b in zip(box[:3], box[3:]))
        box, frame = ((), ()) if all(same) else (box, self.box_frame())
        self._end_proposal()
        self.bounds_confirmed.emit(box, frame)
        self.mesh_status.setText("Meshing the confirmed box…")

    def _end_proposal(self) -> None:
        """Back to the box fields as they were before the proposal."""
        if self.proposal is None:
            return
        self.proposal = None
        self._frame = ()
        self.bounds_group.setTitle("Limit to a box (drawn in the viewport)")
        self.proposal_group.setVisible(False)
        checked, values = self._box_before
        for spin, v in zip(self.bound_spins, values):
            spin.blockSignals(True)
            spin.setValue(v)
            spin.blockSignals(False)
        self.bounds_group.blockSignals(True)
        self.bounds_group.setChecked(checked)
        self.bounds_group.blockSignals(False)
        self._update_mesh_buttons()
        self._bounds_edited()

    def box_frame(self) -> tuple:
        """The axes (9 floats, rows in world) the box fields are along: the proposed box's while
        the mesh stage waits for it, else () (the world's)."""
        return self._frame

    def bounds(self) -> tuple:
        """(xmin, ymin, zmin, xmax, ymax, zmax) when the box is on, else (): along
        :meth:`box_frame`'s axes."""
        if not self.bounds_group.isChecked():
            return ()
        v = [s.value() for s in self.bound_spins]
        lo, hi = v[:3], v[3:]
        return tuple(min(a, b) for a, b in zip(lo, hi)) + tuple(max(a, b) for a, b in zip(lo, hi))

    def _bounds_edited(self, *_) -> None:
        self.bounds_changed.emit(self.bounds())

    def set_bounds(self, bounds: tuple) -> None:
        """The box as dragged in the viewport: the spin boxes follow, one bounds_changed.
        While a mesh is being made the box stays as it was sent (the drag snaps back)."""
        if not self.bounds_group.isEnabled():
            self._bounds_edited()
            return
        for spin, v in zip(self.bound_spins, bounds):
            spin.blockSignals(True)
            spin.setValue(float(v))
            spin.blockSignals(False)
        self._bounds_edited()

    def set_extent(self, center, radius: float) -> None:
        """Start the box around a new scene: its centre +- its radius."""
        for spin in self.bound_spins:
            spin.blockSignals(True)
        for k, spin in enumerate(self.bound_spins):
            c = float(center[k % 3])
            spin.setSingleStep(max(radius / 20, 1e-3))
            spin.setValue(c - radius if k < 3 else c + radius)
        for spin in self.bound_spins:
            spin.blockSignals(False)
        self._bounds_edited()

    def use_software_defaults(self, software: bool) -> None:
        if software:
            self.faces.setValue(SOFTWARE_MESH["faces"])
            self.texture.setCurrentIndex(TEXTURE_SIZES.index(SOFTWARE_MESH["texture_size"]))
            self.resolution.setValue(SOFTWARE_MESH["resolution"])

    def values(self) -> dict:
        return {"faces": self.faces.value(), "texture_size": self.texture.currentData(),
                "resolution": self.resolution.value(), "ask_before_meshing": self.ask_box.isChecked()}

    def restore(self, v: dict) -> None:
        try:
            self.faces.setValue(int(v.get("faces", self.faces.value())))
            self.resolution.setValue(int(v.get("resolution", self.resolution.value())))
            k = self.texture.findData(int(v.get("texture_size", self.texture.currentData())))
        except (TypeError, ValueError):
            return
        if k >= 0:
            self.texture.setCurrentIndex(k)
        ask = v.get("ask_before_meshing", self.ask_box.isChecked())
        self.ask_box.setChecked(ask not in (False, "false", "0", 0))  # QSettings may give back a string

    def mesh_command(self) -> M.ExportMesh:
        return M.ExportMesh(self.project_path, faces=self.faces.value(), texture_size=self.texture.currentData(),
                            resolution=self.resolution.value(), bounds=self.bounds(),
                            confirm=self.ask_box.isChecked())

    def _mesh_clicked(self) -> None:
        if self.project_path and self.replace_mesh_ok(self.project_path):
            self.mesh_requested.emit(self.mesh_command())

    def replace_mesh_ok(self, project: str) -> bool:
        """Whether to mesh ``project`` again: asked when it has a mesh already (its mesh.json);
        the one there is kept as mesh.prev.* either way (spirula/engine/jobs/mesh.py keep_previous)."""
        if not (Path(project) / "mesh.json").is_file():
            return True
        answer = QtWidgets.QMessageBox.question(
            self, "Replace the mesh?",
            f"{Path(project).name} has a mesh already. Make a new one? The current one is kept beside it as "
            "mesh.prev.* (the one before that is replaced).",
            QtWidgets.QMessageBox.StandardButton.Yes | QtWidgets.QMessageBox.StandardButton.Cancel,
            QtWidgets.QMessageBox.StandardButton.Cancel)
        return answer == QtWidgets.QMessageBox.StandardButton.Yes

    def set_project(self, path: str, training: bool = False) -> None:
        """The project the mesh is made from; ``training``: its training is under way (so the
        hint is to wait, not to train)."""
        self.project_path = path if path and not training and self.trained(path) else ""
        self.project.setText(f"Project folder: {path or '–'}")
        if not self.meshing and not self.mesh_status.text().startswith("Wrote"):
            self.mesh_status.setText(
                "Ready: the mesh goes to exports/ in the project folder" if self.project_path
                else "Available when the training has finished (or Stop & save)" if training
                else "Train or open a trained project first (it needs splat.ply and train.json)")
        self._update_mesh_buttons()

    @staticmethod
    def trained(path: str) -> bool:
        p = Path(path)
        return (p / "splat.ply").is_file() and (p / "train.json").is_file()

    def set_can_export(self, ok: bool) -> None:
        self.ply_btn.setEnabled(ok)

    def set_scene_size(self, num_gaussians: int, sh_degree: int | None = None) -> None:
        """Refresh the chooser's sizes for this many Gaussians (and SH degree), keeping the choice."""
        if sh_degree is not None:
            self.sh_degree = sh_degree
        keep = self.current_format()
        self.format.blockSignals(True)
        self.format.clear()
        for c in choices(num_gaussians, self.sh_degree):
            self.format.addItem(c.label, c.format)
        self.format.setCurrentIndex(max(self.format.findData(keep or "ply"), 0))
        self.format.blockSignals(False)

    def current_format(self) -> str | None:
        return self.format.currentData()

    def on_saved(self, msg: M.Saved) -> None:
        it = QtWidgets.QListWidgetItem(f"{msg.kind}: {msg.path}" + (f"  ({msg.detail})" if msg.detail else ""))
        it.setData(QtCore.Qt.ItemDataRole.UserRole, msg.path)
        self.saved.insertItem(0, it)

    def clear(self) -> None:
        """Another project: no saved list, the mesh box off, the mesh's progress and status
        afresh (set_project writes its hint); its settings stay (they are the user's)."""
        self.saved.clear()
        self.bounds_group.setChecked(False)
        if not self.meshing:
            self.mesh_progress.setRange(0, 1)
            self.mesh_progress.setValue(0)
            self.mesh_status.setText("")

    def show_exports(self, project: str | Path) -> None:
        """List what a project opened holds in its exports/ (and its train/exports/), newest
        first: the meshes (GLB, OBJ; not their textures or the previous mesh.prev.*), splat
        files, videos and screenshots it was exported to before."""
        kinds = {".glb": "mesh", ".obj": "mesh", ".mp4": "video", ".png": "screenshot"}
        found = []
        for folder in (Path(project) / "exports", Path(project) / "train" / "exports"):
            for p in folder.iterdir() if folder.is_dir() else ():
                mesh_part = p.name.startswith("mesh.") and p.suffix.lower() not in (".glb", ".obj")
                if not p.is_file() or p.name.startswith(".") or ".prev." in p.name or mesh_part:
                    continue
                found.append((p.stat().st_mtime_ns, kinds.get(p.suffix.lower(), "splats"), p))
        for _, kind, p in sorted(found, key=lambda f: (f[0], str(f[2]))):  # newest on top
            self.on_saved(M.Saved(kind, str(p)))

    def _saved_activated(self, it: QtWidgets.QListWidgetItem) -> None:
        path = it.data(QtCore.Qt.ItemDataRole.UserRole) or ""
        if path.endswith((".glb", ".obj")):
            self.open_mesh_requested.emit(path)
        elif path:
            QtGui.QDesktopServices.openUrl(QtCore.QUrl.fromLocalFile(str(Path(path).parent)))

    # --- the mesh stage's progress -------------------------------------------------------------
    def mesh_started(self) -> None:
        self.meshing = True
        self.mesh_progress.setRange(0, 1)
        self.mesh_progress.setValue(0)
        self.mesh_status.setText("Starting the mesh stage…")
        self._update_mesh_buttons()

    def on_mesh_progress(self, msg: M.StageProgress) -> None:
        self.meshing = True
        total = max(msg.total or 1, 1)
        # steps, and within the long ones their camera loops: 0..1000 per step
        frac = 0.0
        parts = msg.detail.rsplit(" ", 1)
        if len(parts) == 2 and "/" in parts[1]:
            a, _, b = parts[1].partition("/")
            if a.isdigit() and b.isdigit() and int(b):
                frac = int(a) / int(b)
        self.mesh_progress.setRange(0, total * 1000)
        self.mesh_progress.setValue(int((msg.done + frac) * 1000))
        self.mesh_status.setText(f"Mesh: {msg.detail} (step {msg.done + 1} of {total})")
        self._update_mesh_buttons()

    def mesh_ended(self, text: str, ok: bool) -> None:
        self._end_proposal()
        self.meshing = False
        if ok:
            self.mesh_progress.setValue(self.mesh_progress.maximum())
        self.mesh_status.setText(text)
        self._update_mesh_buttons()

    def _update_mesh_buttons(self) -> None:
        self.mesh_btn.setEnabled(bool(self.project_path) and not self.meshing)
        self.mesh_cancel.setEnabled(self.meshing)
        for w in (self.faces, self.texture, self.resolution, self.ask_box):
            w.setEnabled(not self.meshing)
        self.bounds_group.setEnabled(not self.meshing or self.proposal is not None)  # the proposal is edited
