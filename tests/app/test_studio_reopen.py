"""Issue 48's studio bugs of a reopened project, each failing on dfa6aa5: a video's
reconstruction trained with appearance off though the Training panel said "Automatic
(exposure for a video)"; its checkpoint went to train/checkpoints/ while a reopening looked in
checkpoints/ (Resume greyed out); View showed the splats only (no mesh, cameras or curves,
though the dialog promised the mesh)."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import FakeEngine

pytestmark = pytest.mark.timeout(300)


def _trained_after_reconstruction(gpu, tiny_dataset, tmp_path):
    """(TrainingScene, project) of the studio's flow after a video's reconstruction (Loads.check
    of the pipeline, review, Start with the Training panel's settings and the review's project,
    as spirula/app/opening.py sends it)."""
    from spirula.app.training_panel import TrainingPanel
    from spirula.engine.studio.loading import Loads
    from spirula.engine.studio.scenes import TrainingScene

    project = tmp_path / "clip"
    shutil.copytree(tiny_dataset, project)   # what the reconstruction left: a COLMAP dataset ...
    (project / "run.json").write_text("{}")  # ... in a `spirula run` project
    engine = FakeEngine(gpu, tmp_path / "projects")
    loads = Loads(engine)
    loads.start()
    try:
        done = Future()
        done.set_result({"kind": "video", "project": str(project)})
        loads.pending = ("pipeline", done, (M.StartPipeline(str(tmp_path / "clip.mp4")), project))
        loads.check()                          # -> the review of the reconstruction
        loads.pending[1].result(timeout=120)
        loads.pending = None                   # reviewed (its scene is not needed here)
        panel = TrainingPanel()                # "Automatic (exposure for a video)" by default
        panel.steps.setValue(30)
        panel.max_size.setValue(48)
        panel.init_points.setValue(300)
        s = panel.settings()
        s["project"] = str(project / "train")  # the review scene's project (spirula/app/opening.py start_training)
        loads.start_training(M.StartTraining(str(project), **s))
        _, fut, cmd = loads.pending
        dataset, split = fut.result(timeout=120)  # through the training job's loading (its split too)
    finally:
        loads.close()
    return TrainingScene(gpu, dataset, cmd, Path(cmd.project), split), project


def test_a_video_reconstruction_trains_with_exposure(qapp, gpu, tiny_dataset, tmp_path):
    """The panel's "Automatic" appearance is exposure for a video's reconstruction."""
    scene, _ = _trained_after_reconstruction(gpu, tiny_dataset, tmp_path)
    assert scene.cfg.train.appearance == "exposure"


def test_a_video_reconstruction_resumes_from_its_folder(qapp, gpu, tiny_dataset, tmp_path):
    """Its checkpoint goes where the project's always goes (<project>/checkpoints/), so the
    project reopened from its folder offers Resume, which continues in its train/ folder."""
    from spirula.engine import checkpoint
    from spirula.engine.studio.projects import describe_project, read_project

    scene, project = _trained_after_reconstruction(gpu, tiny_dataset, tmp_path)
    assert scene.writer.path == project / "checkpoints" / "train.npz"
    scene.writer.submit(0, checkpoint.snapshot(scene.trainer, scene.cfg, scene.ident, gpu.adapter,
                                               scene.checkpoint_extra()))
    scene.writer.wait()
    info = describe_project(project)
    assert "resume" in info.choices and info.steps == 30
    again, _, ckpt = read_project(project)
    assert Path(again.project) == (project / "train").resolve() and ckpt.step == 0
    assert again.steps == 30 and again.max_size == 48


def _trained_project(root: Path, dataset: Path) -> Path:
    """A finished `spirula run` project: train/ (splat.ply, train.json with its loss history,
    metrics.json with two evaluations and the held-out names) and exports/mesh.glb."""
    import trimesh

    from spirula.engine.config import RunConfig, TrainConfig
    from spirula.engine.io.ply import write_ply
    from spirula.engine.ingest import load_dataset
    from spirula.engine.splat.param_layout import pack, unpack

    rng = np.random.default_rng(48)
    project = root / "made-by-run"
    (project / "train").mkdir(parents=True)
    (project / "exports").mkdir()
    (project / "run.json").write_text("{}")
    n = 64
    rows = pack(rng.normal(0, 0.5, (n, 3)), np.full((n, 3), -3.0), np.tile([1.0, 0, 0, 0], (n, 1)),
                np.zeros(n), rng.uniform(0, 1, (n, 3)), np.zeros((n, 0, 3)), 0)
    write_ply(project / "train" / "splat.ply", unpack(rows, 0))
    history = [{"step": k, "loss": 0.5 / k, "num_gaussians": n} for k in (10, 20, 30)]
    names = [c.name for c in load_dataset(dataset, 64).cameras]
    (project / "train" / "train.json").write_text(json.dumps(
        {"dataset": str(dataset), "config": json.loads(json.dumps(RunConfig(train=TrainConfig(steps=30)).to_dict())), "history": history}))
    (project / "train" / "metrics.json").write_text(json.dumps(
        {"step": 30, "psnr": 21.5, "held_out": names[:2],
         "evaluations": [{"step": 15, "psnr": 18.0, "ssim": 0.5}, {"step": 30, "psnr": 21.5, "ssim": 0.6}]}))
    box = trimesh.creation.box(extents=(0.5, 0.5, 0.5))
    (project / "exports" / "mesh.glb").write_bytes(box.export(file_type="glb"))
    return project


def test_view_of_a_reopened_project_shows_its_mesh_cameras_and_curves(studio, tiny_dataset, tmp_path):
    """View (the project dialog's choice) shows the mesh the dialog names (its splats to switch
    to), the dataset's cameras with the held-out split, the loss curve and the held-out PSNR."""
    from spirula.engine.studio.projects import describe_project

    app, win = studio
    project = _trained_project(tmp_path, Path(tiny_dataset))
    info = describe_project(project)
    assert info.mesh == project / "exports" / "mesh.glb" and "view" in info.choices
    n = len(win.messages)
    win.project_chosen(info, "view")
    assert spin(app, 120, lambda: any(isinstance(m, M.SceneLoaded) for m in win.messages[n:])), win.notes[-3:]
    loaded = next(m for m in win.messages[n:] if isinstance(m, M.SceneLoaded))
    assert loaded.kind == "mesh" and loaded.faces == 12 and loaded.num_gaussians == 64
    assert len(loaded.cameras) == 10 and sum(c.split == "test" for c in loaded.cameras) == 2
    assert spin(app, 30, lambda: len(win.training.psnr_y) == 2 and len(win.training.loss_y) == 3)
    assert win.training.psnr_y == [18.0, 21.5] and win.training.total == 30


def test_a_checkpoint_where_a_reconstruction_wrote_it_before_is_found_and_moved(qapp, gpu, tiny_dataset, tmp_path):
    """A project reconstructed and stopped by the studio before the fix has its checkpoint in
    train/checkpoints/: reopened, it offers Resume, which moves it to the project's one path."""
    from spirula.engine import checkpoint
    from spirula.engine.studio.projects import describe_project, read_project

    scene, project = _trained_after_reconstruction(gpu, tiny_dataset, tmp_path)
    old = project / "train" / "checkpoints" / "train.npz"
    old.parent.mkdir(parents=True)
    scene.writer.path = old
    scene.writer.submit(0, checkpoint.snapshot(scene.trainer, scene.cfg, scene.ident, gpu.adapter,
                                               scene.checkpoint_extra()))
    scene.writer.wait()
    assert describe_project(project).checkpoint == old
    _, _, ckpt = read_project(project)
    assert ckpt.path == project / "checkpoints" / "train.npz" and ckpt.path.is_file() and not old.exists()
