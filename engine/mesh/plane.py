"""Support planes for the mesh's bounds (engine/mesh/subject.py): the :class:`Plane`, a
RANSAC fit with Hough seeds (:func:`fit_plane`), the plane under a subject whose support
holds no splats (:func:`base_plane`) and the support of a capture that is no orbit
(:func:`scene_plane`). All NumPy, vectorised; world units."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .grid import opaque_cut, splat_bounds

@dataclass(frozen=True)
class Plane:
    """Oriented plane n.x + offset = 0; ``normal`` [3] unit, pointing to the cameras' side.
    inliers: support points within the RANSAC tolerance; thickness: 2.5 x the RMS distance
    of those inliers to the refined plane (world units), how thick the table's splats lie.
    source: "table" (fitted to the support's splats), "base" (no support surface in the
    splats: the plane under the subject's lowest splats, normal to the orbit's axis) or
    "scene" (the dominant plane of a capture that is no orbit, every camera on its front
    side: :func:`scene_plane`)."""

    normal: np.ndarray
    offset: float
    inliers: int = 0
    thickness: float = 0.0
    source: str = "table"

    def distance(self, points: np.ndarray) -> np.ndarray:
        """[N] signed distance of world points [N, 3] (positive above)."""
        return np.asarray(points, np.float64) @ self.normal + self.offset

    def to_json(self) -> dict:
        return {"normal": [float(v) for v in self.normal], "offset": float(self.offset),
                "inliers": int(self.inliers), "thickness": float(self.thickness), "source": self.source}



def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-300)


def perpendicular_basis(normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors e1, e2 [3] with (e1, e2, normal) an orthonormal right-handed frame
    (``normal`` [3] unit): coordinates on a plane, azimuths about an axis."""
    n = np.asarray(normal, np.float64)
    e1 = _unit(np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0]))
    return e1, np.cross(n, e1)



