"""What the viewport frames and picks (the window's F / Shift+F and its zoom and orbit to the
point under the cursor): the subject's box, the whole scene's box and a sample of the scene's
points, from the points a scene has (SfM points, splat means, mesh vertices) and where its
cameras look. Pure NumPy; sent with SceneLoaded.

Boxes are world axis-aligned, (xmin, ymin, zmin, xmax, ymax, zmax); () when there is nothing
to frame. The subject box: the 5th..95th percentiles per axis of the points within ``radius``
of ``center`` (where the cameras look: spirula/engine/splat/init.py look_point), so the floaters and a
far background do not widen it; with fewer than MIN_POINTS such points, ``center`` +-
SUBJECT_FRACTION x ``radius``. The scene box: the 1st..99th percentiles of all the points,
grown to hold the camera centres. The pick sample: at most PICK_POINTS of the points (a
seeded, fixed draw), float32."""

from __future__ import annotations

import numpy as np

MIN_POINTS = 20
SUBJECT_FRACTION = 0.5
PICK_POINTS = 4096


def _box(lo, hi) -> tuple:
    return tuple(float(x) for x in (*lo, *hi))


def view_boxes(points, center, radius: float, camera_centers=None) -> tuple[tuple, tuple]:
    """(subject box, scene box) of ``points`` [N, 3] world (or None), ``center`` [3] and
    ``radius`` (world units), ``camera_centers`` [V, 3] (or None); see the module docstring."""
    center = np.asarray(center, np.float64)
    radius = max(float(radius), 1e-6)
    p = np.zeros((0, 3)) if points is None else np.asarray(points, np.float64).reshape(-1, 3)
    p = p[np.isfinite(p).all(1)]
    near = p[np.linalg.norm(p - center, axis=1) <= radius] if len(p) else p
    if len(near) >= MIN_POINTS:
        subject = _box(np.percentile(near, 5, axis=0), np.percentile(near, 95, axis=0))
    else:
        subject = _box(center - SUBJECT_FRACTION * radius, center + SUBJECT_FRACTION * radius)
    parts = [np.asarray(subject).reshape(2, 3)]
    if len(p) >= MIN_POINTS:
        parts.append(np.stack([np.percentile(p, 1, axis=0), np.percentile(p, 99, axis=0)]))
    if camera_centers is not None and len(camera_centers):
        parts.append(np.asarray(camera_centers, np.float64).reshape(-1, 3))
    allp = np.concatenate(parts)
    return subject, _box(allp.min(0), allp.max(0))


def pick_sample(points, n: int = PICK_POINTS) -> tuple:
    """At most ``n`` of ``points`` [N, 3] (a seeded draw without replacement), flattened to a
    tuple of floats (x0, y0, z0, x1, ...); () for none."""
    if points is None:
        return ()
    p = np.asarray(points, np.float32).reshape(-1, 3)
    p = p[np.isfinite(p).all(1)]
    if len(p) > n:
        p = p[np.sort(np.random.default_rng(0).choice(len(p), n, replace=False))]
    return tuple(float(x) for x in p.reshape(-1))


def framing(points, center, radius: float, camera_centers=None) -> dict:
    """SceneLoaded's ``subject``, ``extent`` and ``pick_points`` fields (keyword arguments)."""
    subject, extent = view_boxes(points, center, radius, camera_centers)
    return {"subject": subject, "extent": extent, "pick_points": pick_sample(points)}


def camera_centers(cameras) -> np.ndarray | None:
    """[V, 3] centres of dataset cameras (engine Camera: ``center``), or None."""
    return np.stack([np.asarray(c.center, np.float64) for c in cameras]) if cameras else None
