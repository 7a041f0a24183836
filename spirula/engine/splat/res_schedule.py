"""Coarse-to-fine training resolution: the first steps see the training images at 1/2^k of
their size, so they cost a fraction of a full-resolution step while the model only holds
low frequencies anyway (DashGaussian, Chen et al., CVPR 2025, sec. 4.1: the resolution
rises as the model's frequency content grows; here a fixed schedule of power-of-two levels).

Level k renders a camera at ``round(W / 2^k) x round(H / 2^k)`` pixels with its intrinsics
scaled by the same per-axis ratio (pixel centres at x + 0.5, so fx, cx scale alike), and
compares with the training image box-averaged to that size (Pillow LANCZOS with reduce,
spirula/engine/ingest/images.py resize). Evaluation and export always use the full size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ingest.images import resize
from .camera_table import camera_row


@dataclass(frozen=True)
class ResolutionSchedule:
    """``levels`` power-of-two levels (1 = always full size); level ``levels - 1`` first,
    one level less every ``until * steps / (levels - 1)`` steps, full size from
    ``until * steps`` on. ``until`` in (0, 1]."""

    levels: int
    until: float
    steps: int

    def __post_init__(self):
        if self.levels < 1:
            raise ValueError(f"resolution levels must be >= 1, not {self.levels}")
        if not 0.0 < self.until <= 1.0:
            raise ValueError(f"the full resolution must start inside the run (0 < until <= 1), not {self.until}")

    @property
    def active(self) -> bool:
        return self.levels > 1

    def level_at(self, step: int) -> int:
        """Downscale level (the image is 1/2^level of its size) of step ``step`` (from 0)."""
        if self.levels <= 1:
            return 0
        span = self.until * max(self.steps, 1) / (self.levels - 1)
        return max(0, self.levels - 1 - int(step // max(span, 1e-9)))


def level_size(width: int, height: int, level: int) -> tuple[int, int]:
    """Image size at ``level``: [W, H] / 2^level, rounded, at least 1 pixel."""
    f = 2 ** level
    return max(1, round(width / f)), max(1, round(height / f))


def level_camera_table(cameras, level: int) -> np.ndarray:
    """[C, 32] float32 camera table (spirula/engine/splat/camera_table.py) of ``cameras`` at
    ``level``: fx, cx scaled by W'/W, fy, cy by H'/H, the size W' x H'."""
    rows = []
    for c in cameras:
        w, h = level_size(c.width, c.height, level)
        sx, sy = w / c.width, h / c.height
        rows.append(camera_row(c.w2c, c.fx * sx, c.fy * sy, c.cx * sx, c.cy * sy, w, h))
    return np.stack(rows)


def level_image(image: np.ndarray, level: int) -> np.ndarray:
    """[H, W, 3] uint8 -> [H', W', 3] uint8 at ``level`` (:func:`level_size`)."""
    w, h = level_size(image.shape[1], image.shape[0], level)
    return resize(image, w, h)
