"""Input class 4, video, round two: frame selection by presentation time, not by frame
count, with memory that does not grow with the video.

A variable-frame-rate clip written here with PyAV: 2 s at 60 fps, a 1 s gap without
frames, 2 s at 10 fps with jittered timestamps, a camera panning at constant speed.
"N frames" must fall evenly on the two halves by time (a count-based pick puts ~6 of 7
in the 60 fps half); "all frames" must keep every decoded frame; the motion measured
while streaming must equal the one computed afterwards from all thumbnails.

The one-hour memory test is opt-in (SPIRULA_LONG_TESTS=1, ~1 min): it writes an hour of
32 x 32 video at 30 fps (108,000 frames) and runs the decode and select stages, asserting
that the process's peak resident memory grows by less than 100 MB (measured: ~10 MB;
before the streaming statistics: 924 MB).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.ingest.frame_stats import ThumbFile
from spirula.engine.ingest.frames import FramesConfig, FrameStats, analyze, auto_target, select
from spirula.engine.ingest.video import iter_frames, probe

from ..ingest.videos import textured, write_video

PAN_PX_PER_S = 60.0


def _vfr_clip(path: Path) -> tuple[Path, np.ndarray]:
    """(file, [N] presentation times in s) of the clip of the module docstring."""
    rng = np.random.default_rng(7)
    dense = np.arange(0, 2000, 1000 / 60)                          # 0 .. 2 s at 60 fps
    sparse = 3000 + np.arange(20) * 100 + rng.integers(-20, 21, 20)  # 3 .. 5 s at ~10 fps
    pts_ms = np.rint(np.concatenate([dense, sparse])).astype(int)
    scene = textured(48, 64 + int(PAN_PX_PER_S * 5) + 1, seed=3)
    frames = [scene[:, int(PAN_PX_PER_S * t / 1000):][:, :64] for t in pts_ms]
    return write_video(path, frames, pts_ms=pts_ms.tolist()), pts_ms / 1000.0


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path, times = _vfr_clip(tmp_path_factory.mktemp("vfr") / "vfr pan.mkv")
    info = probe(path)
    stats = analyze(iter_frames(path, info), info.width, info.height, FramesConfig())
    np.testing.assert_allclose(stats.time, times - times[0], atol=1e-6)   # every frame, its own time
    return path, stats


@pytest.mark.parametrize("n", [8, 10, 14])
def test_n_frames_are_spaced_evenly_in_time(clip, n):
    _, stats = clip
    sel = select(stats, FramesConfig(target_frames=n))
    assert len(sel.kept) == n
    t = stats.time[np.searchsorted(stats.index, sel.kept)]
    first, second = t[t < 2.5], t[t >= 2.5]
    # the two halves last 2 s each: as many frames in each (a count-based pick: 120 vs 20 frames)
    assert abs(len(first) - len(second)) <= 1, t
    # one pick per equal stretch of time (the sharpest in it): no stretch of two slots
    # without a pick, from the start to the end, except across the gap
    slot = 5.0 / n
    inside = np.diff(t)[(t[:-1] >= 2.5) | (t[1:] < 2.5)]
    assert inside.max() <= 2 * slot, t
    assert t[0] <= slot and t[-1] >= stats.time[-1] - slot, t
    assert (first.max() >= 2.0 - slot) and (second.min() <= 3.0 + slot), t


def test_all_frames_keeps_every_decoded_frame(clip):
    _, stats = clip
    n = len(stats.time)
    for target in (-1, n, n + 50):
        sel = select(stats, FramesConfig(target_frames=target))
        assert sel.kept == stats.index.tolist(), target
        assert sel.summary()["rejected"] == 0
    assert auto_target(stats, FramesConfig(target_frames=-1)) == n


def test_streamed_motion_equals_motion_from_all_thumbnails(clip, tmp_path):
    path, stats = clip
    batch = FrameStats(stats.index, stats.time, stats.sharpness, np.asarray(stats.thumbs)).motion()
    np.testing.assert_array_equal(stats.motion(), batch)
    # by hand: mean |thumb difference| with the last frame at least 0.2 s earlier
    i = int(np.searchsorted(stats.time, 3.5))
    j = int(np.flatnonzero(stats.time <= stats.time[i] - 0.2)[-1])
    ref = np.abs(stats.thumbs[i].astype(float) - stats.thumbs[j]).mean()
    assert stats.motion()[i] == pytest.approx(ref, rel=1e-6)
    # the frame after the gap compares with the one before it: it moved (was 0 when it compared with itself)
    after_gap = int(np.searchsorted(stats.time, 2.5))
    assert stats.motion()[after_gap] > 10
    # the thumbnails streamed to a file give the same statistics
    info = probe(path)
    on_disk = analyze(iter_frames(path, info), info.width, info.height, FramesConfig(), thumbs_to=tmp_path / "t.u8")
    assert isinstance(on_disk.thumbs, ThumbFile)
    np.testing.assert_array_equal(np.asarray(on_disk.thumbs), stats.thumbs)
    np.testing.assert_array_equal(on_disk.thumbs[[40, 3, 130]], stats.thumbs[[40, 3, 130]])
    np.testing.assert_array_equal(on_disk.motion(), stats.motion())
    on_disk.save(tmp_path / "stats.npz")
    back = FrameStats.load(tmp_path / "stats.npz")
    np.testing.assert_array_equal(np.asarray(back.thumbs), stats.thumbs)
    assert select(back, FramesConfig(target_frames=9)).kept == select(stats, FramesConfig(target_frames=9)).kept


def test_automatic_count_follows_seconds_of_motion_not_frames():
    """10 s standing still at 60 fps, then 10 s moving at 5 fps: 10 s of motion."""
    rng = np.random.default_rng(2)
    t = np.concatenate([np.arange(600) / 60.0, 10 + np.arange(50) / 5.0])
    thumbs = np.zeros((650, 8, 8), np.uint8)
    thumbs[600:] = rng.integers(0, 255, (50, 8, 8))   # every moving frame differs
    stats = FrameStats(np.arange(650), t, np.ones(650, np.float32), thumbs)
    cfg = FramesConfig(min_frames=5)
    assert auto_target(stats, cfg) == round(10 * cfg.frames_per_second)


def _vm_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


@pytest.mark.skipif(os.environ.get("SPIRULA_LONG_TESTS") != "1", reason="opt-in: SPIRULA_LONG_TESTS=1 (~1 min)")
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc to reset the peak RSS")
def test_one_hour_of_video_decodes_in_bounded_memory(tmp_path):
    import av

    from spirula.engine.jobs.pipeline import PipelineConfig, run_pipeline

    def write(path: Path, n: int) -> Path:
        rng = np.random.default_rng(0)
        strip = rng.integers(0, 256, (32, 512), dtype=np.uint8)
        with av.open(str(path), "w") as c:
            s = c.add_stream("mpeg4", rate=30)
            s.width, s.height, s.pix_fmt = 32, 32, "yuv420p"
            for i in range(n):   # a slow pan over a random strip, 1 px every 3 frames
                x = (i // 3) % 480
                img = np.repeat(strip[:, x:x + 32, None], 3, axis=2)
                f = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
                f.pts = i
                for p in s.encode(f):
                    c.mux(p)
            for p in s.encode():
                c.mux(p)
        return path

    n = 30 * 3600
    path = write(tmp_path / "hour.mkv", n)
    cfg = PipelineConfig()
    cfg.frames.target_frames = 200
    # a first run on 10 s of video: what the pipeline imports (~60 MB of modules) is not growth
    run_pipeline(write(tmp_path / "warm-up.mkv", 300), tmp_path / "warm-up", cfg, until_stage="select")
    Path("/proc/self/clear_refs").write_text("5")   # reset the peak RSS to the current RSS
    before = _vm_kib("VmRSS")
    rec = run_pipeline(path, tmp_path / "proj", cfg, until_stage="select")
    growth_mb = (_vm_kib("VmHWM") - before) / 1024
    print(f"one hour, {n} frames: peak memory grew by {growth_mb:.1f} MB")
    by = {s["name"]: s for s in rec["stages"]}
    assert by["decode"]["summary"]["frames_decoded"] == n
    assert by["select"]["summary"]["kept"] >= 190
    assert growth_mb < 100, f"peak memory grew by {growth_mb:.0f} MB over {n} frames"
