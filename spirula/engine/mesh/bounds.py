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
   the multi-view consistency test (spirula/engine/mesh/consistency.py), within a sphere around
   the convergence point of ``region`` x the cameras' median distance D to it.

   a. *The support* (:func:`support_plane`; serves an object on a floor or a table, whatever
      the floor's depth noise): the up-facing points (normal within 25 degrees of up) not
      above the convergence point; their most populated height, refined as the median of
      those within 4 sigma of it, sigma their robust spread (1.4826 x median absolute
      deviation), when they are at least ``min_floor_share`` of the region's points. The
      trained floor is a sheet as thick as its depth noise, not a plane: its *band* is
      3 sigma above the plane (measured per capture: about 4 mm for a can seen from 0.5 m,
      3 cm for a floor seen from 3 m at 200 px). The plane is perpendicular to the up, not
      fitted: the mound a plain table grows around an object tilted a fitted one by 5 degrees.
   b. *What the photos measure* (:func:`photo_textured`; serves an object on a textureless
      support): a depth is only constrained where the image has texture; a plain table's
      trained geometry is free to rise into a mound around the object, consistent between
      views (the same splats) but measured by none. A point counts for the box when every
      view that sees it (its depth agrees there) has image contrast there above twice the
      image's noise (:func:`image_contrast`); an object with too few such points is boxed
      from its geometry alone (a textureless object).
   c. *The object*: the points above the support's band (all points when there is none),
      textured, in 26-connected cells of ``region / 32`` holding at least ``min_cell_points``
      points each (a cell is at least ~3 pixels wide at distance D, so a surface crossing it
      gives many points; isolated noise points above the band do not occupy one), one cell
      of dilation bridging small gaps; the component nearest to the convergence point. The
      box is their extent (0.2% .. 99.8% quantiles) padded by the consistency test's
      tolerance x D (the depth error the points may carry), in a frame whose third axis is
      up and whose first is their principal horizontal direction. Its bottom is the support
      (the mesh stage cuts the object just above it, clears the support's band around the
      object and closes the cut by a flat cap: spirula/engine/mesh/extract.py) or, without one, the
      object's lowest points (cut and capped there), so an object comes out closed whether
      its underside was seen or not.

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
    band: the support's thickness above ``floor`` (its points' spread, world units) that the
    mesh stage clears around the object (None: no support); reason: why."""

    mode: str
    frame: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    reason: str
    floor: float | None = None
    convergence: Convergence | None = None
    up: np.ndarray | None = None
    band: float | None = None
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
                "aabb": list(self.aabb()), "floor": self.floor, "band": self.band,
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


@dataclass
class Support:
    """The plane an object stands on, found in the trained geometry: normal [3] world unit
    (the up), height: the plane's offset along it (x . normal = height);
    sigma: the robust spread (1.4826 x median absolute deviation) of its points' distances
    to it, world units; points: how many points it was fitted to."""

    normal: np.ndarray
    height: float
    sigma: float
    points: int


def support_plane(points: np.ndarray, normals: np.ndarray, up: np.ndarray, top: float, cell: float,
                  min_share: float = 0.05, floor_cos: float = np.cos(np.radians(25.0)),
                  iterations: int = 4) -> Support | None:
    """The support under an object (module docstring, step 2a), a plane perpendicular to
    ``up``: among ``points`` [P, 3] whose ``normals`` [P, 3] face ``up`` (within 25 degrees)
    and lie below ``top`` + ``cell`` (heights along ``up``), the most populated height (bins
    of cell / 4: the support is the largest horizontal surface near where the cameras look),
    then ``iterations`` rounds of: the height the median of those within 4 sigma of it, sigma
    their robust spread (1.4826 x the median absolute deviation; the first round: the peak bin
    and its two neighbours). Its normal is ``up``, not a fit: the mound a plain table grows
    around an object would tilt a fitted plane, and the cameras' up is known to a degree. None
    when fewer than ``min_share`` of the points face up below ``top``."""
    h = points @ up
    flat = (normals @ up >= floor_cos) & (h < top + cell)
    if flat.sum() < max(8, min_share * len(points)):
        return None
    hf = h[flat]
    bins = np.floor((hf - top) / (0.25 * cell)).astype(np.int64)
    vals, counts = np.unique(bins, return_counts=True)
    layer = np.abs(bins - vals[np.argmax(counts)]) <= 1
    height, sigma = float(np.median(hf[layer])), 0.25 * cell
    for _ in range(iterations):
        height = float(np.median(hf[layer]))
        sigma = max(1.4826 * float(np.median(np.abs(hf[layer] - height))), 1e-6 * cell)
        nxt = np.abs(hf - height) <= 4.0 * sigma
        if nxt.sum() < 8:
            break
        layer = nxt
    return Support(np.asarray(up, np.float64), height, sigma, int(layer.sum()))


def object_box(points: np.ndarray, normals: np.ndarray, conv: Convergence, up: np.ndarray,
               textured=None, noise: float | None = None, region: float = 0.6,
               cells: int = 32, min_floor_share: float = 0.05, band_sigmas: float = 3.0,
               min_points: int = 64, min_cell_points: int = 3) -> Bounds | None:
    """The object box of the module docstring's step 2, or None when no object stands near
    the convergence point (fewer than ``min_points`` points in the region, or above its
    support). ``textured``: a function of points [Q, 3] -> [Q] bool, the points whose depth
    the photos constrain (:func:`photo_textured`; None: all); ``noise``: the points' depth error the box is padded
    by, world units (None: 1% of the cameras' distance, the consistency test's tolerance)."""
    radius = region * conv.distance
    p0 = conv.point
    noise = 0.01 * conv.distance if noise is None else float(noise)
    near = np.linalg.norm(points - p0, axis=1) <= radius
    pts, nrm = points[near], normals[near]
    if len(pts) < min_points:
        return None
    tex = np.ones(len(pts), bool) if textured is None else np.asarray(textured(pts), bool)
    cell = radius / cells
    # the support: a plane fitted to the up-facing points (textured or not: a plain table is a
    # plane in the trained geometry too), not above the look point (a flat object's look
    # point lies on it, a cell over its table)
    sup = support_plane(pts, nrm, up, float(p0 @ up), cell, min_floor_share)
    if sup is not None:
        up = sup.normal
    h = pts @ up
    band = band_sigmas * sup.sigma if sup is not None else 0.0
    above = h > sup.height + band if sup is not None else np.ones(len(h), bool)
    use = above & tex
    if use.sum() < min_points and textured is not None:   # an object without texture: its geometry alone
        use = above
    q = pts[use]
    if len(q) < min_points:
        return None
    # cells of the points above it, 26-connected after one cell of dilation; the component nearest p0
    ijk = np.floor((q - (p0 - radius)) / cell).astype(np.int64)
    n = 2 * cells + 1
    ijk = np.clip(ijk, 0, n - 1)
    occ = np.zeros((n, n, n), np.int64)
    np.add.at(occ, tuple(ijk.T), 1)
    occ = occ >= min_cell_points
    lab, count = ndimage.label(ndimage.binary_dilation(occ, np.ones((3, 3, 3), bool)), np.ones((3, 3, 3), bool))
    plab = np.where(occ[tuple(ijk.T)], lab[tuple(ijk.T)], 0)   # points of sparse cells belong to none
    centres = (ijk + 0.5) * cell + (p0 - radius)
    dist = np.where(plab > 0, np.linalg.norm(centres - p0, axis=1), np.inf)
    if not np.isfinite(dist).any():
        return None
    best = plab[int(np.argmin(dist))]
    obj = q[plab == best]
    # frame: up, and the object's principal horizontal direction
    hor = obj - obj.mean(0)
    hor -= np.outer(hor @ up, up)
    w, v = np.linalg.eigh(hor.T @ hor)
    frame = _frame(up, v[:, 2])
    f = obj @ frame.T
    lo, hi = np.quantile(f, 0.002, axis=0), np.quantile(f, 0.998, axis=0)
    lo, hi = lo - noise, hi + noise
    floor = sup.height if sup is not None else None
    stands = floor is not None and lo[2] <= floor + band + 2 * cell
    lo[2] = floor if stands else np.quantile(f[:, 2], 0.002)
    why_tex = ("" if textured is None or use.sum() == above.sum() else
               f" ({int((above & ~tex).sum()):,} on untextured image regions left out: their depth is not measured)")
    reason = (f"the cameras converge on ({', '.join(f'{x:.3g}' for x in p0)}) ({conv.share:.0%} look within 14 degrees); "
              f"the box holds the {len(obj):,} consistent points connected to it{why_tex}, padded by {noise:.3g}"
              + (f", standing on the floor or table at height {floor:.4g} (its points' spread {sup.sigma:.2g}: cut just above "
                 f"it, capped, and its {band:.2g} thick band cleared around the object)" if stands else
                 ", no support under it (cut at its lowest points and capped)"))
    return Bounds("object", frame, lo, hi, reason, floor=floor if stands else None, convergence=conv, up=up,
                  band=band if stands else None,
                  extra={"points": int(len(obj)), "region_radius": float(radius), "noise": noise,
                         "support": None if sup is None else {"normal": [float(x) for x in sup.normal],
                                                              "height": sup.height, "sigma": sup.sigma,
                                                              "points": sup.points}})


def image_contrast(image: np.ndarray, size: int = 5) -> tuple[np.ndarray, float]:
    """(contrast [H, W] float32, threshold) of one photo [H, W, 3] uint8 (or [H, W] grey in
    0..1): the standard deviation of its grey level (0..1) in a ``size`` x ``size`` window, and
    the contrast above which a pixel has texture: twice the image's noise (the robust
    estimate 1.4826 x median |Laplacian| / 6 of the 3 x 3 Laplacian mask [[1,-2,1],[-2,4,-2],
    [1,-2,1]], whose response to white noise of deviation s has deviation 6 s), and at
    least one grey level (1/255: below it an 8-bit photo holds no texture at all)."""
    im = np.asarray(image)
    g = (im[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32) / 255.0
         if im.ndim == 3 else im.astype(np.float32))
    m = ndimage.uniform_filter(g, size)
    m2 = ndimage.uniform_filter(g * g, size)
    contrast = np.sqrt(np.maximum(m2 - m * m, 0.0))
    lap = ndimage.convolve(g, np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], np.float32))
    noise = 1.4826 * float(np.median(np.abs(lap))) / 6.0
    return contrast, max(2.0 * noise, 1.0 / 255.0)


def photo_textured(points: np.ndarray, depths, w2c: np.ndarray, intrinsics: np.ndarray, contrast_of,
                   tol: float = 0.01, share: float = 1.0) -> np.ndarray:
    """[P] bool: the points whose depth the photos constrain (module docstring, step 2b). A
    view *sees* a point when the point projects into its image (nearest pixel) in front of it
    and the view's depth there (``depths``: V maps [H, W], 0 = none) agrees within ``tol`` x
    its depth; the point is textured when at least half of the views that see it have
    contrast there above their threshold (``contrast_of(i)``: (contrast [H, W], threshold) of
    view i, :func:`image_contrast`, asked once per view); a point no view sees is textured
    (nothing says otherwise). One vectorised pass per view."""
    points = np.asarray(points, np.float64)
    seen = np.zeros(len(points), np.int32)
    textured = np.zeros(len(points), np.int32)
    for i, dm in enumerate(depths):
        dm = np.asarray(dm)
        R, t = np.asarray(w2c[i])[:3, :3], np.asarray(w2c[i])[:3, 3]
        q = points @ R.T + t
        z = q[:, 2]
        fx, fy, cx, cy = intrinsics[i][:4]
        zs = np.where(z > 1e-9, z, 1.0)
        u = np.floor(fx * q[:, 0] / zs + cx)
        v = np.floor(fy * q[:, 1] / zs + cy)
        ok = (z > 1e-9) & (u >= 0) & (v >= 0) & (u < dm.shape[1]) & (v < dm.shape[0])
        ui, vi = u[ok].astype(np.int64), v[ok].astype(np.int64)
        d = dm[vi, ui]
        agree = (d > 0) & (np.abs(d - z[ok]) <= tol * z[ok])
        if not agree.any():
            continue
        idx = np.nonzero(ok)[0][agree]
        seen[idx] += 1
        contrast, threshold = contrast_of(i)
        textured[idx] += np.asarray(contrast)[vi[agree], ui[agree]] > threshold
    return textured >= share * seen


def object_voxel(bounds: Bounds, focal: float, resolution: int = 512, per_pixel: float = 4.0) -> float:
    """The voxel edge (world units) of an object box: ``resolution`` voxels along its longest
    side, but not finer than a ``per_pixel``-th of a pixel's footprint at the cameras'
    distance D to it (D / ``focal``, focal in pixels: the median fx): the fused depths hold
    no detail below their pixels, and a finer grid only spends the voxel budget (a small
    object seen from afar, scene c: 0.18 m at 3 m, 200 px wide, got 0.5 mm voxels for 17 mm
    pixels, and the budget then doubled the voxel and the truncation band with it). Serves
    every object capture; a scene box keeps its resolution."""
    longest = float(np.max(bounds.hi - bounds.lo))
    v = longest / max(int(resolution), 8)
    if bounds.convergence is not None and focal > 0:
        v = max(v, bounds.convergence.distance / focal / per_pixel)
    return v


def resolve_bounds(setting, c2w: np.ndarray, points: np.ndarray, normals: np.ndarray,
                   textured=None, tol: float = 0.01) -> Bounds:
    """The Bounds of a ``--bounds`` setting: "auto", "scene" or six numbers (xmin ymin zmin
    xmax ymax zmax, world). ``points``/``normals``: :func:`consistent_points`; ``textured``:
    a function of points [Q, 3] -> [Q] bool, :func:`photo_textured` (asked only for the
    points near where the cameras look; None: every point counts); ``tol``: the
    consistency test's relative depth tolerance (an object's box is padded by ``tol`` x the
    cameras' distance). SpirulaError for another value or when nothing passed the
    consistency test."""
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
    box = object_box(points, normals, conv, up, textured=textured, noise=tol * conv.distance)
    if box is None:
        return scene_box(points, "the cameras converge, but few consistent points lie near where they look; "
                                 "meshing the scene", conv=conv, up=up)
    return box
