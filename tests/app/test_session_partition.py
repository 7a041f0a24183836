"""Issue 48 item 3: the partition panel's training goes through the engine thread that owns
the device (M.TrainPartition, spirula/engine/studio/partitioning.py), not a thread of its own: the
job runs on "spirula-engine" with the device's backend, its messages come back as
PartitionMessage ending in Done, and a Cancel sent while it runs reaches it out of band.
Before, the panel started spirula/engine/partition/job.py PartitionJob on its own thread, which
trained through the process's device beside the engine thread."""

from __future__ import annotations

import threading

import pytest

from spirula.engine.messages import Done, StageStarted
from spirula.engine.partition.split import SplitSettings
from spirula.engine.studio import protocol as M
from spirula.engine.studio.session import Session

from ..patience import patient
from .test_session import Driver

pytestmark = pytest.mark.timeout(300)


def test_train_partition_runs_on_the_engine_thread_and_stops_on_cancel(tmp_path, monkeypatch):
    import spirula.engine.partition.job as job

    seen = []
    started = threading.Event()

    def run_partition(dataset, parts_dir, project, settings, cfg, emit, should_stop, address=None):
        seen.append((threading.current_thread().name, dataset, parts_dir, project, settings, cfg.device,
                     cfg.train.strategy))
        emit(StageStarted("part_00", 10))
        started.set()
        t_end = threading.Event()
        while not should_stop():  # the parts train until Cancel: out of band, the engine thread is busy here
            assert not t_end.wait(0.01)
        emit(Done({"stopped": True}))

    monkeypatch.setattr(job, "run_partition", run_partition)
    s = Session(projects=tmp_path / "projects", warmup=False, viewer=False).start()
    try:
        d = Driver(s)
        ready = d.wait(lambda m: isinstance(m, M.EngineReady), 300, "EngineReady")
        split = SplitSettings(parts=2, min_cameras=4)
        s.send(M.TrainPartition(str(tmp_path / "city"), str(tmp_path / "parts"), str(tmp_path / "merged"), split))
        first = d.wait(lambda m: isinstance(m, M.PartitionMessage), 60, "the job's first message")
        assert isinstance(first.message, StageStarted) and first.message.stage == "part_00"
        assert started.wait(patient(60))
        s.send(M.Cancel(save=True))
        done = d.wait(lambda m: isinstance(m, M.PartitionMessage) and isinstance(m.message, Done), 60, "Done")
        assert done.message.result == {"stopped": True}
    finally:
        assert s.close(save=False, timeout=patient(120))
    (thread, dataset, parts_dir, project, settings, device, strategy), = seen
    assert thread == "spirula-engine" and settings == split
    assert (dataset, parts_dir, project) == (tmp_path / "city", tmp_path / "parts", tmp_path / "merged")
    assert device == ready.backend and strategy == "mcmc"  # `spirula partition train`'s fixed settings
