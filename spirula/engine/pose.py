"""Rigid camera poses (OpenCV camera axes: x right, y down, z forward)."""

from __future__ import annotations

import numpy as np


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """[4, 4] float64 world-to-camera of a camera at ``eye`` [3] looking at ``target`` [3],
    with the world direction ``up`` [3] pointing up in the image (towards -y). When ``up``
    is parallel to the viewing direction, the world x axis decides the image's right."""
    eye, target, up = (np.asarray(v, np.float64) for v in (eye, target, up))
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    if np.linalg.norm(x) < 1e-9:
        x = np.cross(z, [1.0, 0.0, 0.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    w2c = np.eye(4)
    w2c[:3, :3] = np.stack([x, y, z])
    w2c[:3, 3] = -w2c[:3, :3] @ eye
    return w2c


def invert_rigid(m: np.ndarray) -> np.ndarray:
    """Inverse of a [4, 4] rigid transform (w2c <-> c2w) without a general matrix inverse."""
    out = np.eye(4)
    r = np.asarray(m, np.float64)[:3, :3]
    out[:3, :3] = r.T
    out[:3, 3] = -r.T @ np.asarray(m, np.float64)[:3, 3]
    return out
