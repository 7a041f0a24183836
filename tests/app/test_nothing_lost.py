"""Nothing lost (issue 5, item 6), in the window under Xvfb on software Vulkan: an engine
error shows a dialog with the message and the file; closing the window while training
asks, then "Save and quit" stops after the step and writes a checkpoint while the window
shows it is saving (the Qt thread never waits); opening the project again (`spirula gui
<project>`) continues at that step and shows where it stopped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spirula.engine import checkpoint
from spirula.engine.studio import protocol as M
from spirula.engine.jobs.stages import train_checkpoint_path

from .studio_helpers import open_and_start
from ..patience import patient

pytestmark = pytest.mark.timeout(240)


def _studio(qapp, path, projects):
    from spirula.app.startup import create_studio

    _, win, _ = create_studio(path, dialogs=True, projects=projects, splash=False, size=(900, 640))
    return win


def _last(win, kind):
    return next((m for m in reversed(win.messages) if isinstance(m, kind)), None)


def _steps(win) -> int:
    return max((m.step for m in win.messages if isinstance(m, M.TrainMetrics) and np.isfinite(m.loss)), default=0)


def _answer(qtbot, win, text: str) -> None:
    """Click ``text`` in the close question once it is up (it runs a nested event loop)."""
    def click():
        box = win.close_box
        assert box is not None and box.isVisible()
        next(b for b in box.buttons() if b.text().replace("&", "") == text).click()

    from PySide6 import QtCore

    def poll():
        if win.close_box is not None and win.close_box.isVisible():
            click()
        else:
            QtCore.QTimer.singleShot(20, poll)

    QtCore.QTimer.singleShot(20, poll)


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    return tmp_path_factory.mktemp("projects")


@pytest.fixture(scope="module")
def state(qapp, projects):
    """The first window (closed by the close test) and what the tests pass on."""
    win = _studio(qapp, None, projects)
    yield {"win": win}
    win.shutdown(save=False)
    win.close()


def test_engine_error_shows_a_dialog_with_the_message_and_the_file(qtbot, tmp_path, state):
    win = state["win"]
    missing = tmp_path / "no-such-dataset"
    win.session.send(M.StartTraining(str(missing), steps=10))
    qtbot.waitUntil(lambda: bool(win.errors), timeout=int(patient(60_000)))
    err = _last(win, M.Error)
    assert err.path == str(missing) and "no-such-dataset" in err.text

    def dialog():
        return next(iter(_error_dialogs()), None)

    qtbot.waitUntil(lambda: dialog() is not None, timeout=int(patient(5_000)))
    box = dialog()
    assert box.text() == err.text and box.informativeText() == f"File: {missing}"
    assert box.detailedText().startswith("Log file: ")  # "Show Details…": where the tracebacks go
    assert win.isVisible() and win.session.alive  # an error is no crash
    box.accept()
    qtbot.waitUntil(lambda: dialog() is None, timeout=int(patient(5_000)))


def test_a_gui_bug_shows_a_dialog_not_a_crash(qtbot, state, monkeypatch):
    import sys

    from PySide6 import QtCore

    from spirula.app.startup import install_excepthook

    win = state["win"]
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored afterwards
    install_excepthook(win)
    n = len(win.errors)

    def buggy_slot():
        raise ValueError("a bug in a slot")

    QtCore.QTimer.singleShot(0, buggy_slot)
    qtbot.waitUntil(lambda: len(win.errors) > n, timeout=int(patient(5_000)))
    assert "ValueError: a bug in a slot" in win.errors[-1] and win.isVisible()
    del win.errors[n:]
    for box in _error_dialogs():
        box.accept()


def _error_dialogs() -> list:
    from PySide6 import QtWidgets

    return [w for w in QtWidgets.QApplication.topLevelWidgets()
            if isinstance(w, QtWidgets.QMessageBox) and w.objectName() == "engine-error" and w.isVisible()]


def test_close_while_training_asks_then_saves_a_checkpoint(qtbot, tiny_dataset, state):
    from PySide6 import QtWidgets

    win = state["win"]
    win.training.steps.setValue(100_000)
    win.training.max_size.setValue(64)
    win.training.init_points.setValue(400)
    win.training.eval_interval.setValue(0)
    open_and_start(QtWidgets.QApplication.instance(), win, tiny_dataset)
    qtbot.waitUntil(lambda: win.job_state == "running" and _steps(win) > 0, timeout=int(patient(120_000)))
    project = Path(win.scene.project)

    _answer(qtbot, win, "Cancel")
    win.close()
    assert win.isVisible() and win.session.alive and win.job_state == "running"
    step0 = _steps(win)
    qtbot.waitUntil(lambda: _steps(win) > step0, timeout=int(patient(60_000)))  # still training

    _answer(qtbot, win, "Save and quit")
    win.close()  # returns at once: the engine saves while the window says so
    assert win.isVisible() and win.saving_to_close
    assert win.save_progress is not None and win.save_progress.isVisible()
    qtbot.waitUntil(lambda: not win.isVisible(), timeout=int(patient(120_000)))
    assert not win.session.alive
    assert len(win.errors) == 1, win.errors  # the first test's
    saved = _last(win, M.CheckpointSaved)
    assert saved is not None and saved.stopped and saved.path == str(train_checkpoint_path(project))
    done = _last(win, M.Done)
    assert done.result["stopped_early"] and done.result["step"] == saved.step > 0
    assert Path(done.result["ply"]).is_file()
    ckpt = checkpoint.load(Path(saved.path))
    assert ckpt.step == saved.step and ckpt.extra["studio"]["dataset"] == str(Path(tiny_dataset).resolve())
    state.update(project=project, step=saved.step)


def test_reopening_the_project_resumes_where_it_stopped(qapp, qtbot, projects, state):
    project, step = state["project"], state["step"]
    win = _studio(qapp, project, projects)  # as `spirula gui <project>`
    try:
        qtbot.waitUntil(lambda: win.project_dialog is not None and win.project_dialog.isVisible(), timeout=int(patient(30_000)))
        win.project_dialog.buttons["resume"].click()  # it offers Resume, Restart and View
        qtbot.waitUntil(lambda: win.resumed is not None or bool(win.errors), timeout=int(patient(120_000)))
        assert not win.errors, win.errors
        r = win.resumed
        assert r.step == step and r.checkpoint == str(train_checkpoint_path(project)) and r.project == str(project)
        assert f"Resumed at step {step:,}" in win.training.source.text()
        assert win.scene.project == str(project) and len(win.scene.cameras) == 10
        assert win.training.steps_x and max(win.training.steps_x) <= step  # the curve up to the break
        qtbot.waitUntil(lambda: _steps(win) > step, timeout=int(patient(120_000)))  # and on from there
        assert min(m.step for m in win.messages if isinstance(m, M.TrainMetrics) and m.steps_per_sec > 0) > step
        _answer(qtbot, win, "Quit without saving")
        win.close()
        assert not win.isVisible() and not win.session.alive
        assert checkpoint.load(train_checkpoint_path(project)).step == step  # the saved one stays
    finally:
        win.shutdown(save=False)
        win.close()
