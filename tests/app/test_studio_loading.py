"""Issue 48 item 2: the studio's training loads its data through the training job's loading
(spirula/engine/jobs/train.py load_training_data: the memory preflight, the dataset, the split),
for Start and for Resume, the Dataset panel's held-out and excluded images included; before,
the studio read the dataset and made the split itself (spirula/engine/studio/loading.py, scenes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spirula.engine import checkpoint
from spirula.engine.studio import protocol as M

from .scene import write_scene
from .studio_helpers import FakeEngine

pytestmark = pytest.mark.timeout(300)


def test_start_and_resume_load_through_the_training_job(gpu, tmp_path, monkeypatch):
    import spirula.engine.jobs.train as job
    from spirula.engine.ingest import load_dataset
    from spirula.engine.studio.loading import Loads
    from spirula.engine.studio.scenes import TrainingScene

    calls = []
    real = job.load_training_data

    def spy(path, cfg, gpu_of, on_message, held_out=(), excluded=(), cached=None):
        calls.append((Path(path), cfg.dataset.max_size, tuple(held_out), tuple(excluded)))
        return real(path, cfg, gpu_of, on_message, held_out, excluded, cached)

    monkeypatch.setattr(job, "load_training_data", spy)
    ring = write_scene(tmp_path / "ring")
    names = [c.name for c in load_dataset(ring, 48).cameras]
    project = tmp_path / "p"
    loads = Loads(FakeEngine(gpu, tmp_path / "projects"))
    loads.start()
    try:
        loads.start_training(M.StartTraining(str(ring), project=str(project), steps=4, max_size=48,
                                             held_out=(names[1],), excluded=(names[2],)))
        _, fut, cmd = loads.pending
        dataset, split = fut.result(timeout=120)
        loads.pending = None
        assert calls == [(ring, 48, (names[1],), (names[2],))]
        assert split[1] == [1] and 2 not in split[0] and 1 not in split[0]
        scene = TrainingScene(gpu, dataset, cmd, project, split)
        assert (scene.train_idx, scene.test_idx) == (split[0], split[1])
        scene.writer.submit(0, checkpoint.snapshot(scene.trainer, scene.cfg, scene.ident, gpu.adapter,
                                                   scene.checkpoint_extra()))
        scene.writer.wait()
        scene.trainer.release()
        loads.open_project(M.OpenProject(str(project)))  # Resume
        again, dataset2, ckpt, split2 = loads.pending[1].result(timeout=120)
        loads.pending = None
    finally:
        loads.close()
    assert len(calls) == 2 and calls[1] == (ring.resolve(), 48, (names[1],), (names[2],))
    assert split2 == split and ckpt.step == 0 and again.steps == 4
