"""Helpers of the studio window tests: a window on a private projects folder, real drag
and drop events delivered to a widget or window, the commands the window sent."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.studio import protocol as M


def open_studio(projects, size=(1000, 680)):
    """(app, window) with the engine ready and the viewport attached; the window's
    commands are recorded in ``win.sent``."""
    from spirula.app import remembered
    from spirula.app.startup import create_studio

    remembered.store().clear()  # each module's window starts as on a first launch
    app, win, session = create_studio(None, dialogs=False, projects=projects, splash=False, size=size)
    win.sent = []
    send = session.send

    def recording(cmd):
        win.sent.append(cmd)
        send(cmd)

    session.send = recording
    return app, win


def drag_and_drop(target, paths, drop: bool = True) -> list[bool]:
    """Deliver DragEnter, DragMove (and Drop) with ``paths`` as file URLs to ``target`` (a
    widget or a QWindow), as Qt delivers a drag from a file manager; returns whether each
    event was accepted."""
    from PySide6 import QtCore, QtGui, QtWidgets

    mime = QtCore.QMimeData()
    mime.setUrls([QtCore.QUrl.fromLocalFile(str(p)) for p in paths])
    pos = QtCore.QPoint(target.width() // 2, target.height() // 2)
    copy, none = QtCore.Qt.DropAction.CopyAction, QtCore.Qt.MouseButton.NoButton
    mods = QtCore.Qt.KeyboardModifier.NoModifier
    events = [QtGui.QDragEnterEvent(pos, copy, mime, none, mods), QtGui.QDragMoveEvent(pos, copy, mime, none, mods)]
    if drop:
        events.append(QtGui.QDropEvent(QtCore.QPointF(pos), copy, mime, none, mods))
    accepted = []
    for ev in events:
        QtWidgets.QApplication.sendEvent(target, ev)
        accepted.append(ev.isAccepted())
    return accepted


def last(win, kind):
    return next((m for m in reversed(win.messages) if isinstance(m, kind)), None)


def sent(win, kind):
    return [c for c in win.sent if isinstance(c, kind)]


def steps_done(win) -> int:
    return max((m.step for m in win.messages if isinstance(m, M.TrainMetrics) and np.isfinite(m.loss)), default=0)


def open_and_start(app, win, path, timeout: float = 120.0) -> None:
    """Open a dataset as a user does: it is reviewed first, then Start trains it."""
    from .conftest import spin

    e = len(win.errors)
    win.open_paths([str(path)])
    assert spin(app, timeout, lambda: (win.scene is not None and win.scene.kind == "review"
                                       and win.scene.path == str(path)) or len(win.errors) > e), win.notes[-3:]
    assert len(win.errors) == e, win.errors[e:]
    win.dataset.start_btn.click()


def _quaternion(r) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix: the top eigenvector of Bar-Itzhack's symmetric 4 x 4."""
    k = np.array([[r[0, 0] - r[1, 1] - r[2, 2], 0, 0, 0],
                  [r[0, 1] + r[1, 0], r[1, 1] - r[0, 0] - r[2, 2], 0, 0],
                  [r[0, 2] + r[2, 0], r[1, 2] + r[2, 1], r[2, 2] - r[0, 0] - r[1, 1], 0],
                  [r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1], r[0, 0] + r[1, 1] + r[2, 2]]]) / 3
    x, y, z, w = np.linalg.eigh(k)[1][:, -1]
    return np.array([w, x, y, z]) * (1 if w >= 0 else -1)


