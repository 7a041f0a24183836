"""Drop anywhere (issue 27, item 1), in the window under Xvfb on software Vulkan: drag
events delivered to the viewport (its native render window, through the widget that
holds it) and to the panels open every kind of input, and the overlay says what a drop
will do before it happens."""

from __future__ import annotations

from pathlib import Path

import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import drag_and_drop, last, sent

pytestmark = pytest.mark.timeout(300)


def _splats(tmp_path, tiny_dataset) -> Path:
    """A small 3DGS PLY (the tiny dataset's first steps)."""
    from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
    from spirula.engine.jobs.train import run_training

    out = tmp_path / "trained"
    cfg = RunConfig(dataset=DatasetConfig(max_size=64), train=TrainConfig(steps=5, init_random_points=300,
                                                                         checkpoint_every=0))
    run_training(tiny_dataset, out, cfg, on_message=lambda s: None)
    return out


def test_a_splat_file_dropped_on_the_viewport_opens(studio, tmp_path, tiny_dataset):
    app, win = studio
    project = _splats(tmp_path, tiny_dataset)
    vp = win.viewport
    # the drag goes where Qt sends it over the viewport: the container of the native window
    accepted = drag_and_drop(vp.container, [project / "splat.ply"], drop=False)
    assert accepted == [True, True], "the viewport refused the drag"
    assert win.drops.overlay.isVisible() and win.drops.text == "View the Gaussians of splat.ply"
    drag_and_drop(vp.window_, [project / "splat.ply"])
    assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "ply"), win.notes
    assert not win.drops.overlay.isVisible()
    assert sent(win, M.OpenPly)[-1].path == str(project / "splat.ply")
    # a project folder dropped on the readback image offers its choices; View opens the project
    # (its splats, cameras and curves: ViewProject)
    n, loaded = len(sent(win, M.ViewProject)), _count(win, M.SceneLoaded)
    drag_and_drop(vp.image_view, [project])
    assert spin(app, 10, lambda: win.project_dialog is not None and win.project_dialog.isVisible())
    win.project_dialog.buttons["view"].click()
    assert spin(app, 30, lambda: len(sent(win, M.ViewProject)) > n)
    assert spin(app, 60, lambda: _count(win, M.SceneLoaded) > loaded and win.job_state == "idle"), win.notes[-2:]


def test_video_photos_and_dataset_dropped_on_the_viewport(studio, tmp_path, tiny_dataset):
    app, win = studio
    vp = win.viewport
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"not a video")
    drag_and_drop(vp.container, [video], drop=False)
    assert win.drops.text.startswith("Reconstruct the video clip.mp4")
    win.sfm_cache.drop_action.setChecked(True)  # File > Drop SfM cache when a reconstruction finishes
    drag_and_drop(vp.container, [video])
    assert spin(app, 10, lambda: sent(win, M.StartPipeline)), "the video drop started nothing"
    assert sent(win, M.StartPipeline)[-1].source == str(video) and sent(win, M.StartPipeline)[-1].drop_sfm_cache
    from spirula.app import remembered

    assert remembered.store().value("sfm/drop_cache", False, type=bool)
    win.sfm_cache.drop_action.setChecked(False)
    assert not remembered.store().value("sfm/drop_cache", True, type=bool)
    e = len(win.errors)
    assert spin(app, 120, lambda: len(win.errors) > e and win.job_state in ("failed", "idle")), win.notes[-3:]
    assert "clip.mp4" in win.errors[-1]

    photos = tmp_path / "photos"
    photos.mkdir()
    for p in sorted((tiny_dataset / "images").iterdir())[:3]:
        (photos / p.name).write_bytes(p.read_bytes())
    drag_and_drop(vp.container, [photos], drop=False)
    assert win.drops.text == "Reconstruct the photos of photos (SfM), then review them"
    win.drops.handle(_leave())  # the drag left: the overlay goes after a moment
    assert spin(app, 2, lambda: not win.drops.overlay.isVisible())

    drag_and_drop(vp.container, [tiny_dataset], drop=False)
    assert win.drops.text == "Review the dataset ring, then train it"
    drag_and_drop(vp.container, [tiny_dataset])
    assert spin(app, 60, lambda: win.scene.kind == "review" and win.scene.path == str(tiny_dataset)), win.notes[-2:]
    assert sent(win, M.ReviewDataset)[-1].dataset == str(tiny_dataset) and not sent(win, M.StartTraining)
    # File > Clear SfM cache asks the engine about the project on show (this one has none)
    win.sfm_cache.clear_action.trigger()
    assert sent(win, M.ClearSfmCache)[-1].path == str(tiny_dataset)
    assert spin(app, 10, lambda: any("no SfM cache" in n for n in win.notes[-3:])), win.notes[-3:]


