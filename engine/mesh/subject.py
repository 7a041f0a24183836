"""The subject of a capture, found from the cameras and the trained splats: the region to mesh.

Four steps, each usable alone (all NumPy, vectorised; world units, OpenCV camera axes:
+z forward, +y down in the image):

1. :func:`detect_orbit`: the *look point* is the point nearest to all optical axes in least
   squares, sum_i |(I - d_i d_i^T)(p - c_i)|^2 -> min (camera centre c_i, unit axis d_i),
   re-solved on the cameras whose axis passes close to it (a trimmed fit, so a few cameras
   looking elsewhere do not pull it). The capture is an *orbit* when most cameras look at
   the point (axis-to-point distance below ``max_miss`` x camera distance, point in front)
   and their centres surround it in azimuth about the cameras' up (largest azimuth gap at
   most ``max_gap_deg``). A forward walk or a facing capture fails one of these.
2. :func:`fit_plane`: the support plane (table, floor) by RANSAC (Fischler & Bolles 1981) on
   opaque splat centres near the look point, refined by least squares on the inliers.
   Only hypotheses whose normal is within ``max_tilt_deg`` of the cameras' up, with the look
   point and nearly all cameras on its upper side, are scored: a tangent plane of an object
   floating in empty space with cameras below it (the torus of tests/mesh) is no support.
   Nor is a plane with more than 5% of the splats near the look point, or of those in the
   vertical column over and under it, under it (a slice along a textureless object's
   edges; a chair's flat seat, whose base is under it), nor one with most of its inliers
   inside that column (a table shows around what stands on it).
3. :func:`grow_subject`: opaque splat centres above the plane (a band of ``margin`` above it
   removed so the object comes apart from the table), counted on a coarse grid; voxels with
   at least ``min_count`` centres seen by at least ``min_views`` of the cameras (drops
   floaters in front of single cameras) are occupied; the 26-connected components that
   reach within ``seed_radius`` of the look point are the subject (the look point itself
   may be empty: a torus' hole, a mug's inside), with the cells under its footprint that
   reach the plane (a base its thin legs keep apart on this grid). Its axis-aligned box,
   padded, reaching down to the plane when it stands on it, is the region to mesh.
4. :func:`base_plane`, when no support plane is found (a textureless table holds almost no
   opaque splats: the photometric loss cannot place them): the plane normal to the orbit's
   axis under the subject's lowest splats, when the cameras all look down on it. The
   object's bottom is then never seen, and closing it there is what makes it watertight.

:func:`find_subject` chains them and falls back to the scene bounds
(engine/mesh/grid.py ``splat_bounds``) when the capture is not an orbit or no subject is
found; :func:`resolve_bounds` maps the ``--bounds`` setting (auto, scene, six numbers) to a
:class:`SubjectBounds`. The cut at the plane and the closing of the mesh are in
engine/mesh/repair.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from ..errors import SpirulaError
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


@dataclass(frozen=True)
class Orbit:
    """What :func:`detect_orbit` measured. look_point [3] world; up [3] unit (axis of the
    camera ring, else the mean of the cameras' -y axes); hit_share: share of cameras whose axis passes within the tolerance;
    azimuth_gap_deg: largest gap between the cameras' azimuths about up through the look
    point; distance: median camera-to-look-point distance (world units)."""

    is_orbit: bool
    look_point: np.ndarray
    up: np.ndarray
    hit_share: float
    azimuth_gap_deg: float
    distance: float

    def to_json(self) -> dict:
        return {"is_orbit": bool(self.is_orbit), "look_point": [float(v) for v in self.look_point],
                "up": [float(v) for v in self.up], "axis_hit_share": float(self.hit_share),
                "azimuth_gap_deg": float(self.azimuth_gap_deg), "camera_distance": float(self.distance)}


@dataclass(frozen=True)
class SubjectBounds:
    """The region to mesh: axis-aligned box lo [3] .. hi [3] (world units).
    mode: the setting asked for ("auto", "scene", "explicit"); found: "subject" (grown
    around an orbit's look point), "scene" (opaque splats) or "explicit" (given numbers);
    plane: the support plane to cut at (only with found = "subject"); reason: one line."""

    mode: str
    found: str
    lo: np.ndarray
    hi: np.ndarray
    orbit: Orbit | None = None
    plane: Plane | None = None
    reason: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def box(self) -> tuple[float, ...]:
        """(xmin, ymin, zmin, xmax, ymax, zmax)."""
        return tuple(float(v) for v in (*self.lo, *self.hi))

    def to_json(self) -> dict:
        return {"mode": self.mode, "found": self.found, "box": list(self.box), "reason": self.reason,
                "orbit": self.orbit.to_json() if self.orbit else None,
                "plane": self.plane.to_json() if self.plane else None, **self.extra}


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-300)


def camera_up(c2w: np.ndarray) -> np.ndarray:
    """[3] unit mean of the cameras' up directions (-y of OpenCV axes) from c2w [N, 4, 4]."""
    return _unit(-np.asarray(c2w, np.float64)[:, :3, 1].mean(0))


def nearest_point_to_lines(centres: np.ndarray, dirs: np.ndarray, weights: np.ndarray | None = None):
    """(point [3], smallest eigenvalue / weight sum of the normal matrix): the least-squares
    point nearest to the lines c_i + t d_i (centres, dirs [N, 3]; dirs unit). The eigenvalue
    ratio is ~0 when the lines are (nearly) parallel and the point is undetermined."""
    w = np.ones(len(centres)) if weights is None else np.asarray(weights, np.float64)
    proj = np.eye(3)[None] - dirs[:, :, None] * dirs[:, None, :]          # [N, 3, 3]
    a = (w[:, None, None] * proj).sum(0)
    b = (w[:, None, None] * proj @ centres[:, :, None]).sum(0)[:, 0]
    cond = float(np.linalg.eigvalsh(a)[0] / max(w.sum(), 1e-300))
    return np.linalg.lstsq(a, b, rcond=None)[0], cond


def _azimuth_gap(vectors: np.ndarray, up: np.ndarray) -> float:
    """Largest gap (degrees) between the azimuths of vectors [N, 3] about the axis up."""
    e1 = _unit(np.cross(up, [1.0, 0.0, 0.0] if abs(up[0]) < 0.9 else [0.0, 1.0, 0.0]))
    e2 = np.cross(up, e1)
    flat = vectors - (vectors @ up)[:, None] * up
    keep = np.linalg.norm(flat, axis=1) > 1e-9 * max(np.linalg.norm(vectors, axis=1).max(), 1e-300)
    if keep.sum() < 2:
        return 360.0
    ang = np.sort(np.arctan2(flat[keep] @ e2, flat[keep] @ e1))
    gaps = np.diff(np.concatenate([ang, ang[:1] + 2 * np.pi]))
    return float(np.degrees(gaps.max()))


def _orbit_axis(centres: np.ndarray, up: np.ndarray) -> np.ndarray:
    """The axis of a ring of camera centres [N, 3] (normal of their least-squares plane,
    oriented to ``up``) when they lie near a plane (smallest singular value under half the
    middle one), else ``up``: the mean image up of cameras that look down on a subject is
    tilted unless they go evenly all the way round."""
    s, vt = np.linalg.svd(centres - centres.mean(0), full_matrices=False)[1:]
    if s[2] >= 0.5 * s[1]:
        return up
    return vt[2] * (1.0 if vt[2] @ up >= 0 else -1.0)


def detect_orbit(c2w: np.ndarray, max_miss: float = 0.25, min_share: float = 0.7,
                 max_gap_deg: float = 150.0, iterations: int = 3) -> Orbit:
    """Is the capture an orbit around a common look point? c2w: [N, 4, 4] camera-to-world.

    max_miss: an axis "hits" the point when its distance to it is below max_miss x the
    camera's distance to it (0.25 ~ 14 degrees) and the point is in front of the camera;
    min_share: share of cameras that must hit; max_gap_deg: the largest azimuth gap
    allowed (150: the cameras go at least 210 degrees around). Raises SpirulaError for
    fewer than 3 cameras."""
    c2w = np.asarray(c2w, np.float64)
    if c2w.ndim != 3 or c2w.shape[1:] != (4, 4) or len(c2w) < 3:
        raise SpirulaError(f"subject: need at least 3 camera poses [N, 4, 4], got shape {c2w.shape}")
    centres, dirs = c2w[:, :3, 3], _unit(c2w[:, :3, 2])
    up = camera_up(c2w)
    weights = np.ones(len(c2w))
    point, cond = nearest_point_to_lines(centres, dirs)
    for _ in range(iterations):  # trimmed re-fit on the cameras that look at the point
        rel = point - centres
        dist = np.linalg.norm(rel, axis=1)
        miss = np.linalg.norm(rel - (rel * dirs).sum(1, keepdims=True) * dirs, axis=1)
        hit = (miss < max_miss * dist) & ((rel * dirs).sum(1) > 0)
        if hit.sum() < 3 or np.array_equal(hit, weights > 0):
            break
        weights = hit.astype(np.float64)
        point, cond = nearest_point_to_lines(centres, dirs, weights)
    rel = point - centres
    dist = np.linalg.norm(rel, axis=1)
    miss = np.linalg.norm(rel - (rel * dirs).sum(1, keepdims=True) * dirs, axis=1)
    hit = (miss < max_miss * dist) & ((rel * dirs).sum(1) > 0)
    share = float(hit.mean())
    if hit.sum() >= 3:
        up = _orbit_axis(centres[hit], camera_up(c2w[hit]))
    gap = _azimuth_gap(centres[hit] - point, up) if hit.sum() >= 2 else 360.0
    ok = bool(cond > 1e-3 and share >= min_share and gap <= max_gap_deg and np.isfinite(point).all())
    return Orbit(ok, point, up, share, gap, float(np.median(dist)))


def fit_plane(points: np.ndarray, tol: float, rng: np.random.Generator, hypotheses: int = 512,
              up: np.ndarray | None = None, max_tilt_deg: float = 35.0, above: np.ndarray | None = None,
              above_share: float = 0.95, min_inliers: int = 30,
              all_above: np.ndarray | None = None, column: np.ndarray | None = None,
              below_share: float = 0.05, off_column: np.ndarray | None = None, around_share: float = 0.5,
              accept=None, tries: int = 8, draw: np.ndarray | None = None, seed_normals: np.ndarray | None = None,
              peaks: int = 6) -> tuple[Plane, np.ndarray] | None:
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
    inliers of the refined plane; with ``accept`` ((Plane, its inliers [I, 3]) -> bool), the first of the ``tries``
    best hypotheses whose refined plane it accepts wins (the refinement can tilt a plane
    into the subject: on the mouse capture the best of 4096 did). ``draw`` [M] bool: the
    points the triples are drawn from (default all). ``seed_normals`` [S, 3]: more
    hypotheses besides the triples, a Hough vote: for each of these normals, the planes at
    the ``peaks`` most populated slices (``tol`` thick) of the points' heights along it."""
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
    if not good.any():
        return None
    n, off = n[good], off[good]
    counts = np.zeros(len(n), np.int64)
    for s in range(0, len(n), 64):  # [64, M] distance blocks keep the memory small
        near = np.abs(pts @ n[s:s + 64].T + off[s:s + 64]) < tol
        counts[s:s + 64] = near.sum(0)
        if off_column is not None:   # too few inliers around: no candidate
            counts[s:s + 64] *= near[np.asarray(off_column, bool)].sum(0) >= around_share * counts[s:s + 64]
    for best in np.argsort(-counts, kind="stable")[:tries if accept is not None else 1]:
        if counts[best] < max(min_inliers, 3):
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
        if accept is None or accept(plane, pts[inl]):
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
    e1 = _unit(np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0]))
    e2 = np.cross(axis, e1)
    out = [axis]
    for t in np.radians([t for t in tilts_deg if t > 0]):
        az = np.linspace(0, 2 * np.pi, azimuths, endpoint=False)
        out.append(np.cos(t) * axis + np.sin(t) * (np.cos(az)[:, None] * e1 + np.sin(az)[:, None] * e2))
    return np.vstack(out)


