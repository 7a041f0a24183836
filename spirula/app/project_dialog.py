"""Reopening a project: what it holds and the choice of Resume (the stopped training from
its checkpoint), Restart (train its dataset again with the run's settings) or View (its
trained splats, or its mesh). Window-modal but not blocking: the choice arrives as a
signal (spirula/engine/studio/projects.py describe_project reads the folder)."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from spirula.engine.studio.projects import ProjectInfo

LABELS = {"resume": "Resume", "restart": "Restart", "view": "View"}


class ProjectDialog(QtWidgets.QDialog):
    chosen = QtCore.Signal(str)   # "resume", "restart" or "view"

    def __init__(self, info: ProjectInfo, parent=None):
        super().__init__(parent)
        self.info = info
        self.setWindowTitle(f"Open project — {info.path.name}")
        self.setObjectName("project-dialog")
        lay = QtWidgets.QVBoxLayout(self)
        head = QtWidgets.QLabel(f"<b>{info.path.name}</b><br>{info.path}")
        head.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(head)
        self.details = QtWidgets.QLabel("<br>".join(self._lines()))
        self.details.setWordWrap(True)
        lay.addWidget(self.details)
        row = QtWidgets.QHBoxLayout()
        self.buttons: dict[str, QtWidgets.QPushButton] = {}
        for key, label in LABELS.items():
            b = QtWidgets.QPushButton(label)
            b.setEnabled(key in info.choices)
            b.clicked.connect(lambda _=False, k=key: self._choose(k))
            row.addWidget(b)
            self.buttons[key] = b
        cancel = QtWidgets.QPushButton("Cancel")
        cancel.clicked.connect(self.reject)
        row.addStretch(1)
        row.addWidget(cancel)
        lay.addLayout(row)
        first = next((self.buttons[k] for k in LABELS if k in info.choices), cancel)
        first.setDefault(True)
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)

    def _lines(self) -> list[str]:
        i = self.info
        out = []
        if i.checkpoint:
            saved = f", saved {i.saved[:19].replace('T', ' ')}" if i.saved else ""
            out.append(f"<b>Resume</b>: the training stopped at step {i.step:,} of {i.steps:,}{saved}")
        if i.dataset:
            out.append(f"<b>Restart</b>: train {i.dataset} again with the run's settings"
                       + (" (the checkpoint is replaced)" if i.checkpoint else ""))
        if i.splats or i.mesh:
            what = [f"the splats ({i.splats.name})"] if i.splats else []
            what += [f"the mesh ({i.mesh.name})"] if i.mesh else []
            out.append(f"<b>View</b>: {' and '.join(what)}")
        return out

    def _choose(self, key: str) -> None:
        self.chosen.emit(key)
        self.accept()
