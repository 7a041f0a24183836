"""Drag and drop anywhere in the window: one handler for the drag events of every target
(the main window and its panels, the viewport's native render window, its readback image)
and the overlay that says what a drop will do.

The viewport's render window is a native child window (a Vulkan swapchain presents into
it); Qt hands the drag events over it to that QWindow, not to the widgets around it, and no
widget can be stacked above it. So the overlay is a small frameless window of its own,
shown over the viewport while a drag is in progress; a drag passing over the overlay
reaches the same handler, and a leave hides it only after a moment (a move over the
viewport or the overlay in between keeps it)."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from .drops import ACTIONS, classify_many, describe_many

DRAG_TYPES = (QtCore.QEvent.Type.DragEnter, QtCore.QEvent.Type.DragMove, QtCore.QEvent.Type.DragLeave,
              QtCore.QEvent.Type.Drop)


def local_paths(mime: QtCore.QMimeData) -> list[str]:
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile()] if mime.hasUrls() else []


class DropOverlay(QtWidgets.QLabel):
    """The banner over the viewport during a drag."""

    def __init__(self, handler: "DropHandler"):
        super().__init__(None, QtCore.Qt.WindowType.ToolTip | QtCore.Qt.WindowType.FramelessWindowHint
                         | QtCore.Qt.WindowType.WindowDoesNotAcceptFocus)
        self.handler = handler
        self.setObjectName("drop-overlay")
        self.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setAcceptDrops(True)
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setMargin(18)
        self.setStyleSheet("QLabel#drop-overlay { background: #24252b; color: #ffffff; font-size: 15pt; "
                           "border: 3px dashed #ffaa3c; border-radius: 10px; }")

    def show_over(self, target: QtWidgets.QWidget, text: str, ok: bool) -> None:
        self.setText(text)
        self.setStyleSheet(self.styleSheet().replace("#ffaa3c" if not ok else "#e05a5a",
                                                     "#e05a5a" if not ok else "#ffaa3c"))
        r = target.rect()
        w, h = max(min(int(r.width() * 0.7), 720), 200), 110
        top_left = target.mapToGlobal(QtCore.QPoint((r.width() - w) // 2, max(r.height() // 6, 8)))
        self.setGeometry(QtCore.QRect(top_left, QtCore.QSize(w, h)))
        self.show()
        self.raise_()

    def event(self, ev: QtCore.QEvent) -> bool:
        if ev.type() in DRAG_TYPES:
            self.handler.handle(ev)
            return True
        return super().event(ev)


class DropHandler(QtCore.QObject):
    """What every drag target of the window calls with its drag events. ``open_paths`` is
    the window's (it opens what was dropped); ``target`` the widget the overlay covers."""

    def __init__(self, open_paths, target: QtWidgets.QWidget, parent=None):
        super().__init__(parent)
        self.open_paths = open_paths
        self.target = target
        self.overlay = DropOverlay(self)
        self.text = ""               # what the overlay says now (tests read it)
        self.dropped: list[str] = []
        self._hide = QtCore.QTimer(self)
        self._hide.setSingleShot(True)
        self._hide.setInterval(200)
        self._hide.timeout.connect(self.overlay.hide)

    def handle(self, ev: QtCore.QEvent) -> bool:
        """Handle a drag event of any target; True when the event was one."""
        t = ev.type()
        if t not in DRAG_TYPES:
            return False
        if t == QtCore.QEvent.Type.DragLeave:
            self._hide.start()
            ev.accept()
            return True
        paths = local_paths(ev.mimeData())
        if t == QtCore.QEvent.Type.Drop:
            self._hide.stop()
            self.overlay.hide()
            if paths:
                ev.setDropAction(QtCore.Qt.DropAction.CopyAction)
                ev.accept()
                self.dropped = paths
                QtCore.QTimer.singleShot(0, lambda: self.open_paths(paths))  # not inside the drag's event
            else:
                ev.ignore()
            return True
        # enter / move: say what a drop would do; accept what can be opened
        if not ev.mimeData().hasUrls():
            ev.ignore()
            return True
        drops = classify_many(paths)
        ok = any(d.action in ACTIONS for d in drops)
        self.text = describe_many(drops)
        self._hide.stop()
        if not self.overlay.isVisible() or self.overlay.text() != self.text:
            self.overlay.show_over(self.target, self.text, ok)
        ev.setDropAction(QtCore.Qt.DropAction.CopyAction)
        ev.accept()  # unsupported ones too: the drop then says why in a dialog
        return True


def route_drags(obj, handler: DropHandler) -> None:
    """Send ``obj``'s drag events to ``handler`` (a widget: it accepts drops)."""
    if isinstance(obj, QtWidgets.QWidget):
        obj.setAcceptDrops(True)
    obj.installEventFilter(_DragFilter(handler, obj))


class _DragFilter(QtCore.QObject):
    def __init__(self, handler: DropHandler, parent):
        super().__init__(parent)
        self.handler = handler

    def eventFilter(self, obj, ev) -> bool:  # noqa: N802 (Qt name)
        return self.handler.handle(ev) if ev.type() in DRAG_TYPES else False
