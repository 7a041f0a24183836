"""Analytic solids of the ground-truth scenes: exact ray intersection, signed distance and a
near-uniform surface sample, all NumPy, vectorised over rays and points.

Conventions: world units are metres, +z is up. A ray is ``o + t d`` with ``o`` [N, 3] and
``d`` [N, 3] float64; ``d`` need not be unit length (the caster passes camera rays whose
camera-space z is 1, so ``t`` is the camera depth). ``intersect`` returns the first hit with
``t > EPS`` and the unit normal there, facing the side the ray came from for solids (the
outward normal) and the inside for a :class:`Box` with ``inside=True`` (a room seen from
within); ``t`` is +inf where the ray misses. ``sdf`` is negative inside the solid; for an
inside-out box the solid is everything outside the box, so the room's walls bound it.

References: the slab test for boxes (Kay & Kajiya 1986); the ray-quadric intersection of
a sphere and of an infinite cylinder clipped to its z slab; the exact SDFs of a box, a
capped cylinder and a sphere (Quilez's distance-function notes, read for the formulas).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = 1e-9  # least ray parameter of a hit (rays start at camera centres, never on a surface)


def _safe(d: np.ndarray) -> np.ndarray:
    """``d`` with exact zeros replaced by a tiny positive number (slab tests divide by it)."""
    return np.where(d == 0.0, 1e-300, d)


@dataclass(frozen=True)
class Box:
    """An axis-aligned box lo..hi (each [3], metres). ``inside=True``: a room seen from
    within (hits where rays leave it; normals point inwards; the solid is its outside)."""

    lo: tuple[float, float, float]
    hi: tuple[float, float, float]
    inside: bool = False

    def intersect(self, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(t [N] float64, +inf on a miss; unit normal [N, 3] at the hit)."""
        inv = 1.0 / _safe(d)
        with np.errstate(invalid="ignore", over="ignore"):
            ta, tb = (np.asarray(self.lo) - o) * inv, (np.asarray(self.hi) - o) * inv
        near, far = np.minimum(ta, tb), np.maximum(ta, tb)
        t0 = np.maximum(np.maximum(near[:, 0], near[:, 1]), near[:, 2])
        t1 = np.minimum(np.minimum(far[:, 0], far[:, 1]), far[:, 2])
        if self.inside:
            t, axis = t1, np.where(far[:, 0] == t1, 0, np.where(far[:, 1] == t1, 1, 2))
            ok = (t0 <= t1) & (t1 > EPS)
        else:
            t, axis = t0, np.where(near[:, 0] == t0, 0, np.where(near[:, 1] == t0, 1, 2))
            ok = (t0 <= t1) & (t0 > EPS)
        n = np.zeros_like(d)
        rows = np.arange(len(d))
        n[rows, axis] = -np.sign(d[rows, axis])  # entering: the face against the ray; leaving a room: its inner side
        return np.where(ok, t, np.inf), n

    def sdf(self, p: np.ndarray) -> np.ndarray:
        """[N] signed distance (negative inside the solid)."""
        c, h = (np.asarray(self.lo) + self.hi) / 2, (np.asarray(self.hi) - self.lo) / 2
        q = np.abs(p - c) - h
        s = np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(1), 0.0)
        return -s if self.inside else s

    def sample(self, h: float) -> tuple[np.ndarray, np.ndarray]:
        """(points [M, 3], unit normals [M, 3]): a grid of spacing <= ``h`` on each of the six
        faces (cell centres), normals outward (inward for a room)."""
        lo, hi = np.asarray(self.lo, float), np.asarray(self.hi, float)
        pts, nrm = [], []
        for axis in range(3):
            a, b = [k for k in range(3) if k != axis]
            nu, nv = (max(1, int(np.ceil((hi[k] - lo[k]) / h))) for k in (a, b))
            u = lo[a] + (np.arange(nu) + 0.5) * (hi[a] - lo[a]) / nu
            v = lo[b] + (np.arange(nv) + 0.5) * (hi[b] - lo[b]) / nv
            uu, vv = (x.ravel() for x in np.meshgrid(u, v, indexing="ij"))
            for side, value in ((-1.0, lo[axis]), (1.0, hi[axis])):
                p = np.empty((len(uu), 3))
                p[:, axis], p[:, a], p[:, b] = value, uu, vv
                n = np.zeros_like(p)
                n[:, axis] = -side if self.inside else side
                pts.append(p)
                nrm.append(n)
        return np.concatenate(pts), np.concatenate(nrm)

    def area(self) -> float:
        e = np.asarray(self.hi, float) - self.lo
        return float(2 * (e[0] * e[1] + e[1] * e[2] + e[0] * e[2]))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.lo, float), np.asarray(self.hi, float)


