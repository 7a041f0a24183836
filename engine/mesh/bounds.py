"""The region to mesh (``--bounds``): one explicit step, printed and recorded with its reason.

``auto`` proposes an object box from two facts only, each tested in tests/mesh/test_bounds.py:

1. *Where the cameras look* (:func:`convergence`): the point nearest to all optical axes in
   least squares, sum_i |(I - d_i d_i^T)(p - c_i)|^2 -> min (centre c_i, unit axis d_i),
   re-solved once on the cameras whose axis passes within ``max_miss`` (a tangent: 0.25, about
   14 degrees) of it. The cameras *converge* when at least ``min_share`` of them have the
   point in front and their axis that close to it, and their axes spread by more than a
   few degrees (smallest eigenvalue of I - mean d d^T at least ``min_spread``). Serves the
   object captures: full and partial orbits, a walk around an object, a few photos from
   one side. A room filmed from inside (the point lies behind most cameras) and a pan or a
   walk (parallel axes) do not converge: they are meshed as ``scene``.
2. *What several cameras see* (:func:`object_box`): the points of the depths that passed
   the multi-view consistency test (engine/mesh/consistency.py), within a sphere around
   the convergence point of ``region`` x the cameras' median distance to it. Their up-facing
   points (normal within 25 degrees of up) give the floor or table under the object: the
   most populated height among them not above the convergence point, when it holds at least
   ``min_floor_share`` of the region's points (serves an object on a floor or a table; a
   textureless table with few consistent points gives none, and the box's bottom is then
   the object's lowest points). The object is the connected set of points above that floor
   (26-connected cells of ``region / 32``, one cell of dilation bridging small gaps) nearest
   to the convergence point; the box is their extent, padded, in a frame whose third axis
   is up and whose first is their principal horizontal direction. Its bottom is the floor
   or the lowest points: the mesh stage cuts the object there and closes the cut by a flat
   cap, so an object comes out closed whether its underside was seen or not.

The up axis (:func:`camera_up`) is the direction perpendicular to the cameras' image rows
(a phone is held level: its image x axis stays horizontal), oriented like the image's up;
when the rows all point one way (no turn: a few photos from one side) it is the mean normal
of the consistent points that face the image's up (the table under the object), made
perpendicular to the rows.

``scene`` meshes everything the consistent depths give (their 0.5% .. 99.5% range per world
axis, padded). Six numbers are a world-axis box, meshed as given (clipped, no cap).

Conventions: c2w [V, 4, 4] camera-to-world (OpenCV axes: +z forward, +y down the image);
points [P, 3] world; a box is (frame [3, 3] whose rows are its axes in world coordinates,
lo [3], hi [3] in frame coordinates: x_frame = frame @ x_world).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from ..errors import SpirulaError


@dataclass
class Convergence:
    """point [3] world; share of cameras that look at it; spread (smallest eigenvalue of
    I - mean d d^T); distance: the looking cameras' median distance to it; converges."""

    point: np.ndarray
    share: float
    spread: float
    distance: float
    converges: bool

    def to_json(self) -> dict:
        return {"point": [float(x) for x in self.point], "share": self.share, "spread": self.spread,
                "distance": self.distance, "converges": self.converges}


@dataclass
class Bounds:
    """The region to mesh. mode: "object", "scene" or "explicit"; frame [3, 3] rows = box
    axes in world; lo, hi [3] in frame coordinates (an object's lo[2], its bottom, is cut and
    capped); floor: the height (frame z) of the floor the object stands on (None: none found);
    reason: why."""

    mode: str
    frame: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    reason: str
    floor: float | None = None
    convergence: Convergence | None = None
    up: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    def corners(self) -> np.ndarray:
        """[8, 3] world corners of the box."""
        c = np.array([[(k >> a) & 1 for a in range(3)] for k in range(8)], float)
        return (self.lo + c * (self.hi - self.lo)) @ self.frame

    def aabb(self) -> tuple[float, ...]:
        """The world axis-aligned box around it (xmin ymin zmin xmax ymax zmax)."""
        c = self.corners()
        return tuple(float(x) for x in (*c.min(0), *c.max(0)))

    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        """[P] bool: world points inside the box grown by ``tol``."""
        q = np.asarray(points, np.float64) @ self.frame.T
        return ((q >= self.lo - tol) & (q <= self.hi + tol)).all(1)

    def to_json(self) -> dict:
        return {"mode": self.mode, "reason": self.reason, "frame": self.frame.tolist(),
                "lo": [float(x) for x in self.lo], "hi": [float(x) for x in self.hi],
                "aabb": list(self.aabb()), "floor": self.floor,
                "up": None if self.up is None else [float(x) for x in self.up],
                "convergence": None if self.convergence is None else self.convergence.to_json(), **self.extra}

    def describe(self) -> str:
        """One line for the CLI: the box and why."""
        size = self.hi - self.lo
        return (f"bounds {self.mode}: box {size[0]:.3g} x {size[1]:.3g} x {size[2]:.3g} "
                f"(world AABB {' '.join(f'{x:.3g}' for x in self.aabb())}); {self.reason}")