def seen_counts(points: np.ndarray, w2c: np.ndarray, intrinsics: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """[M] int: how many cameras see each world point [M, 3] inside their image and in
    front. w2c [N, 4, 4]; intrinsics [N, 6] (fx, fy, cx, cy, width, height) in pixels."""
    pts = np.asarray(points, np.float64)
    out = np.zeros(len(pts), np.int64)
    r, t = w2c[:, :3, :3], w2c[:, :3, 3]
    fx, fy, cx, cy, w, h = (intrinsics[:, k][None] for k in range(6))
    for s in range(0, len(pts), chunk):
        pc = np.einsum("nij,mj->mni", r, pts[s:s + chunk]) + t[None]       # [m, N, 3]
        z = pc[..., 2]
        zs = np.where(z > 1e-9, z, 1.0)
        u, v = fx * pc[..., 0] / zs + cx, fy * pc[..., 1] / zs + cy
        out[s:s + chunk] = ((z > 1e-9) & (u >= 0) & (u < w) & (v >= 0) & (v < h)).sum(1)
    return out


def grow_subject(points: np.ndarray, look_point: np.ndarray, voxel: float, seed_radius: float,
                 plane: Plane | None = None, margin: float = 0.0, min_count: int = 2,
                 visible: np.ndarray | None = None,
                 gap_share: float = 0.25) -> tuple[np.ndarray, np.ndarray, int, bool] | None:
    """(lo [3], hi [3], occupied voxels of the subject, whether it stands on the plane) or
    None when no occupied voxel reaches within ``seed_radius`` of ``look_point``.

    points [M, 3]: opaque splat centres (world); voxel: grid edge (world units); plane /
    margin: centres below plane + margin are left out (the table is not the subject);
    visible [M] bool: centres that enough cameras see (others left out). A voxel is occupied
    with at least ``min_count`` centres. The box spans the subject's voxels and 1 voxel of
    padding; when the subject stands on the plane (:func:`_stands_on`: its lowest cell
    within margin + max(3 voxels, ``gap_share`` x its height) of it), it reaches down to 2
    voxels below the plane under the subject."""
    pts = np.asarray(points, np.float64)
    keep = np.ones(len(pts), bool) if visible is None else np.asarray(visible, bool).copy()
    if plane is not None:
        keep &= plane.distance(pts) > margin
    pts = pts[keep]
    if len(pts) == 0:
        return None
    origin = pts.min(0) - voxel
    ijk = np.floor((pts - origin) / voxel).astype(np.int64)
    dims = ijk.max(0) + 2
    if np.prod(dims.astype(float)) > 4e8:
        raise SpirulaError(f"subject: grid of {dims.tolist()} voxels is too large (voxel {voxel:g})")
    counts = np.zeros(dims, np.int32)
    np.add.at(counts, tuple(ijk.T), 1)
    labels, _ = ndimage.label(counts >= min_count, structure=np.ones((3, 3, 3), bool))
    occ = np.argwhere(labels > 0)
    if len(occ) == 0:
        return None
    centres = origin + (occ + 0.5) * voxel
    near = np.linalg.norm(centres - look_point, axis=1) <= seed_radius + voxel
    seeds = np.unique(labels[tuple(occ[near].T)])
    if len(seeds) == 0:
        return None
    lab = labels[tuple(occ.T)]
    inner = np.isin(lab, seeds)
    stands = plane is not None and _stands_on(plane.distance(centres[inner]), margin, voxel, gap_share)
    if plane is not None and not stands:
        inner |= _base_cells(centres, inner, plane, margin, voxel, gap_share)
        stands = _stands_on(plane.distance(centres[inner]), margin, voxel, gap_share)
    sub = centres[inner]
    lo, hi = sub.min(0) - 1.5 * voxel, sub.max(0) + 1.5 * voxel
    if stands:
        foot = sub - (plane.distance(sub) + 2 * voxel)[:, None] * plane.normal  # 2 voxels under the plane
        lo, hi = np.minimum(lo, foot.min(0)), np.maximum(hi, foot.max(0))
    return lo, hi, int(len(sub)), bool(stands)


def _stands_on(heights: np.ndarray, margin: float, voxel: float, gap_share: float) -> bool:
    """Does a subject whose occupied cells lie at ``heights`` [K] over a plane stand on it?
    Its lowest cell must come within margin + max(3 voxels, ``gap_share`` x its height) of
    the plane. What touches the floor is often too thin or dark for opaque splats: the
    office chair video's casters left its star base 0.4-0.6 over the floor (1/9 of the
    chair's height, 5-7 coarse voxels) at 256 px, and the floor was dropped for a plane
    under the seat (no legs). An object on a textureless table, with the floor found
    under it, floats by more than its own height (the table's) and does not stand."""
    h = np.asarray(heights, np.float64)
    if len(h) == 0:
        return False
    return bool(h.min() <= margin + max(3 * voxel, gap_share * (h.max() - h.min())))


def _base_cells(centres: np.ndarray, inner: np.ndarray, plane: Plane, margin: float, voxel: float,
               gap_share: float = 0.25, spread: float = 1.5, min_share: float = 0.1) -> np.ndarray:
    """[K] bool: the occupied cells that carry the subject, or none. A chair's star base, a
    stool's feet: the pole or legs between them and the seat are too thin for opaque splats
    at a small training size (the office_chair's pole at 200 px: splats of opacity ~0.03),
    so on the coarse grid the base is apart from the seat, and in pieces (47 of 1 to 10
    cells there). The cells under the subject's lowest cell that meet its footprint on the
    plane (1 cell of slack) and lie within ``spread`` x its radius of its axis are its base
    when the subject stands on the plane with them (:func:`_stands_on`) and they number at least ``min_share`` of the
    subject's cells (a few floaters under an object on a table that holds no splats do not).
    centres [K, 3] occupied cell centres, inner [K] bool the subject's; world units."""
    h = plane.distance(centres)
    e1 = np.cross(plane.normal, [1.0, 0.0, 0.0] if abs(plane.normal[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    flat = np.stack([centres @ e1, centres @ np.cross(plane.normal, e1)], 1)     # [K, 2] on the plane
    cell = np.floor(flat / voxel).astype(np.int64)
    cell -= cell.min(0) - 1
    key = lambda c: c[..., 0] * (int(cell[:, 1].max()) + 3) + c[..., 1]
    slack = np.stack(np.meshgrid([-1, 0, 1], [-1, 0, 1], indexing="ij"), -1).reshape(-1, 2)
    under_foot = np.isin(key(cell), key(cell[inner][:, None] + slack[None]))    # footprint, 1 cell wider
    radius = np.linalg.norm(flat - flat[inner].mean(0), axis=1)
    base = ~inner & (h < h[inner].min()) & under_foot & (radius <= spread * radius[inner].max())
    if base.sum() < min_share * inner.sum() or not _stands_on(h[inner | base], margin, voxel, gap_share):
        return np.zeros(len(centres), bool)
    return base


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


MAX_BELOW_SUPPORT = 0.05   # share of the splats near the look point a support plane may leave under it
MIN_AROUND = 0.5           # share of a support plane's inliers off the subject's column


def _off_axis(points: np.ndarray, orbit: Orbit) -> np.ndarray:
    """[M] distance of world points [M, 3] from the orbit's axis (through the look point, along up)."""
    rel = np.asarray(points, np.float64) - orbit.look_point
    return np.linalg.norm(rel - np.outer(rel @ orbit.up, orbit.up), axis=1)


def find_subject(c2w: np.ndarray, means: np.ndarray, opacity_logits: np.ndarray, scales: np.ndarray | None = None,
                 intrinsics: np.ndarray | None = None, seed: int = 0, min_opacity: float = 0.2,
                 grid_cells: int = 64, min_view_share: float = 0.25) -> SubjectBounds:
    """The subject of the capture (module docstring), or the scene bounds when there is none.

    c2w [N, 4, 4] camera-to-world (OpenCV axes); means [G, 3] splat centres; opacity_logits
    [G] (sigmoid = opacity); scales [G, 3] log standard deviations (splats larger than the
    4 coarse voxels are left out of the occupancy: big background blobs are not the subject);
    intrinsics [N, 6] (fx, fy, cx, cy, width, height) or None (no visibility check).
    grid_cells: the coarse voxel is the median camera distance / grid_cells; the plane's
    RANSAC tolerance is half a voxel, the subject's seed radius 0.2 x that distance;
    min_view_share: share of cameras that must see an occupied
    centre. Deterministic for a given ``seed``."""
    means = np.asarray(means, np.float64)
    logits = np.asarray(opacity_logits, np.float64)
    scene_lo, scene_hi = splat_bounds(means, logits)
    orbit = detect_orbit(c2w)
    if not orbit.is_orbit:
        why = (f"not an orbit: {100 * orbit.hit_share:.0f}% of the cameras look at one point, "
               f"largest azimuth gap {orbit.azimuth_gap_deg:.0f} deg")
        plane = scene_plane(c2w, means, logits, seed=seed)
        if plane is not None:
            why += "; the cameras face a support plane from one side: what lies behind it goes, its layer is flattened"
        return SubjectBounds("auto", "scene", scene_lo, scene_hi, orbit, plane, why)
    c2w = np.asarray(c2w, np.float64)
    d_cam = np.linalg.norm(c2w[:, :3, 3] - orbit.look_point, axis=1)
    voxel, seed_radius = orbit.distance / grid_cells, 0.2 * orbit.distance
    opaque = 1.0 / (1.0 + np.exp(-logits)) > opaque_cut(logits, min_opacity)
    if scales is not None:
        opaque &= np.exp(np.asarray(scales, np.float64)).max(1) < 4 * voxel
    inside = np.linalg.norm(means - orbit.look_point, axis=1) < 0.9 * np.quantile(d_cam, 0.1)
    pts = means[opaque & inside]
    rng = np.random.default_rng(seed)
    sample = pts[rng.choice(len(pts), min(len(pts), 20000), replace=False)] if len(pts) else pts
    above = np.concatenate([c2w[:, :3, 3], orbit.look_point[None]])
    # the splats over and under the look point (a vertical column of the seed radius): a
    # support lies under nearly all of them, a flat part of the subject does not (the seat of
    # a chair on a glossy floor, which holds few opaque splats, won RANSAC without this).
    column = pts[_off_axis(pts, orbit) < seed_radius]
    sub = np.random.default_rng(seed + 1)   # the hypotheses draw from rng as they did before
    column = column[sub.choice(len(column), min(len(column), 5000), replace=False)] if len(column) else column
    near = pts[np.linalg.norm(pts - orbit.look_point, axis=1) < seed_radius]
    # a refined plane with the subject under it is a slice through it (a tilted plane along
    # its edges, a flat part), not a table
    under = lambda p, q: (p.distance(q) < -max(voxel, p.thickness)).mean() > MAX_BELOW_SUPPORT if len(q) else False
    # and a table shows around what stands on it: most of its inliers lie outside the column
    # (a plane along the subject's own rim or the legs of its base has them all inside)
    shows_around = lambda inl: (_off_axis(inl, orbit) > seed_radius).mean() >= MIN_AROUND
    # 512 hypotheses, then, when none qualifies, 4096 drawn off the column: a glossy floor
    # had 6% of the points (few opaque splats on it), and 512 triples drew it 1 time in 10
    around = _off_axis(sample, orbit) > seed_radius
    for hypotheses, draw in ((512, None), (4096, around)):
        found = fit_plane(sample, 0.5 * voxel, rng, hypotheses=hypotheses, up=orbit.up, above=above,
                          min_inliers=max(30, int(0.05 * len(sample))), all_above=orbit.look_point,
                          column=column, below_share=MAX_BELOW_SUPPORT, draw=draw,
                          off_column=around, around_share=MIN_AROUND, seed_normals=_cone(orbit.up), tries=24,
                          accept=lambda p, inl: shows_around(inl) and not (under(p, near) or under(p, column)))
        if found:
            break
    plane = found[0] if found else None
    visible = None
    if intrinsics is not None and len(pts):
        w2c = np.linalg.inv(c2w)
        visible = seen_counts(pts, w2c, np.asarray(intrinsics, np.float64)) >= max(2, min_view_share * len(c2w))
    margin = max(voxel, plane.thickness) if plane else 0.0
    grown = grow_subject(pts, orbit.look_point, voxel, seed_radius, plane, margin, visible=visible)
    extra = {"coarse_voxel": voxel, "opaque_centres": int(len(pts))}
    if grown is None:
        return SubjectBounds("auto", "scene", scene_lo, scene_hi, orbit, None,
                             "orbit, but no opaque splats near the look point", extra)
    lo, hi, cells, stands = grown
    if plane is not None and not stands:   # e.g. the floor under a table without texture
        plane = None
    if plane is None:
        box = ((pts >= lo) & (pts <= hi)).all(1) & (visible if visible is not None else True)
        plane = base_plane(pts[box] @ orbit.up, orbit.up, above @ orbit.up)
        if plane is not None:   # the box reaches 2 voxels under the base, as onto a table
            corners = np.array(np.meshgrid(*zip(lo, hi), indexing="ij")).reshape(3, -1).T
            foot = corners - (plane.distance(corners) + 2 * voxel)[:, None] * plane.normal
            lo, hi = np.minimum(lo, foot.min(0)), np.maximum(hi, foot.max(0))
    lo, hi = np.maximum(lo, scene_lo), np.minimum(hi, scene_hi)  # never more than the scene
    if (hi <= lo).any():
        return SubjectBounds("auto", "scene", scene_lo, scene_hi, orbit, None,
                             "orbit, but the subject lies outside the scene bounds", extra)
    why = f"orbit around the look point; subject of {cells} coarse voxels" + (
        "; no support plane" if plane is None else "; support plane found" if plane.source == "table"
        else "; no table surface in the splats: closed under the subject's lowest splats")
    return SubjectBounds("auto", "subject", lo, hi, orbit, plane, why, {**extra, "subject_voxels": cells})


def resolve_bounds(setting, c2w: np.ndarray, means: np.ndarray, opacity_logits: np.ndarray,
                   scales: np.ndarray | None = None, intrinsics: np.ndarray | None = None) -> SubjectBounds:
    """The ``bounds`` setting of MeshConfig -> SubjectBounds: "auto" (or None) ->
    :func:`find_subject`; "scene" -> the opaque splats' bounds; six numbers (xmin ymin zmin
    xmax ymax zmax) -> that box. Raises SpirulaError for anything else or an empty box."""
    if setting is None or (isinstance(setting, str) and setting == "auto"):
        return find_subject(c2w, means, opacity_logits, scales, intrinsics)
    if isinstance(setting, str):
        if setting == "scene":
            lo, hi = splat_bounds(means, opacity_logits)
            return SubjectBounds("scene", "scene", lo, hi, reason="asked for the scene bounds")
        raise SpirulaError(f"unknown bounds '{setting}': choose auto, scene or six numbers")
    b = np.asarray(setting, np.float64).reshape(-1)
    if b.size != 6 or not np.isfinite(b).all() or (b[3:] <= b[:3]).any():
        raise SpirulaError(f"bounds {tuple(setting)}: need six finite numbers xmin ymin zmin xmax ymax zmax "
                           "with each max above its min")
    return SubjectBounds("explicit", "explicit", b[:3], b[3:], reason="given")
