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
from .plane import Plane, _cone, _unit, base_plane, fit_plane, perpendicular_basis, scene_plane  # noqa: F401 (re-exported)


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
    cells: np.ndarray | None = None   # [K, 3] centres of the subject's occupied coarse voxels
    cell: float = 0.0                 # their edge (world units)

    @property
    def box(self) -> tuple[float, ...]:
        """(xmin, ymin, zmin, xmax, ymax, zmax)."""
        return tuple(float(v) for v in (*self.lo, *self.hi))

    def to_json(self) -> dict:
        return {"mode": self.mode, "found": self.found, "box": list(self.box), "reason": self.reason,
                "orbit": self.orbit.to_json() if self.orbit else None,
                "plane": self.plane.to_json() if self.plane else None, **self.extra}


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
    e1, e2 = perpendicular_basis(up)
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
                 gap_share: float = 0.25) -> tuple[np.ndarray, np.ndarray, int, bool, np.ndarray] | None:
    """(lo [3], hi [3], occupied voxels of the subject, whether it stands on the plane,
    their centres [K, 3]) or
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
    return lo, hi, int(len(sub)), bool(stands), sub


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
    e1, e2 = perpendicular_basis(plane.normal)
    flat = np.stack([centres @ e1, centres @ e2], 1)     # [K, 2] on the plane
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


MAX_BELOW_SUPPORT = 0.05   # share of the splats near the look point a support plane may leave under it
MIN_AROUND = 0.5           # share of a support plane's inliers off the subject's column
# support hypotheses within this share of the best inlier count are tried least tilted first:
# a plane through the table's far edge and the subject's rim can gather a few more inliers
UPRIGHT_TIE = 0.9


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
    # nor one that slices the subject: with no splats on the table (a white one) the planes
    # through an elongated subject's rim at one end and under it at the other get the most
    # inliers (the mouse at 1000 px: 1444 at 11 degrees off the orbit's axis, 8% of the opaque
    # splats under it), and its far end lies outside ``near`` and ``column``. So every hypothesis
    # must have nearly all of the splats over it; only those within the seed radius under it
    # count (deeper is a floor under the table, not the subject).
    body = sample[sub.choice(len(sample), min(len(sample), 5000), replace=False)] if len(sample) else sample
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
                          upright_tie=UPRIGHT_TIE, body=body, body_depth=seed_radius,
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
    lo, hi, cells, stands, centres = grown
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
    return SubjectBounds("auto", "subject", lo, hi, orbit, plane, why, {**extra, "subject_voxels": cells},
                         centres, voxel)


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
