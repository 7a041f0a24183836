"""The studio's partition job (spirula/engine/partition/job.py, the panel's Train button): split ->
train -> merge on its own thread, messages for a row per part, Done with the merged PLY;
a second job with the same split keeps the trained parts (they are skipped)."""

import time

from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
from spirula.engine.io.ply import read_ply
from spirula.engine.messages import Done, Error, StageFinished, StageProgress, StageStarted
from spirula.engine.partition import run_parts
from spirula.engine.partition.job import PartitionJob
from spirula.engine.partition.split import SplitSettings
from tests.partition.city import make_city, write_city
from ..patience import patient


def _run(job, seconds=300):
    job.start()
    out, t_end = [], time.monotonic() + patient(seconds)
    while job.running or not job.messages.empty():
        out += job.poll()
        assert time.monotonic() < t_end, "the job did not finish"
        time.sleep(0.1)
    return out + job.poll()


def test_job_trains_the_parts_and_hands_back_the_merged_model(tmp_path, monkeypatch):
    monkeypatch.setattr(run_parts, "_import_ray", lambda: None)  # in-process (the Ray path: test_run_parts.py)
    write_city(tmp_path / "city", make_city(blocks=2, width=32, height=24), points=800)
    cfg = RunConfig(dataset=DatasetConfig(max_size=32, eval_every=0),
                    train=TrainConfig(steps=300, strategy="mcmc", mcmc_budget=800, max_gaussians=800, checkpoint_every=0))
    settings = SplitSettings(parts=2, min_cameras=4, total_gaussians=800, max_size=32)
    job = PartitionJob(tmp_path / "city", tmp_path / "parts", tmp_path / "merged", settings, cfg)
    msgs = _run(job)
    assert not [m for m in msgs if isinstance(m, Error)], msgs
    parts = {m.stage for m in msgs if isinstance(m, StageStarted) and m.stage.startswith("part_")}
    assert parts == {"part_00", "part_01"}
    assert {m.stage for m in msgs if isinstance(m, StageProgress)} >= parts
    done = msgs[-1]
    assert isinstance(done, Done) and len(read_ply(done.result["ply"])) == done.result["num_gaussians"] > 0
    again = _run(PartitionJob(tmp_path / "city", tmp_path / "parts", tmp_path / "merged2", settings, cfg))
    assert all(m.cached for m in again if isinstance(m, StageFinished) and m.stage.startswith("part_"))
    assert not any(isinstance(m, StageStarted) and m.stage == "split" for m in again)
    assert isinstance(again[-1], Done)
