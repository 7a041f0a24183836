"""What the empty window shows in its viewport: a drop target that says what can be dropped,
buttons that open the same things, and the recent projects (one click reopens one).

The viewport's render window is a native child window (a Vulkan swapchain presents into
it), which a plain widget cannot cover; the start page is a native child window of the
viewport itself, raised above the render window and kept centred in it. It goes when the
first scene loads (spirula/app/project_state.py) and its drags go to the window's drop handler."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets

from . import remembered

MAX_SHOWN = 6   # recent projects listed


class StartPage(QtWidgets.QFrame):
    """The empty viewport's page of ``window`` (spirula/app/window.py StudioWindow)."""

    def __init__(self, window):
        viewport = window.viewport
        super().__init__(viewport)
        self.w = window
        self.setObjectName("start-page")
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontCreateNativeAncestors)
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_NativeWindow)  # above the render window
        self.setStyleSheet(
            "QFrame#start-page { background: #1b1c21; border: 3px dashed #ffaa3c; border-radius: 12px; }"
            "QLabel#start-title { color: #ffffff; font-size: 16pt; }"
            "QLabel#start-hint, QLabel#start-recent { color: #b4b4ba; }"
            "QPushButton#start-project { text-align: left; padding: 4px 8px; }")
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(28, 22, 28, 22)
        lay.setSpacing(8)
        title = QtWidgets.QLabel("Drop a video, a folder of photos, a dataset or a project here")
        title.setObjectName("start-title")
        title.setWordWrap(True)
        title.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(title)
        hint = QtWidgets.QLabel("A video or photos are reconstructed (frames, SfM), reviewed, then trained; "
                                "splat files (.ply .spz .sog .splat) and meshes (.glb .obj) open to view")
        hint.setObjectName("start-hint")
        hint.setWordWrap(True)
        hint.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(hint)
        row = QtWidgets.QHBoxLayout()
        row.addStretch(1)
        for text, slot in (("Open video…", window._ask_video), ("Open folder…", window._ask_dataset),
                           ("Open project…", window._ask_project)):
            b = QtWidgets.QPushButton(text)
            b.clicked.connect(slot)
            row.addWidget(b)
        row.addStretch(1)
        lay.addLayout(row)
        self.recent_label = QtWidgets.QLabel("Recent projects")
        self.recent_label.setObjectName("start-recent")
        lay.addWidget(self.recent_label)
        self.recent_box = QtWidgets.QVBoxLayout()
        self.recent_box.setSpacing(2)
        lay.addLayout(self.recent_box)
        self.recent_buttons: list[QtWidgets.QPushButton] = []
        lay.addStretch(1)
        from .drop_overlay import route_drags

        route_drags(self, window.drops)
        for o in (viewport, viewport.container, viewport.image_view):  # resized, or the other one shown
            o.installEventFilter(self)
        self.fill()
        self.place()

    def fill(self) -> None:
        """The recent projects, newest first (spirula/app/remembered.py)."""
        for b in self.recent_buttons:
            self.recent_box.removeWidget(b)
            b.deleteLater()
        self.recent_buttons = []
        paths = remembered.recent()[:MAX_SHOWN]
        self.recent_label.setText("Recent projects" if paths else "No recent projects yet")
        for p in paths:
            b = QtWidgets.QPushButton(f"{Path(p).name}    {Path(p).parent}")
            b.setObjectName("start-project")
            b.setToolTip(p)
            b.setFlat(True)
            b.clicked.connect(lambda _=False, p=p: self.w.open_paths([p]))
            self.recent_box.addWidget(b)
            self.recent_buttons.append(b)

    def place(self) -> None:
        """Centred in the viewport, at most 620 x 420."""
        r = self.parentWidget().rect()
        w, h = min(620, r.width() - 24), min(max(self.sizeHint().height(), 220), r.height() - 24)
        self.setGeometry((r.width() - w) // 2, (r.height() - h) // 2, max(w, 1), max(h, 1))
        self.raise_()

    def eventFilter(self, obj, ev) -> bool:  # noqa: N802 (Qt name)
        if ev.type() in (QtCore.QEvent.Type.Resize, QtCore.QEvent.Type.Show, QtCore.QEvent.Type.LayoutRequest):
            self.place()
        return False
