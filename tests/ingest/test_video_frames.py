"""Frame selection (spirula.engine.ingest.frames): sharpness measure, the one sharp frame among
blurred ones, near-duplicates of a static camera, automatic frame count."""

import numpy as np
from spirula.engine.ingest.frames import (FramesConfig, FrameStats, analyze, auto_target, box_reduce, laplacian_variance,
                                  select, thumbnail, write_frames)
from spirula.engine.ingest.video import iter_frames, probe
from PIL import Image, ImageFilter
from scipy import ndimage

from .videos import textured, write_video


def blurred(img: np.ndarray, radius: float) -> np.ndarray:
    return np.asarray(Image.fromarray(img).filter(ImageFilter.GaussianBlur(float(radius)))) if radius else img


def test_laplacian_variance_matches_scipy_on_the_interior():
    g = np.random.default_rng(1).random((40, 50)).astype(np.float32) * 255
    ref = ndimage.laplace(g.astype(np.float64))[1:-1, 1:-1].var()
    assert abs(laplacian_variance(g) - ref) < 1e-3 * ref


def test_box_reduce_matches_block_mean():
    g = np.random.default_rng(2).random((37, 53)).astype(np.float32)
    for k in (1, 2, 3, 7):
        h, w = 37 // k * k, 53 // k * k
        ref = g[:h, :w].reshape(h // k, k, w // k, k).mean(axis=(1, 3))
        np.testing.assert_allclose(box_reduce(g, k), ref, rtol=1e-5, atol=1e-6)
    assert thumbnail(g * 255).shape == (18, 26)   # 53 -> factor 2 for a 32 px thumbnail


def test_the_one_sharp_frame_in_a_window_is_kept(tmp_path):
    base = textured(96, 128, seed=3)
    rng = np.random.default_rng(4)
    sharp_at = 6
    radii = rng.uniform(1.0, 2.5, 10)
    frames = [blurred(base, 0 if i == sharp_at else r) for i, r in enumerate(radii)]
    # a little camera shake so the frames are not near-duplicates of each other
    frames = [np.roll(f, shift=i, axis=1) for i, f in enumerate(frames)]
    path = write_video(tmp_path / "blur.mp4", frames)
    info = probe(path)
    cfg = FramesConfig(target_frames=1, duplicate_threshold=0.0)
    stats = analyze(iter_frames(path, info), info.width, info.height, cfg)
    assert len(stats.time) == 10
    assert int(np.argmax(stats.sharpness)) == sharp_at
    sel = select(stats, cfg)
    assert sel.kept == [sharp_at]
    rejected = [r for r in sel.records if not r["kept"]]
    assert len(rejected) == 9 and all("less sharp" in r["reason"] for r in rejected)
    assert all(r["sharpness"] < sel.records[sharp_at]["sharpness"] for r in rejected)
    names = write_frames(iter_frames(path, info), sel.kept, tmp_path / "out", cfg)
    assert names == ["frame_000006.jpg"]
    assert Image.open(tmp_path / "out" / names[0]).size == (128, 96)


def test_sharpest_per_window_over_several_windows():
    rng = np.random.default_rng(5)
    n, target = 60, 6
    sharp = rng.uniform(10, 20, n).astype(np.float32)
    winners = [3, 17, 22, 38, 45, 57]            # one per window of 10 frames
    sharp[winners] = 100
    thumbs = rng.integers(0, 255, (n, 8, 8), dtype=np.uint8)   # all different (moving camera)
    stats = FrameStats(np.arange(n), np.arange(n) / 30.0, sharp, thumbs)
    sel = select(stats, FramesConfig(target_frames=target))
    assert sel.kept == winners
    assert len(sel.records) == n and sum(r["kept"] for r in sel.records) == target


def test_near_duplicates_from_a_static_camera_are_dropped(tmp_path):
    scene = textured(120, 200, seed=7)
    frames = []
    rng = np.random.default_rng(8)
    for i in range(30):   # 1 s standing still (sensor noise only), then 1 s panning
        x = 0 if i < 15 else (i - 14) * 4
        crop = scene[10:90, x:x + 120].astype(np.int16) + rng.integers(-2, 3, (80, 120, 3))
        frames.append(np.clip(crop, 0, 255).astype(np.uint8))
    path = write_video(tmp_path / "static.mp4", frames)
    info = probe(path)
    cfg = FramesConfig(target_frames=10)
    stats = analyze(iter_frames(path, info), info.width, info.height, cfg)
    motion = stats.motion()
    assert motion[2:13].max() < 1.5 < motion[20:].min()
    sel = select(stats, cfg)
    static_kept = [i for i in sel.kept if i < 15]
    assert len(static_kept) <= 2, sel.kept
    assert len([i for i in sel.kept if i >= 15]) >= 6
    dups = [r for r in sel.records if r["reason"].startswith("near-duplicate")]
    assert all(r["index"] < 16 for r in dups)
    assert sel.summary()["kept"] == len(sel.kept)


def test_automatic_count_follows_moving_time():
    rng = np.random.default_rng(9)
    n = 600   # 20 s at 30 fps, camera moving all the time
    moving = FrameStats(np.arange(n), np.arange(n) / 30.0, np.ones(n, np.float32),
                        rng.integers(0, 255, (n, 8, 8), dtype=np.uint8))
    cfg = FramesConfig()
    assert auto_target(moving, cfg) == round(20 * cfg.frames_per_second)
    still = FrameStats(np.arange(n), np.arange(n) / 30.0, np.ones(n, np.float32), np.zeros((n, 8, 8), np.uint8))
    assert auto_target(still, cfg) == cfg.min_frames
    assert auto_target(moving, FramesConfig(target_frames=42)) == 42
    assert auto_target(moving, FramesConfig(max_frames=50)) == 50