def test_cancel_during_sfm_keeps_the_frames(studio, tmp_path, tiny_dataset):
    import json

    app, win = studio
    e = len(win.errors)
    photos = tmp_path / "cancel-me"
    photos.mkdir()
    for p in sorted((tiny_dataset / "images").iterdir()):
        (photos / p.name).write_bytes(p.read_bytes())
    drag_and_drop(vp_of(win), [photos])
    assert spin(app, 60, lambda: any(isinstance(m, M.StageStarted) and m.stage == "sfm" for m in win.messages[-50:]))
    assert win.training.stop_btn.isEnabled() and win.training.stop_btn.text() == "Cancel"
    assert win.scene.kind == "empty" and win.dataset.list.count() == 0  # the old scene is gone meanwhile
    win.training.stop_btn.click()
    assert spin(app, 60, lambda: win.job_state == "idle" and last(win, M.JobState).detail == "reconstruction cancelled")
    project = Path(sent(win, M.StartPipeline)[-1].project or win.session.projects / "cancel-me")
    frames = sorted((project / "frames").glob("*.jpg"))
    assert len(frames) == 10, frames  # the finished import stays
    run = json.loads((project / "run.json").read_text())
    assert [s["status"] for s in run["stages"] if s["name"] == "sfm"] == ["cancelled"]
    assert len(win.errors) == e, win.errors[e:]


def test_photos_reconstructed_then_reviewed_then_trained_inside_their_project(studio, tmp_path, tiny_dataset,
                                                                            monkeypatch):
    """The pipeline up to undistortion (SfM stood in for by a copy of the tiny dataset), then
    the review; Start trains into the project's train/, checkpointing where `spirula run` does."""
    from spirula.engine.jobs import stages

    from .studio_helpers import write_colmap_copy

    app, win = studio

    def fake(outputs, write=None):
        def run(ctx):
            for rel in outputs:
                (ctx.staging / rel).mkdir(parents=True, exist_ok=True)
            if write is not None:
                write(ctx.staging)
            return {}
        return run

    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "sfm", fake(["sfm"]))
    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "undistort", fake([], lambda d: write_colmap_copy(tiny_dataset, d)))
    photos = tmp_path / "shoot"
    photos.mkdir()
    for p in sorted((tiny_dataset / "images").iterdir()):
        (photos / p.name).write_bytes(p.read_bytes())
    win.training.steps.setValue(30)
    win.training.max_size.setValue(48)
    e = len(win.errors)
    drag_and_drop(vp_of(win), [photos])
    assert spin(app, 120, lambda: (win.scene is not None and win.scene.kind == "review") or len(win.errors) > e), \
        win.notes[-3:]
    assert len(win.errors) == e, win.errors[e:]
    project = Path(win.scene.path)
    assert project.parent == win.session.projects and len(win.scene.cameras) == 10
    assert win.scene.project == str(project / "train")
    win.dataset.start_btn.click()
    assert spin(app, 120, lambda: last(win, M.Done) is not None and last(win, M.Done).result.get("project")
                == str((project / "train").resolve()) or len(win.errors) > e), win.notes[-3:]
    assert len(win.errors) == e, win.errors[e:]
    assert (project / "train" / "splat.ply").is_file() and (project / "frames").is_dir()


def vp_of(win):
    return win.viewport.container


def test_an_unsupported_drop_on_a_panel_says_why(studio, tmp_path):
    app, win = studio
    (tmp_path / "notes.txt").write_text("x")
    accepted = drag_and_drop(win.dataset.list.viewport(), [tmp_path / "notes.txt"], drop=False)
    assert accepted[0] and win.drops.text.startswith("Cannot open: notes.txt")
    n = len(win.notes)
    drag_and_drop(win, [tmp_path / "notes.txt"])
    assert spin(app, 5, lambda: len(win.notes) > n)
    assert "'.txt' files are not supported" in win.notes[-1]


def _count(win, kind) -> int:
    return sum(isinstance(m, kind) for m in win.messages)


def _leave():
    from PySide6 import QtGui

    return QtGui.QDragLeaveEvent()
