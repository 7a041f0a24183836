"""The SfM caches from the studio's engine (spirula/engine/studio/caches.py), without Qt: the age and
size rules applied to the projects folder when the engine is ready, File > Clear SfM cache
(ClearSfmCache) from a project's train/ folder, and its refusal when there is none."""

from __future__ import annotations

import time

from spirula.engine.sfm import cache
from spirula.engine.studio import protocol as M
from spirula.engine.studio.session import Session

from ..sfm.test_cache_clean import _project
from .test_session import Driver
from ..patience import patient


def test_the_engine_prunes_at_start_and_clears_on_request(tmp_path, rng):
    now = time.time()
    old = _project(tmp_path, "old", 5000, 45, now, rng)
    fresh = _project(tmp_path, "fresh", 7000, 1, now, rng)
    (fresh / "train").mkdir()
    s = Session(projects=tmp_path, warmup=False).start()
    try:
        d = Driver(s)
        d.wait(lambda m: isinstance(m, M.EngineReady), 300, "EngineReady")
        by_rule = d.wait(lambda m: isinstance(m, M.CacheCleared), 60, "the old cache pruned")
        assert (by_rule.project, by_rule.freed) == (str(old), 5000) and "45 days" in by_rule.why
        assert not cache.cache_folder(old).exists() and cache.cache_folder(fresh).is_dir()
        s.send(M.ClearSfmCache(str(fresh / "train")))
        asked = d.wait(lambda m: isinstance(m, M.CacheCleared), 60, "the fresh cache cleared")
        assert asked.freed == 7000 and asked.why == "asked for" and not cache.cache_folder(fresh).exists()
        assert (fresh / "sfm" / "sparse" / "0" / "images.bin").is_file()
        s.send(M.ClearSfmCache(str(fresh)))
        w = d.wait(lambda m: isinstance(m, M.Warning), 60, "no cache left")
        assert "no SfM cache" in w.text and str(fresh) in w.text
    finally:
        assert s.close(save=False, timeout=patient(120))