def camera_up(c2w: np.ndarray, min_turn: float = 0.05, normals: np.ndarray | None = None,
              min_share: float = 0.05) -> np.ndarray:
    """[3] unit up: the eigenvector of the smallest eigenvalue of mean x_i x_i^T (x_i the
    cameras' image-row axes, c2w[:3, 0]), oriented towards the mean image up (-c2w[:3, 1]),
    when the second eigenvalue is at least ``min_turn`` (the rows turned by more than about
    13 degrees: orbits, walks around, pans). Else (a few photos or a short video from one
    side, the rows all one way) the up is only known to be perpendicular to the rows: with
    ``normals`` [P, 3] (world, of the consistent points) it is their mean direction near
    the mean image up (what the object stands on faces up; the cameras look down on it):
    the mean of those within 60 degrees of the image up, then within 30 and 15 degrees of
    that (a mean shift that leaves the object's sides out), each made perpendicular to the
    rows, while at least ``min_share`` of the normals are in the cone; else the normalised
    mean image up."""
    c2w = np.asarray(c2w, np.float64)
    x, up_img = c2w[:, :3, 0], -c2w[:, :3, 1].mean(0)
    w, v = np.linalg.eigh(x.T @ x / len(x))
    if w[1] >= min_turn:
        up = v[:, 0]
        return up if up @ up_img >= 0 else -up
    n = np.linalg.norm(up_img)
    up = up_img / n if n > 1e-9 else np.array([0.0, 0.0, 1.0])
    if normals is not None and len(normals):
        nl = np.linalg.norm(normals, axis=1)
        ok = nl > 0.5
        row, guess = v[:, 2], up
        for cone in (60.0, 30.0, 15.0):   # a mean shift to the table's normal, the sides' left out
            facing = ok & (normals @ guess >= np.cos(np.radians(cone)) * nl)
            if facing.sum() < min_share * max(ok.sum(), 1):
                break
            m = normals[facing].mean(0)
            m -= (m @ row) * row
            if np.linalg.norm(m) <= 1e-9:
                break
            guess = m / np.linalg.norm(m)
        else:
            up = guess
    return up


def convergence(c2w: np.ndarray, max_miss: float = 0.25, min_share: float = 0.7,
                min_spread: float = 0.02) -> Convergence:
    """Where the cameras' optical axes meet (module docstring, step 1)."""
    c2w = np.asarray(c2w, np.float64)
    c, d = c2w[:, :3, 3], c2w[:, :3, 2]
    d = d / np.linalg.norm(d, axis=1, keepdims=True)

    def solve(sel):
        P = np.eye(3)[None] - d[sel, :, None] * d[sel, None, :]
        A, b = P.sum(0), (P @ c[sel, :, None]).sum(0)[:, 0]
        return np.linalg.lstsq(A, b, rcond=None)[0]

    def looking(p):
        v = p - c
        z = (v * d).sum(1)
        miss = np.linalg.norm(v - z[:, None] * d, axis=1)
        return (z > 0) & (miss <= max_miss * np.maximum(z, 1e-12)), z

    p = solve(np.ones(len(c), bool))
    ok, _ = looking(p)
    if ok.sum() >= 2:
        p = solve(ok)
    ok, z = looking(p)
    spread = float(np.linalg.eigvalsh(np.eye(3) - d.T @ d / len(d))[0])
    share = float(ok.mean())
    dist = float(np.median(np.linalg.norm(p - c[ok], axis=1))) if ok.any() else float(np.median(np.abs(z)))
    return Convergence(p, share, spread, dist, share >= min_share and spread >= min_spread)


