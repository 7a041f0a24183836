"""The scene scale of a training run, and the camera sets it cannot be taken from.

3DGS multiplies the means' learning rate and the densification thresholds (clone/split
size, pruning size) by the 'cameras extent': 1.1 x the largest distance of a camera
centre from their centroid (:meth:`spirula.engine.ingest.dataset.Dataset.scene_extent`). That
number is meaningless when the cameras do not spread out: a single camera, or every
camera at one point (a tripod pan, a rotation-only capture, a synthetic set with the
same pose repeated). Its floor of 1e-6 would then freeze the means, split everything and
prune everything, silently. Here such sets either get their scale from the 3D points
(1.1 x the median distance of the points from the cameras, with a warning saying so)
or, without points, are refused with the reason.

One camera with a gross pose error (far from all the others) would inflate the extent by
as much as it is off, hundreds of times in practice: such far outliers
(:func:`spirula.engine.ingest.dataset.camera_outliers`) are left out of the extent and named in a
warning (their images still train).
"""

from __future__ import annotations

import numpy as np

from ..errors import DatasetError
from ..ingest.dataset import Dataset, camera_extent, camera_outliers

# cameras spread over less than this fraction of the scene depth count as one point
MIN_SPREAD = 1e-3


def training_extent(dataset: Dataset) -> tuple[float, list[str]]:
    """(extent, warnings): the scene scale to train with, and notes on how it was
    chosen when the camera set is degenerate. DatasetError when there is none."""
    cams = dataset.cameras
    where = str(dataset.root)
    if not cams:
        raise DatasetError(f"{where}: no cameras")
    poses = np.stack([np.asarray(c.w2c, np.float64) for c in cams])
    bad = [c.name for c, p in zip(cams, poses) if not np.isfinite(p).all()]
    if bad:
        raise DatasetError(f"{where}: non-finite camera pose (NaN/Inf) for {_names(bad)}")
    centers = np.stack([c.center for c in cams])
    far, dist, typical = camera_outliers(centers)
    notes = [_outlier_note(cams, far, dist, typical, centers)] if far.any() else []
    centers = centers[~far]
    spread = float(np.linalg.norm(centers - centers.mean(axis=0), axis=1).max())
    depth = _points_depth(dataset, centers)
    n = len(cams)
    if n == 1:
        why = f"a single camera ({cams[0].name})"
    elif depth is not None and spread <= MIN_SPREAD * depth:
        why = (f"all {n} cameras lie within {spread:.3g} of their centroid, {spread / depth:.1e} of the scene "
               "depth (a rotation-only capture?)")
    elif spread <= 1e-9 * max(1.0, float(np.abs(centers).max())):
        why = f"all {n} cameras are at one point"
    else:
        _, extent = dataset.scene_extent()
        return extent, notes
    if depth is None:
        raise DatasetError(f"{where}: {why} and no 3D points: the scene scale (which sets the learning rate "
                           "of the positions and the densification sizes) cannot be known. Use several camera "
                           "positions, or a dataset with SfM points")
    if depth <= 0.0:
        raise DatasetError(f"{where}: {why} and the 3D points coincide with the cameras: no scene scale")
    extent = 1.1 * depth
    return extent, notes + [f"{why}: the scene scale comes from the 3D points instead (1.1 x their median distance "
                    f"from the cameras = {extent:.4g} world units)"]


def _outlier_note(cams, far: np.ndarray, dist: np.ndarray, typical: float, centers: np.ndarray) -> str:
    """The warning naming the far outlier cameras, their distances and the extent kept."""
    idx = np.flatnonzero(far)
    idx = idx[np.argsort(-dist[idx])]
    listed = ", ".join(f"{cams[i].name} ({dist[i]:.4g}, {dist[i] / typical:.0f}x)" for i in idx[:5])
    more = f" and {len(idx) - 5} more" if len(idx) > 5 else ""
    _, kept = camera_extent(centers)
    with_all = 1.1 * float(np.linalg.norm(centers - centers.mean(axis=0), axis=1).max())
    return (f"{len(idx)} camera{'s' if len(idx) > 1 else ''} far from all the others (distance from the cameras' "
            f"median centre, vs {typical:.4g} for a typical camera): {listed}{more}. A wrong pose? The scene scale "
            f"leaves {'them' if len(idx) > 1 else 'it'} out ({kept:.4g} instead of {with_all:.4g} world units); "
            "the images still train. Check or remove these images' poses")


def _points_depth(dataset: Dataset, centers: np.ndarray) -> float | None:
    """Median distance of the finite 3D points from the cameras' centroid, or None."""
    pts = dataset.points
    if pts is None or len(pts) == 0:
        return None
    pts = np.asarray(pts, np.float64)
    pts = pts[np.isfinite(pts).all(axis=1)]
    if not len(pts):
        return None
    return float(np.median(np.linalg.norm(pts - centers.mean(axis=0), axis=1)))


def _names(names: list[str], limit: int = 5) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
