"""Issue 50, items 4 and 5: projects that reopen as they were, and plots a person reads.
Switching to another project resets every panel (no previous export list, ticked mesh box,
curves or "failed" state after a rejected drop); Open recent lists projects, one entry each;
a cancelled video's project is reused when the same video is dropped again (its frames
kept); a dataset's split changes undo and redo from the Edit menu; the empty viewport shows
a drop target and the recent projects; the plots print their last value and have values
on their axes. In the window under Xvfb on software Vulkan, tiny scenes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import drag_and_drop, last, sent
from .test_studio_reopen import _trained_project

pytestmark = pytest.mark.timeout(300)


# --- without the engine -------------------------------------------------------------------------
def test_unfinished_reconstruction_of_the_same_input_is_found(tmp_path):
    from spirula.engine.studio.projects import unfinished_reconstruction

    video = tmp_path / "clip.mp4"
    video.write_bytes(b"x")
    root = tmp_path / "projects"

    def project(name: str, source: Path, trained: bool = False, mtime: int = 1_000) -> Path:
        p = root / name
        (p / "train").mkdir(parents=True)
        (p / "run.json").write_text(json.dumps({"input": str(source), "kind": "video"}))
        if trained:
            (p / "train" / "splat.ply").write_bytes(b"ply")
        os.utime(p / "run.json", ns=(mtime * 10 ** 9, mtime * 10 ** 9))
        return p

    assert unfinished_reconstruction(video, root) is None          # no projects folder yet
    project("clip-trained", video, trained=True, mtime=3_000)      # trained: never reused
    project("other", tmp_path / "other.mp4", mtime=4_000)          # another input
    assert unfinished_reconstruction(video, root) is None
    older = project("clip", video, mtime=1_000)
    newer = project("clip-2", video, mtime=2_000)
    assert unfinished_reconstruction(video, root) == newer
    assert unfinished_reconstruction(str(video.parent / "." / video.name), root) == newer  # the same file
    (newer / "train" / "splat.ply").write_bytes(b"ply")            # trained since
    assert unfinished_reconstruction(video, root) == older


def test_recent_lists_one_entry_per_project(qapp, tmp_path, tiny_dataset):
    from spirula.app import remembered

    remembered.store().clear()
    project = _trained_project(tmp_path, Path(tiny_dataset))   # run.json, train/, exports/mesh.glb
    for p in (project / "train" / "splat.ply", project / "exports" / "mesh.glb", project / "train", project):
        remembered.add_recent(p)                               # what viewing it touches
    loose = tmp_path / "loose.ply"
    loose.write_bytes(b"ply")
    remembered.add_recent(loose)
    assert remembered.recent() == [str(loose.resolve()), str(project.resolve())]
    # a list remembered before (every file touched) reads as its projects
    remembered.store().setValue("recent/paths", [str(project / "train" / "splat.ply"), str(loose),
                                                 str(project / "exports" / "mesh.glb")])
    assert remembered.recent() == [str(project.resolve()), str(loose.resolve())]
    # a reviewed dataset whose training became a project: the project takes its place
    remembered.add_recent(tiny_dataset)
    remembered.add_recent(project, replaces=tiny_dataset)
    assert remembered.recent() == [str(project.resolve()), str(loose.resolve())]
    remembered.store().clear()


def _axis_labels(plot) -> list[str]:
    """The value labels the left axis of ``plot`` draws now (pyqtgraph leaves out those
    that would not fit inside the axis)."""
    from PySide6 import QtGui

    axis = plot.getAxis("left")
    image = QtGui.QImage(10, 10, QtGui.QImage.Format.Format_RGB32)
    painter = QtGui.QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [text for _, _, text in specs[2]] if specs else []


def test_plots_print_their_last_value_and_have_values_on_their_axes(qapp):
    """At the Training panel's least height (its plots as short as a small screen makes them)
    each plot's left axis draws at least two numbers, and the title and a label by the last
    point print the last value."""
    from PySide6 import QtWidgets

    from spirula.app.training_panel import TrainingPanel

    panel = TrainingPanel()
    panel.show()
    panel.resize(420, panel.minimumSizeHint().height())
    panel.reset_curves(200)
    QtWidgets.QApplication.processEvents()
    assert panel.psnr_plot.height() <= 100
    assert "after the first evaluation" in panel.psnr_plot.plotItem.titleLabel.text
    rng = np.random.default_rng(50)
    losses = 0.2 / np.arange(1, 21) + rng.uniform(0, 0.01, 20)
    for k, loss in enumerate(losses):
        panel.on_metrics(M.TrainMetrics(10 * (k + 1), float(loss), 1000 + 50 * k, 5.0))
    for step, psnr in ((100, 19.873), (200, 24.3149)):
        panel.on_metrics(M.TrainMetrics(step, float("nan"), 1950, 0.0, psnr=psnr))
    panel._redraw()
    QtWidgets.QApplication.processEvents()
    titles = [p.plotItem.titleLabel.text for p in (panel.loss_plot, panel.count_plot, panel.psnr_plot)]
    assert f"{losses[-1]:.4f} at step 200" in titles[0]
    assert "1,950 at step 200" in titles[1]
    assert "24.31 dB at step 200" in titles[2]
    assert panel.psnr_plot.last_label.toPlainText() == "24.31 dB"
    for p, values in ((panel.loss_plot, losses), (panel.count_plot, 1000 + 50 * np.arange(20)),
                      (panel.psnr_plot, [19.873, 24.3149])):
        lo, hi = p.viewRange()[1]
        assert lo <= min(values) and max(values) <= hi              # every value in view
        labels = _axis_labels(p)
        numbers = [float(t.replace(",", "")) for t in labels]
        assert len(numbers) >= 2, (labels, lo, hi)                  # at least two numbers to read
        assert all(lo <= v <= hi for v in numbers), (numbers, lo, hi)
        box, label = p.getViewBox().sceneBoundingRect(), p.last_label.sceneBoundingRect()
        assert box.contains(label), (label, box)                    # the last value inside the plot
    panel.clear()                                                   # another project: nothing of this one
    assert not panel.psnr_y and "after the first evaluation" in panel.psnr_plot.plotItem.titleLabel.text
    assert panel.psnr_plot.last_label.toPlainText() == ""
    panel.close()


# --- in the window ------------------------------------------------------------------------------
def _review(app, win, path):
    e = len(win.errors)
    win.open_paths([str(path)])
    assert spin(app, 120, lambda: (win.scene is not None and win.scene.kind == "review"
                                   and win.scene.path == str(path)) or len(win.errors) > e), win.notes[-3:]
    assert len(win.errors) == e, win.errors[e:]


def test_the_empty_window_shows_a_drop_target_and_the_recent_projects(studio, tmp_path, tiny_dataset):
    app, win = studio
    page = win.start_page
    assert spin(app, 5, page.isVisible) and win.scene is None
    assert "Drop a video" in page.findChild(type(page.recent_label), "start-title").text()
    assert page.recent_label.text() == "No recent projects yet" and not page.recent_buttons
    vp, g = win.viewport.rect(), page.geometry()
    assert vp.contains(g) and abs(g.center().x() - vp.center().x()) <= 2   # over the viewport, centred
    assert drag_and_drop(page, [tiny_dataset], drop=False) == [True, True]  # a drop target: it says what a
    assert win.drops.text == f"Review the dataset {Path(tiny_dataset).name}, then train it"  # drop does
    win.drops.overlay.hide()
    from spirula.app import remembered

    project = _trained_project(tmp_path, Path(tiny_dataset))
    remembered.add_recent(project / "train" / "splat.ply")
    page.fill()
    assert [b.toolTip() for b in page.recent_buttons] == [str(project.resolve())]
    page.recent_buttons[0].click()                                   # one click: the project's choices
    assert spin(app, 10, lambda: win.project_dialog is not None and win.project_dialog.isVisible())
    win.project_dialog.reject()
    remembered.store().clear()


def test_dataset_split_edits_undo_and_redo_from_the_edit_menu(studio, tiny_dataset):
    app, win = studio
    _review(app, win, tiny_dataset)
    assert not win.start_page.isVisible()
    d, undo, redo = win.dataset, win.edit_tools.undo, win.edit_tools.redo
    first = list(d.splits)
    assert first == [c.split for c in win.scene.cameras] and not undo.isEnabled() and not redo.isEnabled()
    d.list.clearSelection()
    for r in (1, 2):
        d.list.item(r).setSelected(True)
    d.set_selected("excluded")
    excluded = [("excluded" if i in (1, 2) else s) for i, s in enumerate(first)]
    assert d.splits == excluded
    assert undo.isEnabled() and undo.text() == "Undo exclude 2 images"
    d.every.setValue(3)                                              # hold out every 3rd (exclusions stay)
    every3 = ["excluded" if s == "excluded" else ("test" if i % 3 == 0 else "train") for i, s in enumerate(excluded)]
    assert d.splits == every3 and undo.text() == "Undo hold out every 3"

    undo.trigger()                                                   # Ctrl+Z: the every-3 rule undone
    assert d.splits == excluded and d.every.value() == 8 and redo.text() == "Redo hold out every 3"
    undo.trigger()
    assert d.splits == first and not undo.isEnabled()
    held = sent(win, M.SetSplit)[-1]                                 # the engine's split follows
    assert held.excluded == () and set(held.held_out) == {c.name for c, s in zip(win.scene.cameras, first)
                                                          if s == "test"}
    redo.trigger()
    assert d.splits == excluded and sent(win, M.SetSplit)[-1].excluded == tuple(
        win.scene.cameras[i].name for i in (1, 2))
    d.list.clearSelection()
    d.list.item(4).setSelected(True)
    d.set_selected("test")                                           # a new change: nothing to redo
    assert not redo.isEnabled() and undo.text() == "Undo hold out 1 image"
    assert win.dataset.split_names()["excluded"] == tuple(win.scene.cameras[i].name for i in (1, 2))


def test_switching_projects_resets_every_panel(studio, tmp_path, tiny_dataset):
    from spirula.app import remembered

    app, win = studio
    # a rejected drop: a .mp4 that is no video fails in its reconstruction
    bogus = tmp_path / "clip.mp4"
    bogus.write_bytes(b"not a video")
    e = len(win.errors)
    drag_and_drop(win.viewport.container, [bogus])
    assert spin(app, 120, lambda: len(win.errors) > e and win.job_state == "failed"), win.notes[-3:]
    assert win.stage_status.text() != "No job" and win.statusBar().currentMessage().startswith("Error")
    # what the previous project leaves in the panels
    win.export.on_saved(M.Saved("ply", str(tmp_path / "old.ply")))
    win.export.bounds_group.setChecked(True)
    for step in (10, 20):
        win.handle(M.TrainMetrics(step, 0.3, 500, 4.0))
    win.video.keyframes.append((tuple(np.eye(4).reshape(-1)), 50.0))
    resets = win.project_state.resets

    project = _trained_project(tmp_path, Path(tiny_dataset))
    from spirula.engine.studio.projects import describe_project

    win.project_chosen(describe_project(project), "view")
    assert spin(app, 120, lambda: win.scene.kind == "mesh" and win.job_state == "idle"), win.notes[-3:]
    assert spin(app, 30, lambda: len(win.training.loss_y) == 3)
    saved = [win.export.saved.item(r).text() for r in range(win.export.saved.count())]
    assert saved == [f"mesh: {project / 'exports' / 'mesh.glb'}"]     # its own exports, not the old.ply
    assert not win.export.bounds_group.isChecked()
    assert win.controller.bounds == ()                               # no box in the viewport either
    assert win.training.loss_y == [0.05, 0.025, 0.5 / 30]            # the viewed project's curve alone
    assert win.training.psnr_y == [18.0, 21.5] and not win.video.keyframes
    assert len(win.scene.cameras) == 10 and win.dataset.list.count() == 10   # View: its cameras too
    win.docks["Training"].raise_()                                   # its plots redraw while shown
    assert spin(app, 10, lambda: "21.50 dB at step 30" in win.training.psnr_plot.plotItem.titleLabel.text)
    assert win.stage_status.text() == "No job" and win.training.state == "idle"
    assert not win.statusBar().currentMessage().startswith("Error")
    assert "failed" not in win.status_job.text()
    assert win.project_state.resets == resets + 1                   # one switch, one reset
    recent = remembered.recent()
    assert recent[0] == str(project.resolve()) and len(recent) == len(set(recent))
    assert not any(p.endswith((".ply", ".glb", "train")) for p in recent), recent


def test_a_review_and_its_training_keep_the_panels(studio, tiny_dataset):
    """The mesh box set while reviewing a dataset stays for its training (one piece of work)."""
    from spirula.app import remembered

    app, win = studio
    _review(app, win, tiny_dataset)
    win.export.bounds_group.setChecked(True)
    resets = win.project_state.resets
    win.training.steps.setValue(20)
    win.training.max_size.setValue(48)
    win.training.init_points.setValue(300)
    win.dataset.start_btn.click()
    assert spin(app, 120, lambda: win.scene.kind == "dataset" or win.errors), win.notes[-3:]
    assert win.export.bounds_group.isChecked() and win.project_state.resets == resets
    assert spin(app, 180, lambda: last(win, M.Done) is not None and win.job_state == "finished"), win.notes[-3:]
    project = str(Path(win.scene.project).resolve())
    assert remembered.recent()[0] == project and str(Path(tiny_dataset).resolve()) not in remembered.recent()


def test_a_cancelled_video_is_reused_when_dropped_again(studio, tmp_path, tiny_dataset, monkeypatch):
    """The same video dropped after a Cancel goes on in its project: decode and select are
    not redone (cached), the frames on disk are the same files."""
    from PIL import Image

    from spirula.engine.jobs import stages
    from tests.ingest.videos import write_video

    app, win = studio
    frames = [np.asarray(Image.open(p).convert("RGB")) for p in sorted((Path(tiny_dataset) / "images").iterdir())]
    video = write_video(tmp_path / "turn.mp4", frames * 2)

    def sfm_until_cancelled(ctx):  # SfM stood in for: it runs until Cancel
        while not ctx.should_stop():
            time.sleep(0.01)
        raise KeyboardInterrupt

    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "sfm", sfm_until_cancelled)

    def drop_and_cancel() -> tuple[Path, list]:
        n, e = len(win.messages), len(win.errors)
        drag_and_drop(win.viewport.container, [video])
        assert spin(app, 120, lambda: any(isinstance(m, M.StageStarted) and m.stage == "sfm"
                                          for m in win.messages[n:]) or len(win.errors) > e), win.notes[-3:]
        assert len(win.errors) == e, win.errors[e:]
        win.training.stop_btn.click()
        assert spin(app, 60, lambda: win.job_state == "idle"
                    and last(win, M.JobState).detail == "reconstruction cancelled")
        scene = next(m for m in win.messages[n:] if isinstance(m, M.SceneLoaded))
        return Path(scene.project), win.messages[n:]

    project, _ = drop_and_cancel()
    assert sent(win, M.StartPipeline)[-1].project == ""              # the engine chose the project
    kept = {p.name: p.stat().st_mtime_ns for p in (project / "frames").iterdir()}
    assert kept
    again, messages = drop_and_cancel()
    assert again == project
    cached = {m.stage for m in messages if isinstance(m, M.StageFinished) and m.cached}
    assert {"decode", "select"} <= cached
    assert {p.name: p.stat().st_mtime_ns for p in (project / "frames").iterdir()} == kept
    assert [p.name for p in project.parent.iterdir() if p.name.startswith("turn")] == ["turn"]