def fit_plane(points: np.ndarray, tol: float, rng: np.random.Generator, hypotheses: int = 512,
              up: np.ndarray | None = None, max_tilt_deg: float = 35.0, above: np.ndarray | None = None,
              above_share: float = 0.95, min_inliers: int = 30,
              all_above: np.ndarray | None = None, column: np.ndarray | None = None,
              below_share: float = 0.05, off_column: np.ndarray | None = None, around_share: float = 0.5,
              accept=None, tries: int = 8, draw: np.ndarray | None = None, seed_normals: np.ndarray | None = None,
              peaks: int = 6, upright_tie: float | None = None, body: np.ndarray | None = None,
              body_depth: float = np.inf) -> tuple[Plane, np.ndarray] | None:
    """RANSAC plane on points [M, 3] with inlier tolerance ``tol`` (world units): (plane,
    inlier mask [M]) or None when no admissible hypothesis has ``min_inliers`` inliers.

    All ``hypotheses`` triples are scored at once. With ``up`` [3]: only planes whose normal
    is within ``max_tilt_deg`` of it count, oriented to it. With ``above`` [K, 3]: only planes
    with at least ``above_share`` of those points on the upper side count (the cameras and
    the look point stand above a table); with ``all_above`` [J, 3]: only planes with all of
    those above (the look point: not the flat top of the object itself); with ``column``
    [K, 3]: only planes with at most ``below_share`` of those points more than ``tol`` under
    them (the splats over and under the look point: a chair's seat, its legs under it, is
    no support); with ``off_column`` [M] bool (the points off that column): only planes with
    at least ``around_share`` of their inliers there (a table shows around what stands on
    it; a plane along the subject's rim or its base's legs does not). The winner is refined by least squares (SVD) on its inliers, then on the
    inliers of the refined plane (``min_inliers`` holds when the hypothesis or the refined plane
    has that many: a hypothesis drawn a little off the table gathers its inliers there); with ``accept`` ((Plane, its inliers [I, 3]) -> bool), the first of the ``tries``
    best hypotheses whose refined plane it accepts wins (the refinement can tilt a plane
    into the subject: on the mouse capture the best of 4096 did). ``draw`` [M] bool: the
    points the triples are drawn from (default all). ``seed_normals`` [S, 3]: more
    hypotheses besides the triples, a Hough vote: for each of these normals, the planes at
    the ``peaks`` most populated slices (``tol`` thick) of the points' heights along it.
    ``upright_tie`` (with ``up``): hypotheses with at least this share of the best count are
    tried first, the least tilted from ``up`` first (the mouse capture's table: 168 inliers at
    3 degrees from the orbit's axis, against 176 for a plane 22 degrees off through the table's
    far edge and the mouse's rim). ``body`` [B, 3] (with ``body_depth``): only planes with at
    most ``below_share`` of those points between 2 ``tol`` and ``body_depth`` under them (a
    plane that slices through the subject has its far parts under it)."""
    pts = np.asarray(points, np.float64)
    if len(pts) < 3:
        return None
    pool = pts if draw is None or np.count_nonzero(draw) < 3 else pts[np.asarray(draw, bool)]
    tri = pool[rng.integers(0, len(pool), (hypotheses, 3))]               # [H, 3, 3]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    good = np.linalg.norm(n, axis=1) > 1e-12
    n = _unit(n)
    anchor = tri[:, 0]
    if seed_normals is not None and len(seed_normals):
        sn, sp = _hough_seeds(pts, _unit(np.asarray(seed_normals, np.float64).reshape(-1, 3)), tol, peaks)
        n, anchor = np.concatenate([n, sn]), np.concatenate([anchor, sp])
        good = np.concatenate([good, np.ones(len(sn), bool)])
    if up is not None:
        up = _unit(np.asarray(up, np.float64))
        s = np.sign(n @ up)
        n = n * np.where(s == 0, 1.0, s)[:, None]
        good &= n @ up >= np.cos(np.radians(max_tilt_deg))
    off = -(n * anchor).sum(1)
    if above is not None:
        good &= ((np.asarray(above, np.float64) @ n.T + off) > 0).mean(0) >= above_share
    if all_above is not None:
        good &= ((np.asarray(all_above, np.float64).reshape(-1, 3) @ n.T + off) > 0).all(0)
    if column is not None and len(column):
        col = np.asarray(column, np.float64)
        for s in range(0, len(n), 64):  # [K, 64] blocks
            good[s:s + 64] &= ((col @ n[s:s + 64].T + off[s:s + 64]) < -tol).mean(0) <= below_share
    if body is not None and len(body):
        bod = np.asarray(body, np.float64)
        for s in range(0, len(n), 64):  # [K, 64] blocks
            d = bod @ n[s:s + 64].T + off[s:s + 64]
            good[s:s + 64] &= ((d < -2 * tol) & (d > -body_depth)).mean(0) <= below_share
    if not good.any():
        return None
    n, off = n[good], off[good]
    counts = np.zeros(len(n), np.int64)
    for s in range(0, len(n), 64):  # [64, M] distance blocks keep the memory small
        near = np.abs(pts @ n[s:s + 64].T + off[s:s + 64]) < tol
        counts[s:s + 64] = near.sum(0)
        if off_column is not None:   # too few inliers around: no candidate
            counts[s:s + 64] *= near[np.asarray(off_column, bool)].sum(0) >= around_share * counts[s:s + 64]
    order = np.argsort(-counts, kind="stable")
    if upright_tie is not None and up is not None and len(order):
        tied = order[counts[order] >= upright_tie * counts[order[0]]]
        tied = tied[np.argsort(-(n[tied] @ up), kind="stable")]   # the least tilted first
        order = np.concatenate([tied, order[counts[order] < upright_tie * counts[order[0]]]])
    for best in order[:tries if accept is not None else 1]:
        if counts[best] < 3:
            return None
        normal, offset = n[best], off[best]
        for _ in range(2):
            inl = np.abs(pts @ normal + offset) < tol
            if inl.sum() < 3:
                break
            c = pts[inl].mean(0)
            refined = np.linalg.svd(pts[inl] - c, full_matrices=False)[2][2]
            normal = refined * (1.0 if refined @ normal >= 0 else -1.0)
            offset = -float(normal @ c)
        inl = np.abs(pts @ normal + offset) < tol
        rms = float(np.sqrt(np.mean((pts[inl] @ normal + offset) ** 2))) if inl.any() else 0.0
        plane = Plane(normal, float(offset), int(inl.sum()), 2.5 * rms)
        # enough inliers before or after the refinement: a hypothesis drawn a little off the
        # table gathers its inliers there, and a floor's refined plane can hold fewer than the
        # triple's slab (the chair video's floor: the hypothesis over 1,000, refined 822)
        if max(int(counts[best]), int(inl.sum())) >= min_inliers and (accept is None or accept(plane, pts[inl])):
            return plane, inl
    return None


