"""Per-frame statistics of a video, measured in one streaming pass with bounded memory.

:func:`measure` decodes nothing itself: it consumes :class:`~spirula.engine.ingest.video.DecodedFrame`
objects one at a time and keeps, per frame, four numbers (decode index, time, sharpness,
motion: 24 bytes). The frames' 32 px thumbnails (a few hundred bytes each, what the
near-duplicate check needs) are written to a file as they come (``thumbs_to``) and read
back only for the frames selection keeps (:class:`ThumbFile`), or, without a file,
appended to one compact buffer. Motion is computed on the fly from a ring of the thumbnails of the last
``MOTION_DT`` seconds. So an hour of video costs a few MB of memory, not a thumbnail
object and a list entry per frame.

Definitions (luma 0..255 on the upright image):

* time: the frame's presentation timestamp in seconds from the first frame
  (:func:`spirula.engine.ingest.video.iter_frames`), never its position in the stream.
* duration: the time until the next frame; the last frame gets the interval before it.
  On variable-frame-rate video a frame stands for a longer or shorter stretch of time.
* sharpness: variance of the 5-point Laplacian of the luma box-downscaled so that its
  longer side is at most ``analysis_size`` (by an integer factor). Blur removes high
  frequencies, so a sharper frame of the same view scores higher; only comparable
  between nearby frames of one video.
* thumbnail: the luma box-downscaled to at most ``THUMB_SIZE`` px on the longer side,
  uint8 (a frame of another size mid-stream is resized to the first one's thumbnail).
* motion[i] = mean |thumb[i] - thumb[j]|, j the last frame at least ``MOTION_DT``
  seconds before frame i (so a gap or a low frame rate compares with the frame before
  it); frames within ``MOTION_DT`` of the start have no such frame and compare with the
  first frame at least ``MOTION_DT`` later (the last frame if none). It does not depend
  on the frame rate. The camera is "moving" at frame i when motion[i] exceeds
  ``STILL_THRESHOLD``.
"""

from __future__ import annotations

import math
import shutil
from array import array
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .video import DecodedFrame, box_reduce

THUMB_SIZE = 32
MOTION_DT = 0.2         # s between the frames compared for motion
STILL_THRESHOLD = 1.5   # mean abs thumbnail difference (0..255) below which the camera is still
THUMBS_FILE = "thumbs.u8"   # beside stats.npz: [N, th, tw] uint8 rows, raw


class ThumbFile:
    """Thumbnails [N, th, tw] uint8 kept in a raw file, rows read on demand.

    Not a memory map on purpose: the pages of a mapped file count toward the process's
    resident memory once touched, and the kernel maps ahead of every touched page (reading
    200 rows spread over an hour's 110 MB file made 105 MB resident). ``thumbs[rows]``
    reads exactly those rows; ``np.asarray(thumbs)`` reads them all.
    """

    dtype = np.dtype(np.uint8)

    def __init__(self, path: Path, n: int, shape: tuple[int, ...]):
        self.path, self.shape = Path(path), (int(n), *(int(s) for s in shape))
        self._row = int(np.prod(shape))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows) -> np.ndarray:
        idx = np.arange(self.shape[0])[rows]
        flat = np.atleast_1d(idx)
        out = np.empty((len(flat), *self.shape[1:]), np.uint8)
        with open(self.path, "rb") as f:
            for k, i in enumerate(flat.tolist()):
                f.seek(i * self._row)
                out[k] = np.frombuffer(f.read(self._row), np.uint8).reshape(self.shape[1:])
        return out[0] if np.ndim(idx) == 0 else out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        a = np.fromfile(self.path, np.uint8, count=int(np.prod(self.shape))).reshape(self.shape)
        return a if dtype is None else a.astype(dtype)


@dataclass
class FrameStats:
    """Per decoded frame (decode order, N frames): index [N] int64 decode index, time [N]
    float64 s, sharpness [N] float32, thumbs [N, th, tw] uint8 (an array, or a
    :class:`ThumbFile` when :func:`measure` wrote them to a file), motion_values [N]
    float32 or None (then :meth:`motion` computes it from the thumbnails)."""

    index: np.ndarray
    time: np.ndarray
    sharpness: np.ndarray
    thumbs: np.ndarray | ThumbFile
    motion_values: np.ndarray | None = None

    def motion(self) -> np.ndarray:
        """[N] float32 motion (module docstring)."""
        if self.motion_values is not None:
            return self.motion_values
        n = len(self.time)
        if n < 2:
            return np.zeros(n, np.float32)
        j = _motion_partner(self.time)
        th = np.asarray(self.thumbs).astype(np.int16)
        return np.abs(th - th[j]).mean(axis=(1, 2)).astype(np.float32)

    def durations(self) -> np.ndarray:
        """[N] float64 s: time to the next frame; the last frame gets the interval before it
        (the local frame rate; 0 for a single frame)."""
        t = np.asarray(self.time, np.float64)
        if len(t) < 2:
            return np.zeros(len(t))
        d = np.diff(t)
        return np.append(d, d[-1])

    def save(self, path: Path) -> None:
        """Write the numbers to ``path`` (.npz) and the thumbnails to ``THUMBS_FILE`` beside
        it, unless they are already that file. The caller makes the folder atomic."""
        path = Path(path)
        target = path.parent / THUMBS_FILE
        with open(path, "wb") as f:
            np.savez_compressed(f, index=self.index, time=self.time, sharpness=self.sharpness,
                                motion=self.motion(), thumb_shape=np.asarray(self.thumbs.shape[1:], np.int64))
        if isinstance(self.thumbs, ThumbFile):
            if self.thumbs.path.resolve() != target.resolve():
                shutil.copyfile(self.thumbs.path, target)
            return
        rows = np.asarray(self.thumbs, np.uint8)
        with open(target, "wb") as f:
            f.write(np.ascontiguousarray(rows).tobytes())

    @classmethod
    def load(cls, path: Path) -> FrameStats:
        """Read what :meth:`save` wrote (the thumbnails as a :class:`ThumbFile`); also reads
        the older single-file layout with the thumbnails inside the .npz."""
        path = Path(path)
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        if "thumbs" in arrays:
            thumbs = arrays["thumbs"]
        else:
            thumbs = ThumbFile(path.parent / THUMBS_FILE, len(arrays["time"]), tuple(arrays["thumb_shape"]))
        return cls(arrays["index"], arrays["time"], arrays["sharpness"], thumbs, arrays.get("motion"))


