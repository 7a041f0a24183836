"""The SfM database kept between runs (spirula/engine/sfm/cache.py), on 14 chair frames at 320 px:
a run cancelled during feature extraction or during matching continues where it stopped
(only the missing images are extracted, only the missing pairs matched), a finished one
is reused, and a changed feature setting starts again from nothing."""

import pycolmap
import pytest
from spirula.engine.sfm import SfmConfig, run_sfm
from PIL import Image

N = 14


@pytest.fixture(scope="module")
def frames(shared_data, tmp_path_factory):
    ref = shared_data / "office_chair" / "reference" / "images"
    out = tmp_path_factory.mktemp("chair_cache_frames")
    names = [f"{i:04d}.jpg" for i in range(1, 2 * N + 1, 2)]
    for n in names:
        with Image.open(ref / n) as im:
            s = 320 / max(im.size)
            im.resize((round(im.width * s), round(im.height * s)), Image.Resampling.LANCZOS).save(out / n, quality=95)
    return out, names, Image.open(out / names[0]).size


def _run(frames, out, cache, cfg, stop_when=None):
    image_dir, names, size = frames
    reports = []
    stop = [False]

    def report(what, done, total):
        reports.append((what, done, total))
        if stop_when is not None and stop_when(what, done, total):
            stop[0] = True

    summary = run_sfm(image_dir, names, {"video": names}, {"video": size}, "video", out, cfg, report=report,
                      should_stop=lambda: stop[0], cache_dir=cache)
    return summary, reports


def test_cancelled_extraction_and_matching_continue_where_they_stopped(frames, tmp_path):
    cache, cfg = tmp_path / "cache", SfmConfig(num_threads=2)
    with pytest.raises(KeyboardInterrupt):   # cancelled after the first chunk of images
        _run(frames, tmp_path / "a", cache, cfg, stop_when=lambda what, d, t: what == "features")
    with pycolmap.Database.open(cache / "database.db") as db:
        kept = db.num_images()
    assert 0 < kept < N

    with pytest.raises(KeyboardInterrupt):   # continued; then cancelled after the first chunk of pairs
        _run(frames, tmp_path / "b", cache, cfg, stop_when=lambda what, d, t: what.startswith("matching (sequential)")
             and d > 0)
    with pycolmap.Database.open(cache / "database.db") as db:
        assert db.num_images() == N and db.num_cameras() == 1   # the first run's camera, not a second one
        matched = db.num_matched_image_pairs()
    assert matched > 0

    summary, reports = _run(frames, tmp_path / "c", cache, cfg)
    assert summary["database"] == {"features": "reuse", "matches": "resume"}
    match_reports = [(d, t) for what, d, t in reports if what == "matching (sequential)"]
    assert match_reports and match_reports[0][0] > matched - 1, match_reports   # counted from the pairs kept
    assert not [r for r in reports if r[0] == "features"]
    assert summary["registered"] >= N - 1


def test_an_unfinished_extraction_resumes_without_extracting_the_kept_images(frames, tmp_path):
    cache, cfg = tmp_path / "cache", SfmConfig(num_threads=2)
    with pytest.raises(KeyboardInterrupt):
        _run(frames, tmp_path / "a", cache, cfg, stop_when=lambda what, d, t: what == "features")
    with pycolmap.Database.open(cache / "database.db") as db:
        kept = db.num_images()
    _, reports = _run(frames, tmp_path / "b", cache, cfg)
    feats = [(d, t) for what, d, t in reports if what == "features"]
    assert ("features (continuing an earlier run)", 0, N) in reports
    assert feats[0] == (kept, N) and feats[-1] == (N, N), feats   # starts at the images already there

    cfg.max_features = 4000                  # a feature setting: a fresh database
    summary, reports = _run(frames, tmp_path / "c", cache, cfg)
    assert summary["database"] == {"features": "fresh", "matches": "fresh"}
    assert [(d, t) for what, d, t in reports if what == "features"][0][0] < N