def _hough_seeds(pts: np.ndarray, normals: np.ndarray, tol: float, peaks: int) -> tuple[np.ndarray, np.ndarray]:
    """(normals [H, 3], a point on each plane [H, 3]): for each normal [S, 3], the planes
    through the centres of the ``peaks`` fullest slices of width ``tol`` of pts [M, 3] along it.
    Why: a floor that holds a few percent of the opaque splats (most of them translucent
    or on the subject) is drawn by a random triple of splats too rarely; the heights along
    the orbit's axis pile up on it whatever its share."""
    out_n, out_p = [], []
    for nrm in normals:
        h = pts @ nrm
        edges = np.arange(h.min(), h.max() + tol, tol)
        if len(edges) < 2:
            continue
        hist = np.histogram(h, edges)[0]
        top = np.argsort(-hist, kind="stable")[:peaks]
        top = top[hist[top] > 0]
        centre = 0.5 * (edges[top] + edges[top + 1])
        out_n.append(np.repeat(nrm[None], len(top), 0))
        out_p.append(centre[:, None] * nrm[None])
    if not out_n:
        return np.zeros((0, 3)), np.zeros((0, 3))
    return np.concatenate(out_n), np.concatenate(out_p)


def _cone(axis: np.ndarray, tilts_deg=(0.0, 3.0, 6.0, 10.0, 15.0), azimuths: int = 8) -> np.ndarray:
    """[1 + (len(tilts)-1) x azimuths, 3] unit directions around ``axis`` at those tilts."""
    axis = _unit(np.asarray(axis, np.float64))
    e1, e2 = perpendicular_basis(axis)
    out = [axis]
    for t in np.radians([t for t in tilts_deg if t > 0]):
        az = np.linspace(0, 2 * np.pi, azimuths, endpoint=False)
        out.append(np.cos(t) * axis + np.sin(t) * (np.cos(az)[:, None] * e1 + np.sin(az)[:, None] * e2))
    return np.vstack(out)


def base_plane(heights: np.ndarray, up: np.ndarray, above_heights: np.ndarray, quantile: float = 0.0025,
               above_share: float = 0.95, min_points: int = 50) -> Plane | None:
    """The plane n = ``up`` at the ``quantile`` of the subject's splat heights [M] (heights
    along up, world units) -- a low quantile, not the minimum, so a few stray splats under
    the table do not lower it -- or None when fewer than ``min_points`` heights are given
    or fewer than ``above_share`` of ``above_heights`` [K] (cameras, look point) lie above
    it: an object seen from below as well (the torus in empty space) has no support."""
    h = np.asarray(heights, np.float64)
    if len(h) < min_points:
        return None
    base = float(np.quantile(h, quantile))
    if (np.asarray(above_heights, np.float64) > base).mean() < above_share:
        return None
    return Plane(_unit(np.asarray(up, np.float64)), -base, 0, 0.0, "base")


