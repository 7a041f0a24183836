"""Frame selection for a video: the sharpest frame per window, near-duplicates dropped.

Two passes over the video, neither holding more than one frame:

1. :func:`analyze` decodes every frame and keeps per frame only a few numbers and a tiny
   thumbnail (:class:`FrameStats`): time, sharpness, motion.
2. :func:`select` (pure, on the statistics) picks the frames; :func:`write_frames`
   decodes again and writes the picked ones as JPEG.

Definitions (luma 0..255 on the upright image):
* sharpness: variance of the 5-point Laplacian of the luma box-downscaled so that its
  longer side is at most ``analysis_size`` (by an integer factor). Blur removes high
  frequencies, so a sharper frame of the same view scores higher; only comparable
  between nearby frames of one video.
* thumbnail: the luma box-downscaled to at most ``THUMB_SIZE`` px on the longer side,
  uint8. motion[i] = mean |thumb[i] - thumb[j]| with j the frame ``MOTION_DT`` seconds
  earlier (the first ones compare with the frame that much later), so it does not
  depend on the frame rate. The camera is "moving" at frame i when motion[i] exceeds
  ``STILL_THRESHOLD``.
* windows: frames are placed on an axis u in [0, 1) mixing moving time and time,
  u = w * S(t) / S(end) + (1 - w) * t / T, where S counts the moving frames so far;
  the axis is cut into ``target`` equal windows, so a stretch where the camera stands
  still gets few windows. The sharpest frame of each window is kept. (The amount of
  image change is not used as a speed: it depends on the texture as much as on the
  motion, and weighting by it left gaps of 30 degrees on an orbit.)
* near-duplicates: a kept frame whose thumbnail differs from the previous kept one by
  less than ``duplicate_threshold`` (mean absolute luma difference) is dropped: the
  camera did not move between them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .video import DecodedFrame

THUMB_SIZE = 32
MOTION_DT = 0.2         # s between the frames compared for motion
STILL_THRESHOLD = 1.5   # mean abs thumbnail difference (0..255) below which the camera is still


@dataclass
class FramesConfig:
    """Settings of frame selection (video input)."""

    target_frames: int = 0            # frames to keep; 0 = chosen from duration and motion
    frames_per_second: float = 6.0    # auto target: frames per second of moving camera
    min_frames: int = 30              # auto target bounds
    max_frames: int = 300
    motion_weight: float = 0.8        # w of the window axis (0 = equal time windows)
    duplicate_threshold: float = 1.0  # mean abs luma difference of thumbnails (0..255)
    analysis_size: int = 540          # longer side of the luma the sharpness is measured on
    max_size: int = 1920              # longer side of the written frames (0 = as decoded)
    jpeg_quality: int = 95
    start_s: float = 0.0              # use only this part of the video (end 0 = to the end)
    end_s: float = 0.0


@dataclass
class FrameStats:
    """Per decoded frame (decode order, N frames): time [N] float64 s, sharpness [N]
    float32, thumbs [N, th, tw] uint8; index [N] int64 decode index."""

    index: np.ndarray
    time: np.ndarray
    sharpness: np.ndarray
    thumbs: np.ndarray

    def motion(self) -> np.ndarray:
        """[N] float32 motion (module docstring)."""
        n = len(self.time)
        if n < 2:
            return np.zeros(n, np.float32)
        j = np.searchsorted(self.time, self.time - MOTION_DT)
        early = self.time - MOTION_DT < self.time[0]
        j[early] = np.minimum(np.searchsorted(self.time, self.time[early] + MOTION_DT), n - 1)
        th = self.thumbs.astype(np.int16)
        return np.abs(th - th[j]).mean(axis=(1, 2)).astype(np.float32)

    def save(self, path: Path) -> None:
        """Write as .npz to ``path`` (the caller makes it atomic)."""
        with open(path, "wb") as f:
            np.savez_compressed(f, **asdict(self))

    @classmethod
    def load(cls, path: Path) -> FrameStats:
        with np.load(path) as z:
            return cls(**{k: z[k] for k in ("index", "time", "sharpness", "thumbs")})


@dataclass
class Selection:
    """Result of :func:`select`: decode indices kept (increasing), and every frame's
    fate as records {index, time, sharpness, window, kept, reason}."""

    target: int
    kept: list[int]
    records: list[dict]

    def summary(self) -> dict:
        reasons: dict[str, int] = {}
        for r in self.records:
            if not r["kept"]:
                key = r["reason"].split(" (")[0]
                reasons[key] = reasons.get(key, 0) + 1
        return {"target": self.target, "kept": len(self.kept), "rejected": len(self.records) - len(self.kept),
                "rejected_by_reason": reasons}


def laplacian_variance(gray: np.ndarray) -> float:
    """Variance of the 5-point Laplacian over the interior of a [H, W] float image."""
    g = np.asarray(gray, np.float32)
    if g.shape[0] < 3 or g.shape[1] < 3:
        return 0.0
    lap = g[1:-1, :-2] + g[1:-1, 2:] + g[:-2, 1:-1] + g[2:, 1:-1] - 4.0 * g[1:-1, 1:-1]
    return float(lap.var(dtype=np.float64))


def box_factor(width: int, height: int, size: int) -> int:
    """Smallest integer factor bringing the longer side to at most ``size``."""
    return max(1, math.ceil(max(width, height) / max(size, 1)))


def box_reduce(img: np.ndarray, k: int) -> np.ndarray:
    """[H, W] -> [H // k, W // k] float32 mean of k x k blocks (partial border blocks
    dropped). Sums k strided row slices then k column slices (2k whole-array adds,
    much faster in NumPy than a reshaped mean over two axes)."""
    g = np.asarray(img, np.float32)
    if k <= 1:
        return g
    h, w = (g.shape[0] // k) * k, (g.shape[1] // k) * k
    g = g[:h, :w]
    rows = g[0::k].copy()
    for i in range(1, k):
        rows += g[i::k]
    out = rows[:, 0::k].copy()
    for i in range(1, k):
        out += rows[:, i::k]
    out *= np.float32(1.0 / (k * k))
    return out


def thumbnail(gray: np.ndarray, size: int = THUMB_SIZE) -> np.ndarray:
    """[H, W] float luma -> [h, w] uint8 box-downscaled so the longer side is <= size."""
    k = min(box_factor(gray.shape[1], gray.shape[0], size), min(gray.shape[:2]))
    return np.clip(np.rint(box_reduce(gray, k)), 0, 255).astype(np.uint8)


def analyze(frames: Iterable[DecodedFrame], width: int, height: int, cfg: FramesConfig,
            progress: Callable[[int], None] | None = None) -> FrameStats:
    """Sharpness, motion and thumbnail of every frame of ``frames`` (upright ``width`` x
    ``height``) within [cfg.start_s, cfg.end_s]; ``progress(n)`` after each decoded frame."""
    factor = box_factor(width, height, cfg.analysis_size)
    idx, times, sharp, thumbs = [], [], [], []
    for n, fr in enumerate(frames, 1):
        if progress is not None:
            progress(n)
        if fr.time < cfg.start_s:
            continue
        if cfg.end_s > 0 and fr.time > cfg.end_s:
            break
        g = fr.luma(factor)
        idx.append(fr.index)
        times.append(fr.time)
        sharp.append(laplacian_variance(g))
        thumbs.append(thumbnail(g))
    if not thumbs:
        return FrameStats(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.float32), np.zeros((0, 1, 1), np.uint8))
    return FrameStats(np.asarray(idx, np.int64), np.asarray(times, np.float64), np.asarray(sharp, np.float32),
                      np.stack(thumbs))


def auto_target(stats: FrameStats, cfg: FramesConfig) -> int:
    """Frames to keep: cfg.target_frames if set, else frames_per_second x the seconds
    during which the camera moves, clamped to [min_frames, max_frames]; never more than
    the frames available."""
    n = len(stats.time)
    if n == 0:
        return 0
    if cfg.target_frames > 0:
        return min(cfg.target_frames, n)
    duration = _duration(stats.time)
    moving = float(np.mean(stats.motion() > STILL_THRESHOLD))
    want = round(cfg.frames_per_second * duration * moving)
    return int(min(max(want, cfg.min_frames), cfg.max_frames, n))


def select(stats: FrameStats, cfg: FramesConfig) -> Selection:
    """Pick frames (see the module docstring); deterministic."""
    n = len(stats.time)
    target = auto_target(stats, cfg)
    if n == 0 or target == 0:
        return Selection(0, [], [])
    u = _window_axis(stats, cfg.motion_weight)
    window = np.minimum((u * target).astype(np.int64), target - 1)
    # sharpest per window: sort by (window, -sharpness) and take the first of each window
    order = np.lexsort((-stats.sharpness.astype(np.float64), window))
    first = np.ones(n, bool)
    first[1:] = window[order[1:]] != window[order[:-1]]
    best = np.sort(order[first])
    best_of_window = dict(zip(window[best].tolist(), best.tolist()))

    kept, dup_of = [], {}
    for i in best.tolist():
        if kept:
            j = kept[-1]
            if stats.thumbs[i].shape == stats.thumbs[j].shape:
                diff = float(np.abs(stats.thumbs[i].astype(np.int16) - stats.thumbs[j]).mean())
                if diff < cfg.duplicate_threshold:
                    dup_of[i] = (j, diff)
                    continue
        kept.append(i)
    kept_set = set(kept)
    records = []
    for i in range(n):
        w = int(window[i])
        rec = {"index": int(stats.index[i]), "time": round(float(stats.time[i]), 4),
               "sharpness": round(float(stats.sharpness[i]), 2), "window": w, "kept": i in kept_set, "reason": ""}
        if i in dup_of:
            j, diff = dup_of[i]
            rec["reason"] = f"near-duplicate (of frame {int(stats.index[j])}, difference {diff:.2f})"
        elif i not in kept_set:
            b = best_of_window[w]
            rec["reason"] = f"less sharp (frame {int(stats.index[b])} wins window {w})"
        records.append(rec)
    return Selection(target, [int(stats.index[i]) for i in kept], records)


def frame_name(index: int) -> str:
    """File name of the kept frame with decode index ``index`` (sorts in time order)."""
    return f"frame_{index:06d}.jpg"


def _duration(t: np.ndarray) -> float:
    if len(t) < 2:
        return 0.0
    step = float(np.median(np.diff(t)))
    return float(t[-1] - t[0]) + step


def _window_axis(stats: FrameStats, w: float) -> np.ndarray:
    """[N] float64 in [0, 1): the mixed motion / time axis of the module docstring."""
    n = len(stats.time)
    if n == 1:
        return np.zeros(1)
    t = stats.time - stats.time[0]
    step = float(np.median(np.diff(stats.time))) or 1e-3
    t_axis = t / (t[-1] + step)
    moving = (stats.motion() > STILL_THRESHOLD).astype(np.float64)
    cm = np.cumsum(moving) - moving[0]
    total = cm[-1]
    if total <= 0 or w <= 0:
        return t_axis
    m_axis = cm / total * (n - 1) / n  # keep the last frame below 1
    return w * m_axis + (1.0 - w) * t_axis


def write_frames(frames: Iterable[DecodedFrame], kept: list[int], out_dir: Path, cfg: FramesConfig,
                 progress: Callable[[int], None] | None = None) -> list[str]:
    """Write the frames whose decode index is in ``kept`` to ``out_dir`` as JPEG
    (quality cfg.jpeg_quality, longer side at most cfg.max_size), named by
    :func:`frame_name`; stops decoding after the last one. ``progress(k)`` after the
    k-th written frame. Returns the names written, in time order."""
    from PIL import Image

    from .images import fit_size, resize

    todo = set(kept)
    last = max(kept) if kept else -1
    names = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for fr in frames:
        if fr.index > last:
            break
        if fr.index not in todo:
            continue
        rgb = fr.rgb()
        w, h = fit_size(rgb.shape[1], rgb.shape[0], cfg.max_size)
        rgb = resize(rgb, w, h)
        name = frame_name(fr.index)
        Image.fromarray(rgb).save(out_dir / name, quality=cfg.jpeg_quality, subsampling=0)
        names.append(name)
        if progress is not None:
            progress(len(names))
    return names
