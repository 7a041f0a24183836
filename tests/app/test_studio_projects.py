"""Projects (issue 27, item 3), in the window under Xvfb on software Vulkan: a stopped
training is in Open recent; reopening it offers Resume (from its step), Restart (from
step 0, same settings) and View (its splats); the settings are remembered (QSettings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spirula.engine.jobs.stages import train_checkpoint_path
from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import last, open_and_start, sent, steps_done

pytestmark = pytest.mark.timeout(300)


def _stop(app, win):
    n = sum(isinstance(m, M.Done) for m in win.messages)
    win.training.stop_requested.emit()
    assert spin(app, 120, lambda: sum(isinstance(m, M.Done) for m in win.messages) > n), "stop did not finish"
    return last(win, M.Done)


def _reopen_from_recent(app, win, project: Path):
    win._fill_recent()
    action = next((a for a in win.recent_menu.actions() if a.text() == str(project.resolve())), None)
    assert action is not None, [a.text() for a in win.recent_menu.actions()]
    action.trigger()
    assert spin(app, 10, lambda: win.project_dialog is not None and win.project_dialog.isVisible())
    return win.project_dialog


def test_stopped_training_reopens_from_recent_and_resumes(studio, tiny_dataset):
    app, win = studio
    win.training.steps.setValue(100_000)
    win.training.max_size.setValue(48)
    win.training.init_points.setValue(300)
    open_and_start(app, win, tiny_dataset)
    assert spin(app, 120, lambda: steps_done(win) > 0), win.notes[-3:]
    project = Path(win.scene.project)
    done = _stop(app, win)
    assert train_checkpoint_path(project).is_file() and done.result["step"] > 0
    stopped = done.result["step"]

    dlg = _reopen_from_recent(app, win, project)
    assert {k for k, b in dlg.buttons.items() if b.isEnabled()} == {"resume", "restart", "view"}
    assert f"stopped at step {stopped:,} of 100,000" in dlg.details.text()
    dlg.buttons["resume"].click()
    assert spin(app, 120, lambda: win.resumed is not None and win.resumed.step == stopped), win.notes[-3:]
    assert spin(app, 120, lambda: steps_done(win) > stopped)
    _stop(app, win)


def test_view_and_restart_a_project(studio):
    app, win = studio
    project = Path(win.scene.project)
    _reopen_from_recent(app, win, project).buttons["view"].click()
    assert spin(app, 60, lambda: win.scene.kind == "ply" and win.scene.path == str(project / "splat.ply"))
    n = len(sent(win, M.StartTraining))
    _reopen_from_recent(app, win, project).buttons["restart"].click()
    assert spin(app, 120, lambda: win.job_state == "running" and len(sent(win, M.StartTraining)) > n)
    cmd = sent(win, M.StartTraining)[-1]
    assert cmd.project == str(project.resolve()) and cmd.steps == 100_000 and cmd.max_size == 48
    started = last(win, M.StageStarted)
    assert started.stage == "train" and "resumed" not in started.detail
    _stop(app, win)


def test_settings_are_remembered(studio):
    from spirula.app import remembered
    from spirula.app.training_panel import TrainingPanel

    app, win = studio
    kept = remembered.load_values("training/software")
    assert kept["steps"] == 100_000 and kept["max_size"] == 48
    fresh = TrainingPanel()
    fresh.restore(kept)
    assert fresh.steps.value() == 100_000 and fresh.max_size.value() == 48 and fresh.init_points.value() == 300
