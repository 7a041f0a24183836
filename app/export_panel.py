"""The Export panel: export the Gaussians as PLY, save a screenshot, and what was saved."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from engine.studio import messages as M


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