def consistent_points(depths, normals, c2w: np.ndarray, intrinsics: np.ndarray, max_points: int = 400_000,
                      normal_stride: int = 1):
    """(points [P, 3], normals [P, 3]) world: pixels of the consistent depth maps (0 = none),
    every s-th in x and y (s a multiple of ``normal_stride``) with s chosen so that about
    ``max_points`` come out; normals: per view [H, W, 3] camera-space unit normals taken every
    ``normal_stride``-th pixel in x and y, or None (zeros)."""
    total = sum(int((np.asarray(dm) > 0).sum()) for dm in depths)
    ns = max(1, int(normal_stride))
    s = ns * max(1, int(np.ceil(np.sqrt(total / max(max_points, 1)) / ns)))
    pts, nrm = [], []
    for i, dm in enumerate(depths):   # one vectorised pass per view
        dm = np.asarray(dm)[::s, ::s]
        v, u = np.nonzero(dm > 0)
        if len(v) == 0:
            continue
        fx, fy, cx, cy = intrinsics[i][:4]
        z = dm[v, u].astype(np.float64)
        rc = np.stack([(u * s + 0.5 - cx) / fx, (v * s + 0.5 - cy) / fy, np.ones(len(u))], 1) * z[:, None]
        R, t = c2w[i][:3, :3], c2w[i][:3, 3]
        pts.append(rc @ R.T + t)
        n = (np.zeros((len(u), 3)) if normals is None or normals[i] is None
             else np.asarray(normals[i], np.float64)[::s // ns, ::s // ns][v, u])
        nrm.append(n @ R.T)
    if not pts:
        return np.zeros((0, 3)), np.zeros((0, 3))
    return np.concatenate(pts), np.concatenate(nrm)


def _frame(up: np.ndarray, horizontal: np.ndarray | None = None) -> np.ndarray:
    """[3, 3] rows (e1, e2, up): e1 the horizontal part of ``horizontal`` (or of the world
    axis least aligned with up)."""
    up = up / np.linalg.norm(up)
    h = horizontal if horizontal is not None else np.eye(3)[int(np.argmin(np.abs(up)))]
    e1 = h - (h @ up) * up
    if np.linalg.norm(e1) < 1e-9:
        e1 = np.eye(3)[int(np.argmin(np.abs(up)))] - up * up[int(np.argmin(np.abs(up)))]
    e1 /= np.linalg.norm(e1)
    return np.stack([e1, np.cross(up, e1), up])


def scene_box(points: np.ndarray, reason: str, quantile: float = 0.005, pad: float = 0.05,
              conv: Convergence | None = None, up=None) -> Bounds:
    """World-axis box of the points' ``quantile`` .. 1 - ``quantile`` range, padded by
    ``pad`` x its size. SpirulaError without points."""
    if len(points) < 8:
        raise SpirulaError("no consistent depth to mesh: fewer than 8 points passed the multi-view test "
                           "(train longer, or lower --consistency-views)")
    lo, hi = np.quantile(points, quantile, axis=0), np.quantile(points, 1 - quantile, axis=0)
    size = np.maximum(hi - lo, 1e-6)
    return Bounds("scene", np.eye(3), lo - pad * size, hi + pad * size, reason, convergence=conv, up=up)


def object_box(points: np.ndarray, normals: np.ndarray, conv: Convergence, up: np.ndarray,
               region: float = 0.6, cells: int = 32, min_floor_share: float = 0.05,
               floor_cos: float = np.cos(np.radians(25.0)), pad: float = 0.05) -> Bounds | None:
    """The object box of the module docstring's step 2, or None when no object stands near
    the convergence point (fewer than 64 points in the region)."""
    radius = region * conv.distance
    p0 = conv.point
    near = np.linalg.norm(points - p0, axis=1) <= radius
    pts, nrm = points[near], normals[near]
    if len(pts) < 64:
        return None
    h = pts @ up
    h0 = float(p0 @ up)
    cell = radius / cells
    # the floor: the most populated height of the up-facing points not above the look point
    # (a flat object's look point lies on it, a cell over its table)
    flat = (nrm @ up >= floor_cos) & (h < h0 + cell)
    floor = None
    if flat.sum() >= min_floor_share * len(pts):
        bins = np.floor((h[flat] - h0) / (0.25 * cell)).astype(np.int64)
        vals, counts = np.unique(bins, return_counts=True)
        peak = vals[np.argmax(counts)]
        layer = flat.copy()
        layer[flat] = np.abs(bins - peak) <= 1
        floor = float(np.median(h[layer]))
    above = h > floor + 0.5 * cell if floor is not None else np.ones(len(h), bool)
    q = pts[above]
    if len(q) < 64:
        return None
    # cells of the points above it, 26-connected after one cell of dilation; the component nearest p0
    ijk = np.floor((q - (p0 - radius)) / cell).astype(np.int64)
    n = 2 * cells + 1
    ijk = np.clip(ijk, 0, n - 1)
    occ = np.zeros((n, n, n), bool)
    occ[tuple(ijk.T)] = True
    lab, count = ndimage.label(ndimage.binary_dilation(occ, np.ones((3, 3, 3), bool)), np.ones((3, 3, 3), bool))
    plab = lab[tuple(ijk.T)]
    centres = (ijk + 0.5) * cell + (p0 - radius)
    best = plab[int(np.argmin(np.linalg.norm(centres - p0, axis=1)))]
    obj = q[plab == best]
    # frame: up, and the object's principal horizontal direction
    hor = obj - obj.mean(0)
    hor -= np.outer(hor @ up, up)
    w, v = np.linalg.eigh(hor.T @ hor)
    frame = _frame(up, v[:, 2])
    f = obj @ frame.T
    lo, hi = np.quantile(f, 0.002, axis=0), np.quantile(f, 0.998, axis=0)
    size = np.maximum(hi - lo, cell)
    lo, hi = lo - pad * size - cell, hi + pad * size + cell
    stands = floor is not None and lo[2] <= floor + 2 * cell
    lo[2] = floor if stands else np.quantile(f[:, 2], 0.002)
    reason = (f"the cameras converge on ({', '.join(f'{x:.3g}' for x in p0)}) ({conv.share:.0%} look within 14 degrees); "
              f"the box holds the {len(obj):,} consistent points connected to it"
              + (f", standing on the floor at height {floor:.3g} (cut just above it and capped)" if stands else
                 ", no floor under it (cut at its lowest points and capped)"))
    return Bounds("object", frame, lo, hi, reason, floor=floor if stands else None, convergence=conv, up=up,
                  extra={"points": int(len(obj)), "region_radius": float(radius)})


def resolve_bounds(setting, c2w: np.ndarray, points: np.ndarray, normals: np.ndarray) -> Bounds:
    """The Bounds of a ``--bounds`` setting: "auto", "scene" or six numbers (xmin ymin zmin
    xmax ymax zmax, world). ``points``/``normals``: :func:`consistent_points`. SpirulaError for
    another value or when nothing passed the consistency test."""
    c2w = np.asarray(c2w, np.float64)
    if isinstance(setting, (tuple, list)) and len(setting) == 6:
        b = np.asarray(setting, np.float64)
        if (b[3:] <= b[:3]).any():
            raise SpirulaError(f"--bounds {' '.join(map(str, setting))}: each max must be above its min")
        return Bounds("explicit", np.eye(3), b[:3], b[3:], "the box given (--bounds numbers), clipped, no cap")
    if setting not in ("auto", "scene"):
        raise SpirulaError(f"--bounds {setting!r}: choose auto, scene or six numbers xmin ymin zmin xmax ymax zmax")
    up = camera_up(c2w, normals=normals)
    conv = convergence(c2w)
    if setting == "scene":
        return scene_box(points, "everything the consistent depths give (--bounds scene)", conv=conv, up=up)
    if not conv.converges:
        why = ("the cameras do not converge: " +
               (f"only {conv.share:.0%} look at a common point in front of them" if conv.share < 0.7 else
                f"their axes are nearly parallel (spread {conv.spread:.3f})") + " (a room from inside, a pan or a walk); meshing the scene")
        return scene_box(points, why, conv=conv, up=up)
    box = object_box(points, normals, conv, up)
    if box is None:
        return scene_box(points, "the cameras converge, but few consistent points lie near where they look; "
                                 "meshing the scene", conv=conv, up=up)
    return box