def _motion_partner(t: np.ndarray) -> np.ndarray:
    """[N] int64: the frame each frame's motion compares with (module docstring)."""
    n = len(t)
    before = np.searchsorted(t, t - MOTION_DT, side="right") - 1
    after = np.minimum(np.searchsorted(t, t + MOTION_DT, side="left"), n - 1)
    return np.where(before >= 0, before, after)


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


def thumbnail(gray: np.ndarray, size: int = THUMB_SIZE) -> np.ndarray:
    """[H, W] float luma -> [h, w] uint8 box-downscaled so the longer side is <= size."""
    k = min(box_factor(gray.shape[1], gray.shape[0], size), min(gray.shape[:2]))
    return np.clip(np.rint(box_reduce(gray, k)), 0, 255).astype(np.uint8)


class _MotionStream:
    """Motion of each frame as frames arrive; ``values`` is filled in by decode position
    (frames near the start are filled once the frame ``MOTION_DT`` later has come)."""

    def __init__(self, values: array):
        self.values = values
        self.ring: deque[tuple[float, np.ndarray]] = deque()   # the partner candidates
        self.waiting: deque[tuple[int, float, np.ndarray]] = deque()   # start frames: (pos, t, thumb)
        self.last: np.ndarray | None = None

    def add(self, pos: int, t: float, thumb: np.ndarray) -> None:
        th = thumb.astype(np.int16)
        while self.waiting and self.waiting[0][1] + MOTION_DT <= t:
            p, _, w = self.waiting.popleft()
            self.values[p] = _diff(w, th)
        while len(self.ring) >= 2 and self.ring[1][0] <= t - MOTION_DT:
            self.ring.popleft()   # a later frame is also far enough back
        self.values.append(0.0)
        if self.ring and self.ring[0][0] <= t - MOTION_DT:
            self.values[pos] = _diff(self.ring[0][1], th)
        else:
            self.waiting.append((pos, t, th))
        self.ring.append((t, th))
        self.last = th

    def finish(self) -> None:
        for p, _, w in self.waiting:  # a clip shorter than MOTION_DT: the last frame
            self.values[p] = _diff(w, self.last)
        self.waiting.clear()


def _diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.float32(np.abs(a - b).mean()))


def measure(frames: Iterable[DecodedFrame], width: int, height: int, analysis_size: int,
            start_s: float = 0.0, end_s: float = 0.0, progress: Callable[[int], None] | None = None,
            thumbs_to: Path | None = None) -> FrameStats:
    """Statistics of the frames of ``frames`` (upright ``width`` x ``height``) with
    ``start_s <= time <= end_s`` (``end_s`` 0: to the end); ``progress(n)`` after each
    decoded frame. Thumbnails go to the file ``thumbs_to`` (the result's thumbs are then
    a :class:`ThumbFile` of it) or to an in-memory buffer. Memory: 24 bytes per frame
    plus the thumbnails of the last ``MOTION_DT`` seconds (and the buffer without a file).
    """
    factor = box_factor(width, height, analysis_size)
    idx, times, sharp, motion = array("q"), array("d"), array("f"), array("f")
    stream = _MotionStream(motion)
    shape: tuple[int, ...] | None = None
    buf = bytearray() if thumbs_to is None else None
    out = open(thumbs_to, "wb") if thumbs_to is not None else None
    try:
        for n, fr in enumerate(frames, 1):
            if progress is not None:
                progress(n)
            if fr.time < start_s:
                continue
            if end_s > 0 and fr.time > end_s:
                break
            g = fr.luma(factor)
            th = thumbnail(g)
            if shape is None:
                shape = th.shape
            elif th.shape != shape:   # the stream changed size: compare like with like
                th = _resize_thumb(th, shape)
            stream.add(len(times), fr.time, th)
            idx.append(fr.index)
            times.append(fr.time)
            sharp.append(laplacian_variance(g))
            (out.write if out is not None else buf.extend)(th.tobytes())
        stream.finish()
    finally:
        if out is not None:
            out.close()
    n = len(times)
    shape = shape or (1, 1)
    if thumbs_to is not None:
        thumbs = ThumbFile(thumbs_to, n, shape)
    else:
        thumbs = np.frombuffer(buf, np.uint8).reshape(n, *shape) if n else np.zeros((0, *shape), np.uint8)
    return FrameStats(np.frombuffer(idx, np.int64).copy(), np.frombuffer(times, np.float64).copy(),
                      np.frombuffer(sharp, np.float32).copy(), thumbs, np.frombuffer(motion, np.float32).copy())


def _resize_thumb(th: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(th).resize((shape[1], shape[0]), Image.BILINEAR), np.uint8)
