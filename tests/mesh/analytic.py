"""Analytic test inputs for the mesh stage: cameras on a sphere looking at the origin and
exact depth maps of a sphere (ray-sphere intersection), NumPy only."""

from __future__ import annotations

import numpy as np

from spirula.engine.splat.camera_table import camera_row
from tests.splat.scenes import look_at_w2c


def orbit_cameras(count: int, dist: float, size: int, focal: float, seed_offset: float = 0.5):
    """``count`` pinhole cameras (w2c [4,4], fx, fy, cx, cy, W, H) on a Fibonacci sphere of
    radius ``dist`` looking at the origin (OpenCV axes)."""
    k = np.arange(count) + seed_offset
    z = 1 - 2 * k / count
    phi = k * np.pi * (3 - np.sqrt(5))
    r = np.sqrt(1 - z * z)
    eyes = dist * np.stack([r * np.cos(phi), r * np.sin(phi), z], 1)
    cams = []
    for e in eyes:
        up = (0.0, 0.0, 1.0) if abs(e[2]) < 0.9 * dist else (0.0, 1.0, 0.0)
        cams.append((look_at_w2c(e, (0.0, 0.0, 0.0), up), focal, focal, size / 2, size / 2, size, size))
    return cams


def pixel_rays(w2c, fx, fy, cx, cy, w, h):
    """(centre [3], rays [H, W, 3]) world rays through pixel centres with camera z = 1."""
    u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    rc = np.stack([(u - cx) / fx, (v - cy) / fy, np.ones_like(u)], -1)
    r = w2c[:3, :3]
    return -r.T @ w2c[:3, 3], rc @ r  # rc @ R = (R^T rc^T)^T


def sphere_depth(cam, centre=(0.0, 0.0, 0.0), radius: float = 1.0):
    """(depth [H, W] float32 camera z of the first hit, alpha [H, W] float32 1 on hits)."""
    o, rays = pixel_rays(*cam)
    oc = o - np.asarray(centre)
    a = (rays * rays).sum(-1)
    b = 2 * (rays @ oc)
    c = oc @ oc - radius * radius
    disc = b * b - 4 * a * c
    hit = disc > 0
    t = np.where(hit, (-b - np.sqrt(np.maximum(disc, 0))) / (2 * a), 0.0)
    hit &= t > 0
    return np.where(hit, t, 0).astype(np.float32), hit.astype(np.float32)


def table(cams) -> np.ndarray:
    return np.stack([camera_row(*c) for c in cams])
