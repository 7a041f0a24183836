"""Issue 48 item 2: one path for a project's checkpoints, whoever made the project
(spirula/engine/jobs/project_layout.py checkpoint_path). A project made by `spirula train`, by `spirula run`
and by the studio each resumes from the studio (describe_project offers Resume, read_project
and TrainingScene continue it) and from the CLI (`spirula train --resume`, a rerun of
`spirula run`); a `spirula train` project of before, with <project>/checkpoint.npz, still
resumes, its checkpoint moved to the one path (read both, write one). On the code before,
`spirula train` wrote <output>/checkpoint.npz, which the studio did not see, and the studio
refused a checkpoint it had not written itself.

Software Vulkan, the studio tests' tiny ring scene (10 views of 64 x 48 px), 2 then 4 steps."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from spirula.engine import checkpoint
from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig

pytestmark = pytest.mark.timeout(600)


def _cfg(steps: int) -> RunConfig:
    return RunConfig(dataset=DatasetConfig(max_size=48, eval_every=5),
                     train=TrainConfig(steps=steps, checkpoint_every=100, log_interval=1, sh_degree=0, strategy="adc",
                                       seed=3))


def _after(n: int):
    """A should_stop that stops the run before its step n + 1 (it is asked before each step)."""
    asked = itertools.count()
    return lambda: next(asked) >= n


@pytest.fixture(scope="module")
def ring(tmp_path_factory) -> Path:
    from tests.app.scene import write_scene

    return write_scene(tmp_path_factory.mktemp("ring") / "ring")


@pytest.fixture(scope="module")
def projects(ring, tmp_path_factory, gpu) -> dict:
    """Three projects stopped at a checkpoint: made by `spirula train` (stopped after step 2),
    by `spirula run` (stopped after step 2) and by the studio (its training's step 0)."""
    from spirula.engine.config import settings_of
    from spirula.engine.jobs.pipeline import PipelineConfig, PipelineStopped, run_pipeline
    from spirula.engine.jobs.train import run_training
    from spirula.engine.studio import protocol as M
    from spirula.engine.studio.scenes import TrainingScene

    root = tmp_path_factory.mktemp("projects")
    made = {"train": root / "by-train", "run": root / "by-run", "studio": root / "by-studio"}
    m = run_training(ring, made["train"], _cfg(4), on_message=lambda _: None, should_stop=_after(2))
    assert m["stopped_early"] and m["step"] == 2
    with pytest.raises(PipelineStopped):
        run_pipeline(ring, made["run"], PipelineConfig(run=_cfg(4), with_mesh=False), should_stop=_after(2))
    cmd = M.StartTraining(str(ring), project=str(made["studio"]), **settings_of(_cfg(4)))
    scene = TrainingScene(gpu, _load(ring), cmd, made["studio"])
    scene.writer.submit(0, checkpoint.snapshot(scene.trainer, scene.cfg, scene.ident, gpu.adapter,
                                               scene.checkpoint_extra()))
    scene.writer.wait()
    scene.trainer.release()
    return made


def _load(ring):
    from spirula.engine.ingest import load_dataset

    return load_dataset(ring, 48)


STEP = {"train": 2, "run": 2, "studio": 0}


@pytest.mark.parametrize("maker", ["train", "run", "studio"])
def test_a_project_resumes_from_the_studio_whoever_made_it(projects, gpu, maker):
    from spirula.engine.studio.projects import describe_project, read_project
    from spirula.engine.studio.scenes import TrainingScene

    project = projects[maker]
    one = project / "checkpoints" / "train.npz"
    assert checkpoint.exists(one), f"{maker}: not checkpointed at the project's one path"
    info = describe_project(project)
    assert "resume" in info.choices and info.checkpoint == one and info.step == STEP[maker] and info.steps == 4
    cmd, dataset, ckpt = read_project(project)
    # it trains where its maker trained: train/ of a `spirula run` project, else the project
    assert Path(cmd.project).resolve() == (project / "train" if maker == "run" else project).resolve()
    scene = TrainingScene(gpu, dataset, cmd, Path(cmd.project))
    try:
        assert scene.writer.path == one
        scene.resume(ckpt, gpu.adapter)  # CheckpointError when it does not fit
        assert scene.trainer.state.step == STEP[maker] and scene.cfg.train.steps == 4
    finally:
        scene.trainer.release()


@pytest.mark.parametrize("maker", ["train", "studio", "run"])
def test_a_project_resumes_from_the_cli_whoever_made_it(projects, ring, maker, tmp_path):
    from spirula.engine.jobs.pipeline import PipelineConfig, run_pipeline
    from spirula.engine.jobs.train import run_training

    project = tmp_path / maker
    shutil.copytree(projects[maker], project)  # the studio test reads the same projects
    seen: list[str] = []
    if maker == "run":
        from spirula.engine import messages as msg

        events = []
        rec = run_pipeline(ring, project, PipelineConfig(run=_cfg(4), with_mesh=False), emit=events.append)
        train = next(s for s in rec["stages"] if s["name"] == "train")
        assert train["status"] == "done" and train["summary"]["step"] == 4
        seen = [m.detail for m in events if isinstance(m, msg.StageProgress) and m.detail]
    else:
        m = run_training(ring, project, _cfg(4), on_message=seen.append, resume="require")
        assert m["step"] == 4 and m["resumed_from_step"] == STEP[maker]
    one = project / "checkpoints" / "train.npz"
    assert any(f"resumed from {one} at step {STEP[maker]}" in s for s in seen), seen


def test_a_spirula_train_project_of_before_still_resumes_and_moves_to_the_one_path(projects, ring, tmp_path):
    """<project>/checkpoint.npz (+ checkpoint.prev.npz) of an older `spirula train`: the studio
    offers Resume, and `spirula train --resume` continues it; the next checkpoint and both
    generations are at <project>/checkpoints/ (nothing left under the old names)."""
    from spirula.engine.jobs.train import run_training
    from spirula.engine.studio.projects import describe_project

    project = tmp_path / "old"
    shutil.copytree(projects["train"], project)
    one = project / "checkpoints" / "train.npz"
    one.replace(project / "checkpoint.npz")
    if checkpoint.previous_path(one).is_file():
        checkpoint.previous_path(one).replace(project / "checkpoint.prev.npz")
    info = describe_project(project)
    assert "resume" in info.choices and info.checkpoint == project / "checkpoint.npz" and info.step == 2
    m = run_training(ring, project, _cfg(4), on_message=lambda _: None, resume="require")
    assert m["resumed_from_step"] == 2 and m["step"] == 4
    assert checkpoint.load(one).step == 4  # the end checkpointed, at the one path
    assert not (project / "checkpoint.npz").exists() and not (project / "checkpoint.prev.npz").exists()


@pytest.mark.parametrize("command", [["train"], ["run"], ["partition", "train"]])
def test_each_commands_help_names_the_one_checkpoint_path(command, capsys):
    """--checkpoint-every's help names the path each command writes (before, `spirula partition
    train --help` named spirula train's <output>/checkpoint.npz and spirula run's folder)."""
    from spirula.engine.cli.main import main

    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "checkpoints/train.npz" in text and "spirula train into <output>/checkpoint.npz" not in text, text
    assert "partition part's: <part>/train/checkpoints/" in text


def test_a_finished_run_trained_again_says_it_trains_afresh(ring, tmp_path):
    """A `spirula run` whose training finished keeps no checkpoint: rerun with more steps, it
    trains afresh and says so (it did without a word)."""
    from spirula.engine.jobs.pipeline import PipelineConfig, run_pipeline

    from spirula.engine.jobs.project_layout import checkpoint_path

    proj = tmp_path / "p"
    run_pipeline(ring, proj, PipelineConfig(run=_cfg(2), with_mesh=False))
    assert not checkpoint.exists(checkpoint_path(proj))
    seen: list = []
    run_pipeline(ring, proj, PipelineConfig(run=_cfg(3), with_mesh=False), emit=seen.append)
    texts = [str(getattr(m, "detail", "")) + str(getattr(m, "text", "")) for m in seen]
    assert any("training afresh" in t and "keeps no checkpoint" in t for t in texts), seen


def test_a_finished_spirula_train_names_its_checkpoint_in_metrics(ring, tmp_path):
    """metrics.json of a finished `spirula train` names the checkpoint it keeps and its step
    (both were null unless the run was stopped)."""
    import json

    from spirula.engine.jobs.project_layout import checkpoint_path
    from spirula.engine.jobs.train import run_training

    out = tmp_path / "t"
    m = run_training(ring, out, _cfg(3), on_message=lambda _: None)
    saved = json.loads((out / "metrics.json").read_text())
    assert checkpoint.exists(checkpoint_path(out))
    assert m["checkpoint_step"] == saved["checkpoint_step"] == 3
    assert Path(saved["checkpoint"]) == checkpoint_path(out)
