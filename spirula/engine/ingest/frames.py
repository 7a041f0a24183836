"""Frame selection for a video: the sharpest frame per window of time, near-duplicates dropped.

Two passes over the video, neither holding more than one decoded frame:

1. :func:`analyze` measures every frame (spirula/engine/ingest/frame_stats.py: time, sharpness,
   motion, a thumbnail), keeping a few numbers per frame in memory and the thumbnails in
   a file, so memory does not grow with the video beyond ~24 bytes per frame.
2. :func:`select` (pure, on the statistics) picks the frames, reading only the winners'
   thumbnails; :func:`write_frames` decodes again and writes the picked ones as JPEG.

Everything is measured in presentation time (each frame's timestamp), never in frame
counts, so variable-frame-rate video (phones lower the rate in the dark, drop frames,
pause) is sampled evenly in time:

* windows: frames are placed on an axis u in [0, 1) mixing moving time and time,
  u = w * S(t) / S(end) + (1 - w) * t / T, where S(t) is how long the camera moved
  before t (the durations of the moving frames before it) and T the duration of the
  frames. The axis is cut into equal windows and the sharpest frame of each window is
  kept: a stretch where the camera stands still gets few windows, a stretch recorded at
  a higher frame rate gets no more than its time. A gap in the timestamps leaves windows
  empty; then the axis is cut into more windows, the fewest that give ``target``
  non-empty ones, and where that gives more, the two winners closest in time share one
  window (the sharper wins) until ``target`` remain. (The amount of image change is not
  used as a speed: it depends on the texture as much as on the motion, and weighting by
  it left gaps of 30 degrees on an orbit.)
* all frames: ``target_frames`` < 0, or at least the number of frames decoded, keeps
  every decoded frame (no windows, no near-duplicate check).
* near-duplicates: a kept frame whose thumbnail differs from the previous kept one by
  less than ``duplicate_threshold`` (mean absolute luma difference) is dropped: the
  camera did not move between them.
* automatic count (``target_frames`` 0): ``frames_per_second`` x the seconds during which
  the camera moves, within [min_frames, max_frames].
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .frame_stats import (MOTION_DT, STILL_THRESHOLD, THUMB_SIZE, FrameStats, box_factor, laplacian_variance,
                          measure, thumbnail)
from .video import DecodedFrame, box_reduce

__all__ = ["FramesConfig", "FrameStats", "Selection", "analyze", "auto_target", "select", "write_frames",
           "frame_name", "laplacian_variance", "box_factor", "box_reduce", "thumbnail", "THUMB_SIZE", "MOTION_DT",
           "STILL_THRESHOLD"]

@dataclass
class FramesConfig:
    """Settings of frame selection (video input)."""

    target_frames: int = 0            # frames to keep; 0 = chosen from duration and motion; < 0 = all
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


_LESS_SHARP, _DUPLICATE = 1, 2


@dataclass
class Selection:
    """Result of :func:`select`: ``kept`` decode indices (increasing), and per analysed
    frame (N) its window [N] int64 and fate: ``fate`` [N] int8 (0 kept, 1 less sharp than
    its window's winner, 2 near-duplicate), ``winner`` [W] position of each window's
    winner, ``duplicates`` {position: (position of the kept frame it repeats, difference)}.
    :meth:`iter_records` gives the same as {index, time, sharpness, window, kept, reason}."""

    target: int
    kept: list[int]
    stats: FrameStats | None = None
    window: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fate: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    winner: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    duplicates: dict[int, tuple[int, float]] = field(default_factory=dict)

    def iter_records(self) -> Iterator[dict]:
        """One record per analysed frame, in decode order (built one at a time)."""
        st = self.stats
        if st is None:
            return
        for i in range(len(st.time)):
            w, fate = int(self.window[i]), int(self.fate[i])
            rec = {"index": int(st.index[i]), "time": round(float(st.time[i]), 4),
                   "sharpness": round(float(st.sharpness[i]), 2), "window": w, "kept": fate == 0, "reason": ""}
            if fate == _DUPLICATE:
                j, diff = self.duplicates[i]
                rec["reason"] = f"near-duplicate (of frame {int(st.index[j])}, difference {diff:.2f})"
            elif fate == _LESS_SHARP:
                rec["reason"] = f"less sharp (frame {int(st.index[self.winner[w]])} wins window {w})"
            yield rec

    @property
    def records(self) -> list[dict]:
        return list(self.iter_records())

    def summary(self) -> dict:
        reasons = {}
        for code, name in ((_LESS_SHARP, "less sharp"), (_DUPLICATE, "near-duplicate")):
            count = int(np.count_nonzero(self.fate == code))
            if count:
                reasons[name] = count
        return {"target": self.target, "kept": len(self.kept), "rejected": int(np.count_nonzero(self.fate)),
                "rejected_by_reason": reasons}


def analyze(frames: Iterable[DecodedFrame], width: int, height: int, cfg: FramesConfig,
            progress: Callable[[int], None] | None = None, thumbs_to: Path | None = None) -> FrameStats:
    """Sharpness, motion and thumbnail of every frame of ``frames`` (upright ``width`` x
    ``height``) within [cfg.start_s, cfg.end_s]; ``progress(n)`` after each decoded frame;
    thumbnails streamed to the file ``thumbs_to`` when given (see :func:`frame_stats.measure`)."""
    return measure(frames, width, height, cfg.analysis_size, cfg.start_s, cfg.end_s, progress, thumbs_to)


def _keeps_all(n: int, cfg: FramesConfig) -> bool:
    return cfg.target_frames < 0 or cfg.target_frames >= n > 0


def auto_target(stats: FrameStats, cfg: FramesConfig) -> int:
    """Frames to keep: every frame for ``target_frames`` < 0, else cfg.target_frames if
    set, else frames_per_second x the seconds during which the camera moves (the
    durations of the moving frames), clamped to [min_frames, max_frames]; never more
    than the frames available."""
    n = len(stats.time)
    if n == 0:
        return 0
    if cfg.target_frames < 0:
        return n
    if cfg.target_frames > 0:
        return min(cfg.target_frames, n)
    moving_s = float(stats.durations()[stats.motion() > STILL_THRESHOLD].sum())
    want = round(cfg.frames_per_second * moving_s)
    return int(min(max(want, cfg.min_frames), cfg.max_frames, n))


def select(stats: FrameStats, cfg: FramesConfig) -> Selection:
    """Pick frames (see the module docstring); deterministic."""
    n = len(stats.time)
    target = auto_target(stats, cfg)
    if n == 0 or target == 0:
        return Selection(0, [], stats)
    if _keeps_all(n, cfg):
        pos = np.arange(n)
        return Selection(target, [int(i) for i in stats.index], stats, pos, np.zeros(n, np.int8), pos)
    u = _window_axis(stats, cfg.motion_weight)
    window = _windows(u, target)
    best = _winners(window, stats.sharpness)
    while len(best) > target:   # more non-empty windows than asked: merge the closest pair
        gaps = np.diff(stats.time[best])
        k = int(np.argmin(gaps))
        a, b = best[k], best[k + 1]
        keep, drop = (a, b) if stats.sharpness[a] >= stats.sharpness[b] else (b, a)
        window[window == window[drop]] = window[keep]
        best = best[best != drop]
    window = np.unique(window, return_inverse=True)[1].astype(np.int64)   # windows 0..W-1 in time order
    fate = np.full(n, _LESS_SHARP, np.int8)
    kept, duplicates = _drop_duplicates(stats, best, cfg.duplicate_threshold)
    fate[kept] = 0
    for i in duplicates:
        fate[i] = _DUPLICATE
    return Selection(target, [int(stats.index[i]) for i in kept], stats, window, fate, best, duplicates)


def _winners(window: np.ndarray, sharpness: np.ndarray) -> np.ndarray:
    """Positions (increasing) of the sharpest frame of each non-empty window (the first on ties)."""
    order = np.lexsort((-np.asarray(sharpness, np.float64), window))
    first = np.ones(len(order), bool)
    first[1:] = window[order[1:]] != window[order[:-1]]
    return np.sort(order[first])


def _drop_duplicates(stats: FrameStats, best: np.ndarray, threshold: float) -> tuple[list[int], dict]:
    kept: list[int] = []
    last: tuple[int, np.ndarray] | None = None   # (position, thumbnail) of the last kept frame
    duplicates: dict[int, tuple[int, float]] = {}
    for start in range(0, len(best), 4096):   # only the winners' rows are read, a chunk at a time
        chunk = best[start:start + 4096]
        thumbs = np.asarray(stats.thumbs[chunk], np.int16)
        for i, th in zip(chunk.tolist(), thumbs):
            if last is not None:
                diff = float(np.abs(th - last[1]).mean())
                if diff < threshold:
                    duplicates[i] = (last[0], diff)
                    continue
            kept.append(i)
            last = (i, th)
    return kept, duplicates


def _windows(u: np.ndarray, target: int) -> np.ndarray:
    """[N] int64 window of each frame: ``u`` (non-decreasing, in [0, 1)) cut into the
    fewest equal windows, at least ``target``, of which at least ``target`` hold a frame
    (bisection on the count; the count of non-empty windows grows with it)."""
    def cut(m: int) -> np.ndarray:
        return np.minimum((u * m).astype(np.int64), m - 1)

    def filled(m: int) -> int:
        return 1 + int(np.count_nonzero(np.diff(cut(m))))

    lo, hi = target, target
    limit = max(target, len(u)) << 12   # beyond, frames that close are one (w = 1 and a still camera)
    while filled(hi) < target and hi < limit:
        lo, hi = hi, hi * 2
    if lo < hi:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if filled(mid) >= target else (mid, hi)
    return cut(hi)


def frame_name(index: int) -> str:
    """File name of the kept frame with decode index ``index`` (sorts in time order)."""
    return f"frame_{index:06d}.jpg"


def _window_axis(stats: FrameStats, w: float) -> np.ndarray:
    """[N] float64 in [0, 1): the mixed moving-time / time axis of the module docstring."""
    n = len(stats.time)
    if n == 1:
        return np.zeros(1)
    d = stats.durations()
    t_axis = (stats.time - stats.time[0]) / (stats.time[-1] - stats.time[0] + d[-1])
    moving = (stats.motion() > STILL_THRESHOLD) * d
    s = np.concatenate([[0.0], np.cumsum(moving)[:-1]])
    total = moving.sum()
    if total <= 0 or w <= 0:
        return t_axis
    return w * s / total + (1.0 - w) * t_axis


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