def scene_plane(c2w: np.ndarray, means: np.ndarray, opacity_logits: np.ndarray, seed: int = 0,
                min_opacity: float = 0.2, tol_share: float = 0.02, min_share: float = 0.3,
                max_tilt_deg: float = 75.0, hypotheses: int = 2048) -> Plane | None:
    """The support of a capture that is no orbit (photos of a book on a table from one side,
    a walk over a floor), or None: the RANSAC plane (:func:`fit_plane`, tolerance
    ``tol_share`` x the diagonal of the opaque splats' bounds) that holds at least
    ``min_share`` of the opaque splat centres, with every camera on its front side and its
    normal within ``max_tilt_deg`` of the cameras' mean backward direction (the up of a
    top-down capture is far from the images' up), then fitted again to its inliers at a
    quarter of the tolerance (a book on the table lies within the first and would lift it).
    source "scene"; thickness: 2.5 x the RMS distance of the first inliers under it (its own
    spread: what stands on it lies over it).

    Why: few views of fuzzy splats (7 photos; a table of splats 0.4-1.6 units wide on the
    book capture) give depth maps that disagree by several truncation bands, and the fused
    table comes out as a slab of torn sheets 1-2 units thick, a quarter of its area under
    the table's splats. Nothing behind a surface that every camera sees from its front was
    observed (what lies there came from a view's depth sliding through it), and the
    sheets in its layer are that surface (engine/mesh/repair.py ``flatten``)."""
    c2w = np.asarray(c2w, np.float64)
    means = np.asarray(means, np.float64)
    opaque = 1.0 / (1.0 + np.exp(-np.asarray(opacity_logits, np.float64))) > opaque_cut(opacity_logits, min_opacity)
    pts = means[opaque]
    if len(pts) < 30:
        return None
    lo, hi = splat_bounds(means, opacity_logits, min_opacity)
    rng = np.random.default_rng(seed)
    sample = pts[rng.choice(len(pts), min(len(pts), 20000), replace=False)]
    back = _unit(-c2w[:, :3, 2].mean(0))
    found = fit_plane(sample, tol_share * float(np.linalg.norm(hi - lo)), rng, hypotheses=hypotheses, up=back,
                      max_tilt_deg=max_tilt_deg, above=c2w[:, :3, 3], above_share=1.0,
                      min_inliers=max(30, int(min_share * len(sample))))
    if found is None:
        return None
    tol = tol_share * float(np.linalg.norm(hi - lo))
    coarse = sample[found[1]]
    # again at a quarter of the tolerance on those inliers: the table's dense layer, not the
    # book on it, has the most of them (the book lay within the first tolerance, lifting it)
    fine = fit_plane(coarse, 0.25 * tol, rng, hypotheses=hypotheses, up=found[0].normal, max_tilt_deg=10.0,
                     min_inliers=max(3, int(0.5 * min_share * len(coarse))))
    p = fine[0] if fine is not None else found[0]
    if (p.distance(c2w[:, :3, 3]) <= 0).any():   # the refinement may tilt it under a camera
        return None
    # its thickness from the side under it, where only its own spread lies (objects stand on it)
    d = p.distance(coarse)
    under = d[d < 0]
    rms = float(np.sqrt(np.mean(under ** 2))) if len(under) else p.thickness / 2.5
    return Plane(p.normal, p.offset, int(found[0].inliers), 2.5 * rms, "scene")


def camera_elevations(c2w: np.ndarray, plane: Plane, foot: np.ndarray) -> np.ndarray:
    """[N] degrees above ``plane`` of each camera centre (c2w [N, 4, 4]) seen from ``foot``
    [3] (dropped onto the plane first): how steeply every view looks down at a subject's
    base. When even the lowest view looks down steeply, what lies under the subject's
    overhangs is seen by none (the office chair video: every camera 49 degrees or more up,
    the column under the seat and the base's hub hidden in all 100 views)."""
    foot = np.asarray(foot, np.float64)
    foot = foot - plane.distance(foot[None])[0] * plane.normal
    d = np.asarray(c2w, np.float64)[:, :3, 3] - foot
    up = d @ plane.normal
    return np.degrees(np.arctan2(up, np.linalg.norm(d - up[:, None] * plane.normal, axis=1)))
