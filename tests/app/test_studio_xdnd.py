"""Real cross-application drops (issue 27): another process (tests/app/drag_source.py, a
stand-in for a file manager) drags file URLs onto the viewport's native Vulkan window, the
real mouse driven by xdotool through the X server, so the drag reaches the studio by the
X drag-and-drop protocol (XDND), as a user's does. A splat file opens; a dataset folder
opens for review; the overlay says what the drop will do while the drag hovers."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import sent, swapchain_viewer  # noqa: F401 (autouse, module scope)
from ..patience import patient

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(shutil.which("xdotool") is None,
                                 reason="xdotool is not installed (Debian: apt-get install xdotool)")]


REPO = Path(__file__).resolve().parents[2]
SOURCE_SIZE = (160, 120)


def _write_splats(path: Path) -> Path:
    from spirula.engine.io.ply import GaussianPly, write_ply

    rng = np.random.default_rng(27)
    n = 500
    write_ply(path, GaussianPly(means=rng.normal(size=(n, 3)).astype(np.float32),
                                scales=np.full((n, 3), -3.0, np.float32),
                                quats=np.tile(np.float32([1, 0, 0, 0]), (n, 1)),
                                opacities=np.full(n, 2.0, np.float32),
                                sh0=rng.normal(size=(n, 3)).astype(np.float32) * 0.5,
                                shN=np.zeros((n, 0, 3), np.float32)))
    return path


def _run(app, *args: str, timeout: float = 30) -> None:
    """Run xdotool while the studio's event loop keeps going (the drop's data is fetched
    from the source through the X server while it runs)."""
    proc = subprocess.Popen(["xdotool", *args])
    try:
        assert spin(app, timeout, lambda: proc.poll() is not None), f"xdotool {args[:3]} did not finish"
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"xdotool {args[:3]} failed ({proc.returncode})"


def _source_place(win) -> tuple[int, int, int, int]:
    """(x, y, w, h) of the source's window on the screen beside the studio's, not over it."""
    screen, frame = win.screen().geometry(), win.frameGeometry()
    w, h = SOURCE_SIZE
    if frame.right() + 20 + w <= screen.right():
        return frame.right() + 20, frame.top() + 20, w, h
    if frame.bottom() + 20 + h <= screen.bottom():
        return frame.left() + 20, frame.bottom() + 20, w, h
    pytest.skip(f"no room for the drag source beside the studio's window on the {screen.width()} x "
                f"{screen.height()} screen")


class DragSource:
    """The other application: its window at ``place``, dragging ``paths`` when pressed."""

    def __init__(self, app, place, paths):
        self.app = app
        self.lines: list[str] = []
        self.hover_text = ""
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.app.drag_source", *map(str, place),
                                      *map(str, paths)], cwd=REPO, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=lambda: self.lines.extend(s.strip() for s in self.proc.stdout), daemon=True).start()
        assert spin(app, 60, lambda: any(s.startswith("ready") for s in self.lines) or self.proc.poll() is not None)
        assert self.proc.poll() is None, "the drag source did not start"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class _Received:
    """The names of the drag events ``window`` (the viewport's native window) receives."""

    def __init__(self, window):
        from PySide6 import QtCore

        names = {QtCore.QEvent.Type.DragEnter: "DragEnter", QtCore.QEvent.Type.DragMove: "DragMove",
                 QtCore.QEvent.Type.DragLeave: "DragLeave", QtCore.QEvent.Type.Drop: "Drop"}
        self.types: list[str] = []
        self.window = window

        class Filter(QtCore.QObject):
            def eventFilter(_, obj, ev):  # noqa: N802,N805 (Qt name)
                if ev.type() in names:
                    self.types.append(names[ev.type()])
                return False

        self.filter = Filter()
        window.installEventFilter(self.filter)

    def remove(self) -> None:
        self.window.removeEventFilter(self.filter)


def _drag(app, win, paths) -> DragSource:
    """Press on the source, move over the viewport's centre in steps (below the centre while
    the empty window's start page covers it; the drag hovers there, the overlay shows), then
    release: the drop. Returns the (finished) source."""
    from PySide6 import QtCore

    vp = win.viewport
    assert vp.mode == "swapchain", "the viewport is not the native Vulkan window"
    point = QtCore.QPoint(vp.width() // 2, vp.height() // 2)
    page = win.start_page.geometry()
    if win.start_page.isVisible() and page.contains(point):  # the empty window's start page is over the centre
        point = QtCore.QPoint(vp.width() // 2, (page.bottom() + vp.height()) // 2)  # below it (the overlay is above)
    target = vp.mapToGlobal(point)
    got = _Received(vp.window_)
    place = _source_place(win)
    src = DragSource(app, place, paths)
    try:
        sx, sy = place[0] + place[2] // 2, place[1] + place[3] // 2
        path = [(round(sx + (target.x() - sx) * k / 8), round(sy + (target.y() - sy) * k / 8)) for k in range(1, 9)]
        moves = [a for x, y in path for a in ("mousemove", str(x), str(y), "sleep", "0.05")]
        _run(app, "mousemove", str(sx), str(sy), "sleep", "0.2", "mousedown", "1", "sleep", "0.2", *moves)
        # the drag hovers over the viewport's native window: the overlay says what a drop would do
        assert spin(app, 20, lambda: "DragMove" in got.types and win.drops.overlay.isVisible()), \
            f"the drag did not reach the viewport's native window: {got.types}"
        # hovering on (longer than the overlay's 200 ms grace after a leave): it stays
        hover = [a for k in range(1, 5) for a in ("mousemove", str(target.x() + 3 * k), str(target.y() + 2 * k),
                                                  "sleep", "0.1")]
        _run(app, *hover)
        assert win.drops.overlay.isVisible(), "the overlay went while the drag hovered over the viewport"
        src.hover_text = win.drops.text
        _run(app, "mouseup", "1")
        # the source's drag can end (XdndDrop sent) before the studio has handled the drop
        assert spin(app, 20, lambda: "Drop" in got.types), \
            f"the drop did not reach the viewport's native window: {got.types}"
        assert spin(app, 20, lambda: any(s.startswith("drag-ended") for s in src.lines)), src.lines
        assert "drag-ended copy" in src.lines, f"the studio did not accept the drop: {src.lines}"
        return src
    finally:
        got.remove()
        if not any(s.startswith("drag-ended") for s in src.lines):
            subprocess.run(["xdotool", "mouseup", "1"], timeout=patient(10))  # a failed test leaves no button held
        src.close()


def test_a_splat_file_dragged_from_another_application_opens(studio, tmp_path):
    app, win = studio
    ply = _write_splats(tmp_path / "other app splat.ply")
    n = len(sent(win, M.OpenPly))
    src = _drag(app, win, [ply])
    assert src.hover_text == "View the Gaussians of other app splat.ply"
    assert spin(app, 30, lambda: len(sent(win, M.OpenPly)) > n), "the drop opened nothing"
    assert sent(win, M.OpenPly)[-1].path == str(ply)
    assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "ply"), win.notes[-3:]
    assert not win.drops.overlay.isVisible()


def test_a_dataset_folder_dragged_from_another_application_opens_for_review(studio, tiny_dataset):
    app, win = studio
    e = len(win.errors)
    src = _drag(app, win, [tiny_dataset])
    assert src.hover_text == f"Review the dataset {tiny_dataset.name}, then train it"
    assert spin(app, 60, lambda: (win.scene is not None and win.scene.kind == "review"
                                  and win.scene.path == str(tiny_dataset)) or len(win.errors) > e), win.notes[-3:]
    assert len(win.errors) == e, win.errors[e:]
    assert win.dataset.list.count() == len(win.scene.cameras) > 0
