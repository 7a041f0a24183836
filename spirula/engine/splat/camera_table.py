"""All cameras of a dataset in one GPU table, so a training step selects a view by index
without uploading anything. Layout (32 float32 per camera) matches ``load_cam`` in
shaders/common/gaussian.slang: R (row-major, world-to-camera), t, fx, fy, cx, cy, width,
height, camera centre (world), padding."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TILE = 16  # tile edge in pixels, as in shaders/raster/raster.slang

CAM_FLOATS = 32


def camera_row(w2c: np.ndarray, fx: float, fy: float, cx: float, cy: float, width: int, height: int) -> np.ndarray:
    """[32] float32 record of one pinhole camera; ``w2c`` is [4, 4] (OpenCV axes)."""
    w2c = np.asarray(w2c, np.float64)
    r, t = w2c[:3, :3], w2c[:3, 3]
    row = np.zeros(CAM_FLOATS, np.float32)
    row[0:9] = r.reshape(-1)
    row[9:12] = t
    row[12:16] = (fx, fy, cx, cy)
    row[16:18] = (width, height)
    row[18:21] = -r.T @ t
    return row


def camera_table(cameras) -> np.ndarray:
    """[C, 32] float32 for a list of :class:`spirula.engine.ingest.dataset.Camera`."""
    return np.stack([camera_row(c.w2c, c.fx, c.fy, c.cx, c.cy, c.width, c.height) for c in cameras])


@dataclass
class View:
    """The view being rendered: a row of the camera table and the image size in pixels."""

    cam_index: int
    width: int
    height: int

    @property
    def tiles_x(self) -> int:
        return (self.width + TILE - 1) // TILE

    @property
    def tiles_y(self) -> int:
        return (self.height + TILE - 1) // TILE