def write_colmap_copy(dataset, folder) -> None:
    """The tiny nerfstudio ``dataset`` as a COLMAP text model in ``folder`` (images/ and
    sparse/0), what the pipeline's undistortion writes: a stand-in for SfM in tests."""
    import json
    import shutil
    from pathlib import Path

    dataset, folder = Path(dataset), Path(folder)
    meta = json.loads((dataset / "transforms.json").read_text())
    gl = np.diag([1.0, -1.0, -1.0, 1.0])
    (folder / "images").mkdir(parents=True, exist_ok=True)
    model = folder / "sparse" / "0"
    model.mkdir(parents=True, exist_ok=True)
    cams = [f"1 PINHOLE {meta['w']} {meta['h']} {meta['fl_x']} {meta['fl_y']} {meta['cx']} {meta['cy']}"]
    images = []
    for k, fr in enumerate(meta["frames"]):
        name = Path(fr["file_path"]).name
        shutil.copy(dataset / fr["file_path"], folder / "images" / name)
        w2c = np.linalg.inv(np.asarray(fr["transform_matrix"]) @ gl)
        q = _quaternion(w2c[:3, :3])
        images += [" ".join(str(v) for v in (k + 1, *q, *w2c[:3, 3], 1, name)), ""]
    (model / "cameras.txt").write_text("\n".join(cams) + "\n")
    (model / "images.txt").write_text("\n".join(images) + "\n")
    (model / "points3D.txt").write_text("")


def measure_event_loop(app, win, seconds: float = 6.0, orbit_every_ms: int = 50) -> dict:
    """Run the Qt event loop for ``seconds`` with a 2 ms precise timer ticking and the
    camera orbiting every ``orbit_every_ms``; returns the gaps between ticks (ms: median,
    p99, max, count) and the training steps and viewport frames before and after. Used by
    tests/app/test_window.py (a generous bound) and benchmarks/studio_event_loop.py (the
    50 ms one, measured on an otherwise idle machine)."""
    import time

    from PySide6 import QtCore

    frames0 = win.viewer_stats.frames if win.viewer_stats else 0
    step0 = steps_done(win)
    ticks: list[float] = []
    tick = QtCore.QTimer()
    tick.setTimerType(QtCore.Qt.TimerType.PreciseTimer)
    tick.setInterval(2)
    tick.timeout.connect(lambda: ticks.append(time.perf_counter()))
    mover = QtCore.QTimer()
    mover.setInterval(orbit_every_ms)
    mover.timeout.connect(lambda: (win.controller.camera.orbit(6, 0), win.controller._changed()))
    loop = QtCore.QEventLoop()
    QtCore.QTimer.singleShot(int(seconds * 1000), loop.quit)
    tick.start()
    mover.start()
    loop.exec()
    tick.stop()
    mover.stop()
    gaps = np.diff(ticks) * 1000 if len(ticks) > 1 else np.array([seconds * 1000.0])
    return {"ticks": len(ticks), "gap_median_ms": float(np.median(gaps)), "gap_p99_ms": float(np.percentile(gaps, 99)),
            "gap_max_ms": float(gaps.max()), "steps": [step0, steps_done(win)],
            "frames": [frames0, win.viewer_stats.frames if win.viewer_stats else frames0]}


class FakeEngine:
    """What the engine thread's Loads needs of it, without one: the device, the projects
    folder, no training under way, the messages emitted kept; set_scene does nothing and a
    failure is raised (engine/studio/loading.py)."""

    def __init__(self, gpu, projects):
        from types import SimpleNamespace

        self.gpu, self.s = gpu, SimpleNamespace(projects=projects)
        self.training = SimpleNamespace(unfinished=lambda: None)
        self.messages: list = []

    def emit(self, m) -> None:
        self.messages.append(m)

    def state(self, *a) -> None:
        pass

    def set_scene(self, scene) -> None:
        pass

    def fail(self, exc, *a, **kw) -> None:
        raise exc


@pytest.fixture(scope="module", autouse=True)
def swapchain_viewer():
    """These tests are about the native window's Vulkan swapchain, which a slow device
    (software Vulkan) does not present into unless told (spirula/app/image_view.py
    readback_reason); autouse in the modules that import it: set before the module's studio opens."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SPIRULA_VIEWER", "swapchain")
    yield
    mp.undo()
