"""A tiny drag source in its own process, standing in for a file manager: a window at a
given place that starts a QDrag of ``text/uri-list`` (the given paths as file URLs) when a
mouse button is pressed in it. The drag then crosses to the other application through the
X server's drag-and-drop protocol (XDND), as a real one does.

    python -m tests.app.drag_source X Y W H PATH [PATH ...]

Prints ``ready <window id>`` once its window is shown, and ``drag-ended <action>`` when a
drag is over (the action the target chose: "copy" for an accepted drop, "ignore")."""

from __future__ import annotations

import sys

from PySide6 import QtCore, QtGui, QtWidgets

ACTIONS = {QtCore.Qt.DropAction.CopyAction: "copy", QtCore.Qt.DropAction.MoveAction: "move",
           QtCore.Qt.DropAction.LinkAction: "link", QtCore.Qt.DropAction.IgnoreAction: "ignore"}


class Source(QtWidgets.QLabel):
    def __init__(self, paths: list[str]):
        super().__init__("drag me")
        self.paths = paths
        self.setWindowFlags(QtCore.Qt.WindowType.FramelessWindowHint)  # no WM: where it is put, it stays
        self.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.setStyleSheet("background: #3a6; color: white;")

    def mousePressEvent(self, ev):  # noqa: N802 (Qt name)
        mime = QtCore.QMimeData()
        mime.setUrls([QtCore.QUrl.fromLocalFile(p) for p in self.paths])
        drag = QtGui.QDrag(self)
        drag.setMimeData(mime)
        # exec runs the XDND loop until the button is released
        action = drag.exec(QtCore.Qt.DropAction.CopyAction | QtCore.Qt.DropAction.LinkAction)
        print("drag-ended", ACTIONS.get(action, str(action)), flush=True)



class _Exposed(QtCore.QObject):
    """Says ``ready`` once the X server shows the window (a press before would miss it)."""

    def eventFilter(self, window, ev):  # noqa: N802 (Qt name)
        if ev.type() == QtCore.QEvent.Type.Expose and window.isExposed():
            window.removeEventFilter(self)
            print("ready", int(window.winId()), flush=True)
        return False


def main(argv: list[str]) -> int:
    x, y, w, h = (int(v) for v in argv[:4])
    app = QtWidgets.QApplication(["spirula-drag-source"])
    src = Source(argv[4:])
    src.setGeometry(x, y, w, h)
    src.winId()  # its QWindow now exists: watch it being exposed
    exposed = _Exposed()
    src.windowHandle().installEventFilter(exposed)
    src.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
