"""Initial Gaussians: from SfM points, or random inside camera-derived bounds."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ..ingest.dataset import Dataset
from .layout import SH_C0, pack


def scene_bounds(dataset: Dataset) -> tuple[np.ndarray, float]:
    """(centre [3], half size) of the region the cameras look at: the least-squares point
    closest to all optical axes (when the axes are near parallel: the point ahead of the
    camera centroid along the mean axis by the cameras' spread) and half the median camera
    distance to it."""
    centers = np.stack([c.center for c in dataset.cameras])
    dirs = np.stack([c.w2c[2, :3] for c in dataset.cameras])  # optical axis (camera +z) in world
    a = np.zeros((3, 3))
    b = np.zeros(3)
    for o, d in zip(centers, dirs):  # per camera (a few hundred at most), not per Gaussian
        p = np.eye(3) - np.outer(d, d)
        a += p
        b += p @ o
    if np.linalg.cond(a) < 1e6:
        mid = np.linalg.solve(a, b)
    else:  # axes (nearly) parallel, e.g. a sideways sweep: look ahead of the cameras by their spread
        spread = float(np.linalg.norm(centers - centers.mean(axis=0), axis=1).max())
        axis = dirs.mean(axis=0)
        norm = float(np.linalg.norm(axis))
        mid = centers.mean(axis=0) + (axis / norm * spread if norm > 1e-6 else 0.0)
    dist = np.linalg.norm(centers - mid, axis=1)
    return mid, float(np.median(dist)) * 0.5


def initial_points(dataset: Dataset, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(points [P,3] float32, colors [P,3] uint8): the dataset's SfM points, or ``count``
    uniform random points in the cube of :func:`scene_bounds` with random colours."""
    if dataset.points is not None and len(dataset.points) > 0:
        colors = dataset.colors if dataset.colors is not None else np.full((len(dataset.points), 3), 128, np.uint8)
        return dataset.points.astype(np.float32), colors.astype(np.uint8)
    mid, half = scene_bounds(dataset)
    pts = mid + rng.uniform(-half, half, (count, 3))
    return pts.astype(np.float32), rng.integers(0, 256, (count, 3), dtype=np.uint8)


def gaussians_from_points(points: np.ndarray, colors: np.ndarray, max_sh_degree: int,
                          init_opacity: float = 0.1) -> np.ndarray:
    """Packed rows [P, D]: isotropic Gaussians with scale = mean distance to the 3 nearest
    neighbours (as in 3DGS), identity rotation, opacity ``init_opacity``, DC colour."""
    pts = np.asarray(points, np.float64)
    k = min(4, len(pts))
    dist, _ = cKDTree(pts).query(pts, k=k)
    d = dist[:, 1:].mean(axis=1) if k > 1 else np.ones(len(pts))
    d = np.maximum(d, 1e-7)
    n = len(pts)
    scales = np.repeat(np.log(d)[:, None], 3, axis=1)
    quats = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    logits = np.full(n, np.log(init_opacity / (1 - init_opacity)))
    sh0 = (colors.astype(np.float64) / 255.0 - 0.5) / SH_C0
    return pack(pts, scales, quats, logits, sh0, None, max_sh_degree)
