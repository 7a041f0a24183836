"""Input class: how errors reach the user. An expected error in the studio (a bad
dataset, a file that cannot be read) is logged once, as its message, without a
traceback; a bug keeps its traceback. The out-of-memory advice offers to continue from a
checkpoint only when one was written."""

from __future__ import annotations

import logging

from spirula.engine.studio import protocol as M
from spirula.engine.errors import DatasetError, DeviceMemoryError
from spirula.engine.studio.engine_thread import EngineThread
from spirula.engine.studio.session import Session


def _raised(exc: Exception) -> Exception:
    try:
        raise exc
    except Exception as e:  # noqa: BLE001 - to give it a traceback
        return e


def test_expected_studio_errors_are_logged_once_without_a_traceback(caplog):
    engine = EngineThread(Session(viewer=False))
    with caplog.at_level(logging.DEBUG):
        engine.fail(_raised(DatasetError("/data/x: COLMAP model found in /data/x/sparse/0 but no images folder")))
    records = [r for r in caplog.records if r.name.startswith("spirula")]
    assert len(records) == 1 and records[0].exc_info is None
    assert records[0].getMessage() == ("engine error: /data/x: COLMAP model found in /data/x/sparse/0 but no images "
                                       "folder")
    assert "Traceback" not in caplog.text
    msgs = engine.s.poll()
    assert [type(m) for m in msgs] == [M.Error] and msgs[0].text.startswith("/data/x: COLMAP")


def test_a_bug_keeps_its_traceback(caplog):
    engine = EngineThread(Session(viewer=False))
    with caplog.at_level(logging.DEBUG):
        engine.fail(_raised(KeyError("oops")))
    records = [r for r in caplog.records if r.name.startswith("spirula")]
    assert len(records) == 1 and records[0].exc_info is not None
    assert "Traceback" in caplog.text


class _Writer:
    def __init__(self, kept):
        self._kept = kept

    def kept(self):
        return self._kept


def _advice(monkeypatch, kept) -> str:
    """_Job.out_of_memory's text with ``kept`` as the checkpoint on disk (None: none yet);
    no device needed (the VRAM table is stubbed)."""
    import spirula.engine.profile.reporting as reporting
    from spirula.engine.config import RunConfig
    from spirula.engine.jobs.train import _Job

    monkeypatch.setattr(reporting, "build_report", lambda *a, **k: {})
    monkeypatch.setattr(reporting, "format_report", lambda r: "title\nrule\nVRAM table")
    job = _Job.__new__(_Job)
    job.cfg, job.trainer, job.writer, job.gpu = RunConfig(), None, _Writer(kept), None
    return job.out_of_memory(DeviceMemoryError("out of device memory: allocating 1.00 MiB for 'x' failed"))


def test_out_of_memory_advice_matches_the_checkpoint_on_disk(monkeypatch):
    none = _advice(monkeypatch, None)
    assert "No checkpoint had been written yet" in none
    assert "continue from the checkpoint" not in none and "--resume" not in none and "run it again" in none
    kept = _advice(monkeypatch, "the last good checkpoint (step 40) is kept in /p/checkpoint.npz")
    assert "The last good checkpoint (step 40) is kept" in kept and "--resume" in kept
