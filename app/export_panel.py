"""The Export panel: export the Gaussians in a chosen splat format (the chooser shows the
size each format would have: app/export_formats.py), save a screenshot, and what was saved."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from engine.studio import messages as M

from .export_formats import choices


class ExportPanel(QtWidgets.QWidget):
    export_ply_requested = QtCore.Signal()   # export in current_format()
    screenshot_requested = QtCore.Signal()
    open_project_requested = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QtWidgets.QVBoxLayout(self)
        self.project = QtWidgets.QLabel("Project folder: –")
        self.project.setWordWrap(True)
        self.project.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.project)
        lay.addWidget(QtWidgets.QLabel("Format:"))
        self.format = QtWidgets.QComboBox()
        self.format.setToolTip("SPZ and SOG sizes are estimates (their compression depends on the scene)")
        lay.addWidget(self.format)
        self.ply_btn = QtWidgets.QPushButton("Export Gaussians…")
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
        self.sh_degree = 3
        self.set_scene_size(0)

    def set_project(self, path: str) -> None:
        self.project.setText(f"Project folder: {path or '–'}")

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
        self.saved.insertItem(0, f"{msg.kind}: {msg.path}" + (f"  ({msg.detail})" if msg.detail else ""))
