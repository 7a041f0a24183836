"""Review, then train (issue 27, item 2), in the window under Xvfb on software Vulkan:
opening a dataset shows it (cameras, thumbnails, the held-out split, the settings) and
trains nothing until Start; the split chosen in the Dataset panel is what trains; opening
another dataset while training is refused with the panels and curves left as they were;
the software device gets the preset that densifies early."""

from __future__ import annotations

import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin
from .scene import write_scene
from .studio_helpers import last, sent, steps_done

pytestmark = pytest.mark.timeout(300)


def test_a_dataset_opens_for_review_and_trains_on_start(studio, tiny_dataset):
    app, win = studio
    assert win.training.preset.currentText().startswith("Software device")  # lavapipe here
    assert win.training.densify_from.value() == 100 and win.training.steps.value() == 2000
    win.training.steps.setValue(100_000)
    win.training.max_size.setValue(64)
    win.training.init_points.setValue(400)
    win.open_paths([str(tiny_dataset)])
    assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "review"), win.notes[-2:]
    assert win.job_state == "review" and not sent(win, M.StartTraining)
    assert win.dataset.list.count() == 10 and win.dataset.start_btn.isVisible()
    assert [c.split for c in win.scene.cameras].count("test") == 2  # every 8th of 10: images 0 and 8
    assert "Review, then Start" in win.dataset.summary.text()
    assert win.training.start_btn.isEnabled()
    spin(app, 1.0)
    assert steps_done(win) == 0, "training began before Start"

    # the split is the user's: exclude image 3, hold out image 5 as well
    for row, split in ((3, "excluded"), (5, "test")):
        win.dataset.list.clearSelection()
        win.dataset.list.item(row).setSelected(True)
        win.dataset.split_buttons[split].click()
    assert "1 excluded" in win.dataset.summary.text()
    names = [c.name for c in win.scene.cameras]
    split = sent(win, M.SetSplit)[-1]  # the viewport's frustums follow the split
    assert split.excluded == (names[3],) and set(split.held_out) == {names[0], names[5], names[8]}
    spin(app, 0.5)
    assert not win.errors, win.errors
    win.dataset.start_btn.click()
    assert spin(app, 120, lambda: win.job_state == "running" and steps_done(win) > 0), win.notes[-3:]
    cmd = sent(win, M.StartTraining)[-1]
    names = [c.name for c in win.scene.cameras]
    assert cmd.excluded == (names[3],) and set(cmd.held_out) == {names[0], names[5], names[8]}
    assert cmd.densify_from == 100 and cmd.max_size == 64
    assert win.scene.kind == "dataset"
    assert [c.split for c in win.scene.cameras] == ["test", "train", "train", "excluded", "train", "test", "train",
                                                   "train", "test", "train"]


def test_a_thumbnail_double_click_gives_the_keys_to_the_viewport(studio):
    from PySide6 import QtWidgets

    app, win = studio
    win.activateWindow()
    spin(app, 0.3, lambda: win.isActiveWindow())
    win.dataset.list.setFocus()
    spin(app, 0.3, lambda: QtWidgets.QApplication.focusWidget() is win.dataset.list)
    # the view's keys are window-wide (issue 50 item 2): a list with the focus does not take them
    assert QtWidgets.QApplication.focusWidget() is win.dataset.list and win._viewport_has_focus()
    win.dataset.list.itemActivated.emit(win.dataset.list.item(2))
    spin(app, 0.3)
    assert win.controller.look_through == 2 and win._viewport_has_focus()
    n = len(sent(win, M.SetViewMode))
    win.scale_frustums(2.0)
    assert sent(win, M.SetViewMode)[n:][-1].frustum_scale == 2.0


def test_opening_another_dataset_while_training_is_refused_and_changes_nothing(studio, tmp_path):
    app, win = studio
    other = write_scene(tmp_path / "other", views=4)
    scene, curve = win.scene, len(win.training.steps_x)
    assert curve > 0
    n = len(win.notes)
    win.open_paths([str(other)])
    spin(app, 1.0)
    assert "Cannot open other while training ring" in win.notes[n], win.notes[n:]
    assert win.scene is scene and win.training.dataset == scene.path and win.dataset.list.count() == 10
    assert len(win.training.steps_x) >= curve and win.job_state == "running"
    assert not sent(win, M.ReviewDataset)[-1].dataset.endswith("other")
    win.training.stop_requested.emit()
    assert spin(app, 120, lambda: last(win, M.Done) is not None)
