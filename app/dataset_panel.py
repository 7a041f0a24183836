"""The Dataset panel: the scene's cameras as thumbnails (training and held-out views
framed apart) and its notes; double-clicking a camera looks through it."""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from engine.studio import messages as M

from .plots import ACCENT, BLUE


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
