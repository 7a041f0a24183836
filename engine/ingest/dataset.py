"""Dataset types shared by every reader: pinhole cameras (after undistortion) and images.

Conventions: OpenCV camera axes (x right, y down, z forward); ``w2c`` is world-to-camera;
pixel centres at integer + 0.5 (pixel (0, 0) covers [0, 1) x [0, 1)); intrinsics in pixels
of the stored (downscaled, cropped) image.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Camera:
    """One registered view, already undistorted to a pinhole camera.

    name: image file name relative to the images folder (used for sorting and the split).
    w2c: [4, 4] float64 world-to-camera rigid transform (OpenCV axes).
    fx, fy, cx, cy: pinhole intrinsics in pixels of ``image`` (after crop and downscale).
    image: [H, W, 3] uint8 RGB, undistorted, cropped to the valid rectangle, downscaled.
    """

    name: str
    image_path: Path
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    w2c: np.ndarray
    image: np.ndarray

    @property
    def c2w(self) -> np.ndarray:
        """[4, 4] float64 camera-to-world."""
        return np.linalg.inv(self.w2c)

    @property
    def center(self) -> np.ndarray:
        """[3] camera centre in world units."""
        r, t = self.w2c[:3, :3], self.w2c[:3, 3]
        return -r.T @ t


@dataclass
class Dataset:
    """Cameras sorted by name, optional SfM points, and what the reader had to skip.

    points: [P, 3] float32 world positions or None (e.g. transforms.json without points).
    colors: [P, 3] uint8 RGB of the points or None.
    warnings: human-readable notes (missing images, unregistered images, ...).
    """

    root: Path
    cameras: list[Camera]
    points: np.ndarray | None = None
    colors: np.ndarray | None = None
    warnings: list[str] = field(default_factory=list)

    def split(self, eval_every: int = 8) -> tuple[list[int], list[int]]:
        """(train, test) camera indices: every ``eval_every``-th camera by sorted name is
        held out (indices 0, k, 2k, ...); ``eval_every`` = 0 holds out none."""
        idx = list(range(len(self.cameras)))
        if eval_every <= 0:
            return idx, []
        test = idx[::eval_every]
        train = [i for i in idx if i % eval_every != 0]
        return train, test

    def scene_extent(self) -> tuple[np.ndarray, float]:
        """(centre [3], radius): centre of the camera centres and 1.1 x the largest
        distance of a camera from it (the 3DGS 'cameras extent' used to scale lrs)."""
        centers = np.stack([c.center for c in self.cameras])
        mid = centers.mean(axis=0)
        radius = float(np.linalg.norm(centers - mid, axis=1).max()) * 1.1
        return mid, max(radius, 1e-6)
