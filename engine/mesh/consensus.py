"""Multi-view support of mesh components: sheets that the views do not agree on go.

With few views of a scene (book: 7 photos) the depth of a textureless support (a table) is
a little wrong in each view, and more so at grazing angles; the fusion keeps what some
views put within the band, so sheets of table stand up from it (walls of faces up to 2.9
units over the table; the book on it is 1.8 high). Each sheet comes from one or two
views' depth. A real object's surface sits where most views that see it put it: on the
book, 58% of the area lies within half the fusion band of at least 3 views' depth maps;
on the seven standing sheets 1% to 22% (the TSDF's own cell check, at least 2 views in
the band, keeps both). So a component whose share of such area is small goes.

The check samples at most ``sample`` faces of a component (time: the views times the
samples, not the faces), projects their centroids into every view and compares with that
view's fused depth map (the median depth of the splats, where their opacity is at least
the fusion's ``alpha_min``).
"""

from __future__ import annotations

import numpy as np

from .clean import compact, face_components


def agreeing_views(points: np.ndarray, c2w: np.ndarray, intrinsics: np.ndarray, depth_of, tol: float,
                   alpha_min: float = 0.5) -> np.ndarray:
    """[P] int: for each point [P, 3] (world), the views whose depth map puts a surface
    within ``tol`` (world units, along the view's z) of it at its pixel. c2w [N, 4, 4]
    (OpenCV axes), intrinsics [N, 6] (fx, fy, cx, cy, width, height), depth_of(i) ->
    (depth [H, W] camera z, alpha [H, W]); pixels under ``alpha_min`` hold no surface."""
    points = np.asarray(points, np.float64)
    count = np.zeros(len(points), np.int64)
    for i in range(len(c2w)):
        r, t = c2w[i][:3, :3], c2w[i][:3, 3]
        pc = (points - t) @ r                      # world -> camera: R^T (p - t)
        fx, fy, cx, cy, w, h = intrinsics[i]
        z = np.where(pc[:, 2] > 1e-9, pc[:, 2], np.inf)
        px = np.floor(fx * pc[:, 0] / z + cx).astype(np.int64)
        py = np.floor(fy * pc[:, 1] / z + cy).astype(np.int64)
        ok = np.isfinite(z) & (px >= 0) & (py >= 0) & (px < int(w)) & (py < int(h))
        depth, alpha = depth_of(i)
        d = np.asarray(depth)[py[ok], px[ok]]
        a = np.asarray(alpha)[py[ok], px[ok]]
        count[np.flatnonzero(ok)] += (np.abs(d - z[ok]) <= tol) & (a >= alpha_min)
    return count


def drop_unsupported(verts: np.ndarray, faces: np.ndarray, agree, min_views: int = 3, min_share: float = 0.35,
                     skip: np.ndarray | None = None, sample: int = 4096,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """Drop the components with under ``min_share`` of their area (judged on at most
    ``sample`` random faces each) agreed by at least ``min_views`` views: agree(points [P, 3])
    -> [P] int (e.g. :func:`agreeing_views`). skip [F] bool: faces not judged (a re-meshed
    support, whose flat sheet no view's depth need match): never dropped, so a sheet joined
    to them loses only its judged faces. The best-supported component always stays.
    Returns (verts, faces, components dropped)."""
    if len(faces) == 0:
        return verts, faces, 0
    labels = face_components(faces, len(verts))
    judged = np.ones(len(faces), bool) if skip is None else ~np.asarray(skip, bool)
    rng = np.random.default_rng(seed)
    order = np.argsort(labels[judged], kind="stable")
    ids = np.flatnonzero(judged)[order]
    if len(ids) == 0:  # every face is skipped (all of the mesh is the re-meshed support): nothing to judge
        return verts, faces, 0
    comps, starts = np.unique(labels[ids], return_index=True)
    picks = [rng.choice(part, min(sample, len(part)), replace=False) for part in np.split(ids, starts[1:])]
    if not picks:
        return verts, faces, 0
    pick = np.concatenate(picks)
    tri = verts[faces[pick]]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    ok = agree(tri.mean(1)) >= min_views
    which = np.searchsorted(comps, labels[pick])
    share = (np.bincount(which, area * ok, len(comps)) / np.maximum(np.bincount(which, area, len(comps)), 1e-30))
    bad = share < min_share
    bad[np.argmax(share)] = False
    if not bad.any():
        return verts, faces, 0
    drop = np.zeros(int(labels.max()) + 1, bool)
    drop[comps[bad]] = True
    return (*compact(verts, faces[~(drop[labels] & judged)]), int(bad.sum()))