@dataclass(frozen=True)
class Cylinder:
    """A solid vertical cylinder: axis through (cx, cy) along +z, ``radius``, from z0 to z1
    (metres), with flat caps."""

    cx: float
    cy: float
    radius: float
    z0: float
    z1: float

    def intersect(self, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(t [N], +inf on a miss; unit outward normal [N, 3])."""
        ox, oy = o[:, 0] - self.cx, o[:, 1] - self.cy
        a = d[:, 0] ** 2 + d[:, 1] ** 2
        b = 2 * (ox * d[:, 0] + oy * d[:, 1])
        c = ox ** 2 + oy ** 2 - self.radius ** 2
        disc = b * b - 4 * a * c
        vertical = a < 1e-300
        with np.errstate(invalid="ignore", divide="ignore"):
            sq = np.sqrt(np.maximum(disc, 0.0))
            tc0 = np.where(vertical, np.where(c < 0, -np.inf, np.inf), (-b - sq) / (2 * np.where(vertical, 1, a)))
            tc1 = np.where(vertical, np.where(c < 0, np.inf, -np.inf), (-b + sq) / (2 * np.where(vertical, 1, a)))
        miss_side = ~vertical & (disc < 0)
        inv = 1.0 / _safe(d[:, 2])
        with np.errstate(invalid="ignore", over="ignore"):
            za, zb = (self.z0 - o[:, 2]) * inv, (self.z1 - o[:, 2]) * inv
        tz0, tz1 = np.minimum(za, zb), np.maximum(za, zb)
        t0, t1 = np.maximum(tc0, tz0), np.minimum(tc1, tz1)
        ok = ~miss_side & (t0 <= t1) & (t0 > EPS)
        side = tc0 >= tz0
        p = o + np.where(np.isfinite(t0), t0, 0.0)[:, None] * d
        radial = np.stack([p[:, 0] - self.cx, p[:, 1] - self.cy, np.zeros(len(d))], 1) / self.radius
        cap = np.zeros_like(d)
        cap[:, 2] = -np.sign(d[:, 2])
        n = np.where(side[:, None], radial, cap)
        return np.where(ok, t0, np.inf), n

    def sdf(self, p: np.ndarray) -> np.ndarray:
        r = np.hypot(p[:, 0] - self.cx, p[:, 1] - self.cy) - self.radius
        z = np.abs(p[:, 2] - (self.z0 + self.z1) / 2) - (self.z1 - self.z0) / 2
        q = np.stack([r, z], 1)
        return np.linalg.norm(np.maximum(q, 0.0), axis=1) + np.minimum(q.max(1), 0.0)

    def sample(self, h: float) -> tuple[np.ndarray, np.ndarray]:
        """(points, outward normals): a (theta, z) grid on the side and a square grid of
        spacing ``h`` clipped to each cap's disc."""
        nt = max(8, int(np.ceil(2 * np.pi * self.radius / h)))
        nz = max(1, int(np.ceil((self.z1 - self.z0) / h)))
        th = (np.arange(nt) + 0.5) * 2 * np.pi / nt
        z = self.z0 + (np.arange(nz) + 0.5) * (self.z1 - self.z0) / nz
        tt, zz = (x.ravel() for x in np.meshgrid(th, z, indexing="ij"))
        side_n = np.stack([np.cos(tt), np.sin(tt), np.zeros_like(tt)], 1)
        side_p = np.stack([self.cx + self.radius * np.cos(tt), self.cy + self.radius * np.sin(tt), zz], 1)
        k = max(1, int(np.ceil(2 * self.radius / h)))
        g = -self.radius + (np.arange(k) + 0.5) * 2 * self.radius / k
        gx, gy = (x.ravel() for x in np.meshgrid(g, g, indexing="ij"))
        keep = gx ** 2 + gy ** 2 <= self.radius ** 2
        gx, gy = gx[keep], gy[keep]
        pts, nrm = [side_p], [side_n]
        for zc, sgn in ((self.z0, -1.0), (self.z1, 1.0)):
            pts.append(np.stack([self.cx + gx, self.cy + gy, np.full_like(gx, zc)], 1))
            nrm.append(np.tile([0.0, 0.0, sgn], (len(gx), 1)))
        return np.concatenate(pts), np.concatenate(nrm)

    def area(self) -> float:
        return float(2 * np.pi * self.radius * (self.z1 - self.z0) + 2 * np.pi * self.radius ** 2)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        r = self.radius
        return np.array([self.cx - r, self.cy - r, self.z0]), np.array([self.cx + r, self.cy + r, self.z1])


@dataclass(frozen=True)
class Sphere:
    """A solid sphere (centre [3], radius; metres)."""

    centre: tuple[float, float, float]
    radius: float

    def intersect(self, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        oc = o - np.asarray(self.centre)
        a = (d * d).sum(1)
        b = 2 * (oc * d).sum(1)
        c = (oc * oc).sum(1) - self.radius ** 2
        disc = b * b - 4 * a * c
        t = (-b - np.sqrt(np.maximum(disc, 0.0))) / (2 * a)
        ok = (disc >= 0) & (t > EPS)
        p = o + np.where(ok, t, 0.0)[:, None] * d
        return np.where(ok, t, np.inf), (p - np.asarray(self.centre)) / self.radius

    def sdf(self, p: np.ndarray) -> np.ndarray:
        return np.linalg.norm(p - np.asarray(self.centre), axis=1) - self.radius

    def sample(self, h: float) -> tuple[np.ndarray, np.ndarray]:
        """(points, outward normals) on a Fibonacci sphere of about one point per h^2."""
        n = max(32, int(np.ceil(4 * np.pi * self.radius ** 2 / h ** 2)))
        k = np.arange(n) + 0.5
        z = 1 - 2 * k / n
        phi = k * np.pi * (3 - np.sqrt(5))
        r = np.sqrt(1 - z * z)
        u = np.stack([r * np.cos(phi), r * np.sin(phi), z], 1)
        return np.asarray(self.centre) + self.radius * u, u

    def area(self) -> float:
        return float(4 * np.pi * self.radius ** 2)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        c = np.asarray(self.centre, float)
        return c - self.radius, c + self.radius


Shape = Box | Cylinder | Sphere
