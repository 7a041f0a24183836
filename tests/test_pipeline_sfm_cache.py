"""A cancelled SfM keeps its frames and its feature/match database (spirula/engine/sfm/cache.py):
the real pipeline on a few seconds of the chair video, cancelled once matching has
finished; the rerun reuses the features and matches (its messages and run.json say so,
and it calls none of pycolmap's extraction or matching functions), and a changed matching
setting redoes the matching only."""

import json

import pycolmap
import pytest
from spirula.engine import messages as msg
from spirula.engine.jobs.pipeline import PipelineConfig, run_pipeline


def _config() -> PipelineConfig:
    cfg = PipelineConfig()
    cfg.frames.end_s = 4
    cfg.frames.target_frames = 14
    cfg.frames.max_size = 320
    cfg.sfm.num_threads = 2
    return cfg


def _sfm_details(seen) -> list[str]:
    return [m.detail for m in seen if isinstance(m, msg.StageProgress) and m.stage == "sfm"]


def test_cancel_after_matching_keeps_frames_and_matches_and_the_rerun_reuses_them(shared_data, tmp_path, monkeypatch):
    video = shared_data / "office_chair" / "office_chair.mp4"
    proj = tmp_path / "proj"
    cfg = _config()
    seen = []
    stop = [False]

    def emit(m):
        seen.append(m)
        # the user presses Cancel as soon as the last pair has been matched
        if isinstance(m, msg.StageProgress) and m.detail.startswith("matching") and m.total and m.done >= m.total:
            stop[0] = True

    with pytest.raises(KeyboardInterrupt):
        run_pipeline(video, proj, cfg, emit=emit, should_stop=lambda: stop[0], until_stage="sfm")
    rec = json.loads((proj / "run.json").read_text())
    assert [(s["name"], s["status"]) for s in rec["stages"]] == [
        ("decode", "done"), ("select", "done"), ("sfm", "cancelled")]
    frames = sorted((proj / "frames").glob("*.jpg"))
    assert len(frames) >= 12
    assert "features" in _sfm_details(seen)
    db_file = proj / "cache" / "sfm" / "database.db"
    with pycolmap.Database.open(db_file) as db:
        assert db.num_images() == len(frames) and db.num_keypoints() > 1000
        assert db.num_verified_image_pairs() >= len(frames) - 1
    assert not (proj / "sfm").exists()        # the stage itself did not finish
    frame_times = [f.stat().st_mtime_ns for f in frames]

    seen.clear()
    with monkeypatch.context() as m:  # reused: neither extracted nor matched again (not timed: no wall clock)
        for name in ("extract_features", "match_sequential", "match_exhaustive", "match_image_pairs"):
            m.setattr(pycolmap, name, lambda *a, _name=name, **k: pytest.fail(f"the rerun called pycolmap.{_name}"))
        rec = run_pipeline(video, proj, cfg, emit=seen.append, until_stage="sfm")
    by = {s["name"]: s for s in rec["stages"]}
    assert [by[s]["status"] for s in ("decode", "select", "sfm")] == ["cached", "cached", "done"]
    assert [f.stat().st_mtime_ns for f in frames] == frame_times            # frames not written again
    details = _sfm_details(seen)
    assert "features" not in details and "matching (sequential)" not in details, details
    assert "features (reused from an earlier run)" in details
    assert any(d.startswith("matching (sequential, reused") for d in details)
    sfm = by["sfm"]["summary"]
    assert sfm["database"] == {"features": "reuse", "matches": "reuse"}
    assert sfm["registered"] >= len(frames) - 1
    assert (proj / "sfm" / "database.db").is_file() and (proj / "sfm" / "sparse" / "0" / "images.bin").is_file()

    seen.clear()
    cfg.sfm.overlap = 6                      # a matching setting: the features stay, the matching is redone
    rec = run_pipeline(video, proj, cfg, emit=seen.append, until_stage="sfm")
    sfm = {s["name"]: s for s in rec["stages"]}["sfm"]["summary"]
    assert sfm["database"] == {"features": "reuse", "matches": "fresh"}
    assert "matching (sequential)" in _sfm_details(seen)

    # `spirula clean` drops the cache; the finished stages stay, and a rerun needs nothing from it
    from spirula.engine.cli.main import main

    assert main(["clean", str(proj)]) == 0
    assert not (proj / "cache").exists() and (proj / "sfm" / "sparse" / "0" / "images.bin").is_file()
    rec = run_pipeline(video, proj, cfg, emit=lambda m: None, until_stage="sfm")
    assert [s["status"] for s in rec["stages"]] == ["cached", "cached", "cached"]
