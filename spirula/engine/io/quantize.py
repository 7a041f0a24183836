"""Numeric helpers shared by the compressed splat formats (SPZ, SOG, compressed PLY, .splat).

All functions are vectorised over N Gaussians (NumPy, no Python loop over them).

Conventions (the same as :class:`spirula.engine.io.ply.GaussianPly`):

- quaternions are [N, 4] in the order the caller names; the smallest-three helpers work on
  any order, the caller picks it (SPZ stores x, y, z, w; SOG and compressed PLY w, x, y, z);
- scales are log standard deviations, opacities are logits;
- colours: ``rgb = 0.5 + SH_C0 * sh0`` (the degree-0 SH basis constant), rgb in [0, 1];
- SH coefficients beyond the DC term are [N, M, 3] (coefficient-major, channel last).

Smallest-three ("largest dropped") quaternion coding: normalise, find the component of
largest magnitude, negate the quaternion if that component is negative (q and -q are the
same rotation), keep the other three in their original order. Each kept component lies in
[-1/sqrt(2), 1/sqrt(2)]; the dropped one is ``sqrt(1 - sum of the others squared)``.
"""

from __future__ import annotations

import numpy as np

from .ply_points import SH_C0

__all__ = [
    "SH_C0", "sigmoid", "logit", "unit_quats", "smallest_three", "from_smallest_three", "unorm", "from_unorm",
    "rgb_from_sh0", "sh0_from_rgb", "sh_basis", "sh_axis_signs", "kmeans_1d", "kmeans", "morton_order",
    "SH_COUNT",
]

SH_COUNT = {0: 0, 1: 3, 2: 8, 3: 15, 4: 24}   # coefficients per channel beyond the DC term, by degree
INV_SQRT2 = float(np.sqrt(0.5))


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function of [N] logits (float64 inside, no overflow warning)."""
    x = np.asarray(x, np.float64)
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def logit(p: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Inverse sigmoid of [N] probabilities clipped to [eps, 1 - eps] (a byte of 0 or 255
    would otherwise give an infinite logit)."""
    p = np.clip(np.asarray(p, np.float64), eps, 1.0 - eps)
    return np.log(p / (1.0 - p))


def unit_quats(q: np.ndarray) -> np.ndarray:
    """[N, 4] float64 unit quaternions (any component order); a zero or non-finite row
    becomes the identity in the first component (w for w, x, y, z)."""
    q = np.asarray(q, np.float64)
    n = np.linalg.norm(q, axis=1, keepdims=True)
    ok = (n[:, 0] > 0) & np.isfinite(n[:, 0])
    out = np.zeros_like(q)
    out[:, 0] = 1.0
    out[ok] = q[ok] / n[ok]
    return out


def smallest_three(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index [N] uint8 of the largest-magnitude component, the other three [N, 3] float64
    in their original order) of unit quaternions [N, 4] negated so the largest is >= 0."""
    q = unit_quats(q)
    idx = np.argmax(np.abs(q), axis=1)
    sign = np.where(q[np.arange(len(q)), idx] < 0, -1.0, 1.0)
    q = q * sign[:, None]
    keep = np.ones_like(q, bool)
    keep[np.arange(len(q)), idx] = False
    return idx.astype(np.uint8), q[keep].reshape(len(q), 3)


def from_smallest_three(idx: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Inverse of :func:`smallest_three`: [N, 4] float64 quaternions from the index [N] of
    the dropped component and the three others [N, 3]."""
    idx = np.asarray(idx, np.int64)
    rest = np.asarray(rest, np.float64)
    n = len(idx)
    big = np.sqrt(np.maximum(0.0, 1.0 - np.sum(rest * rest, axis=1)))
    q = np.empty((n, 4))
    keep = np.ones((n, 4), bool)
    keep[np.arange(n), idx] = False
    q[keep] = rest.reshape(-1)
    q[np.arange(n), idx] = big
    return q


def unorm(x: np.ndarray, bits: int) -> np.ndarray:
    """Round x in [0, 1] (clipped) to an unsigned integer of ``bits`` bits (uint32)."""
    top = (1 << bits) - 1
    return np.rint(np.clip(np.asarray(x, np.float64), 0.0, 1.0) * top).astype(np.uint32)


def from_unorm(v: np.ndarray, bits: int) -> np.ndarray:
    """[0, 2^bits - 1] integers -> float64 in [0, 1]."""
    return np.asarray(v, np.float64) / ((1 << bits) - 1)


def rgb_from_sh0(sh0: np.ndarray) -> np.ndarray:
    """Display colour in [0, 1] (unclipped) of DC coefficients [N, 3]."""
    return 0.5 + SH_C0 * np.asarray(sh0, np.float64)


def sh0_from_rgb(rgb: np.ndarray) -> np.ndarray:
    """DC coefficients [N, 3] of colours in [0, 1]."""
    return (np.asarray(rgb, np.float64) - 0.5) / SH_C0


def sh_basis(d: np.ndarray, degree: int) -> np.ndarray:
    """[N, (degree+1)^2 - 1] real SH basis values (degrees 1..3, without the DC term) of
    unit directions [N, 3], in the 3DGS order and signs (the order of ``shN``)."""
    x, y, z = (np.asarray(d, np.float64)[:, i] for i in range(3))
    cols = []
    if degree >= 1:
        c1 = 0.4886025119029199
        cols += [-c1 * y, c1 * z, -c1 * x]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        cols += [1.0925484305920792 * x * y, -1.0925484305920792 * y * z, 0.31539156525252005 * (2 * zz - xx - yy),
                 -1.0925484305920792 * x * z, 0.5462742152960396 * (xx - yy)]
    if degree >= 3:
        xx, yy, zz = x * x, y * y, z * z
        cols += [-0.5900435899266435 * y * (3 * xx - yy), 2.890611442640554 * x * y * z,
                 -0.4570457994644658 * y * (4 * zz - xx - yy), 0.3731763325901154 * z * (2 * zz - 3 * xx - 3 * yy),
                 -0.4570457994644658 * x * (4 * zz - xx - yy), 1.445305721320277 * z * (xx - yy),
                 -0.5900435899266435 * x * (xx - 3 * yy)]
    return np.stack(cols, axis=1) if cols else np.zeros((len(x), 0))


def sh_axis_signs(flip: tuple[float, float, float], degree: int = 3) -> np.ndarray:
    """[M] +-1: how each SH coefficient (beyond DC) changes sign when the axes are flipped
    by ``flip`` (e.g. (1, -1, -1): y and z negated). Every real SH basis function is even
    or odd in each axis, so ``Y(D d) = s * Y(d)``; the coefficients in the flipped frame are
    ``s * c``. Found by evaluating the basis at one generic direction."""
    d = np.array([[0.3, 0.5, 0.8]])
    d /= np.linalg.norm(d)
    a, b = sh_basis(d, degree)[0], sh_basis(d * np.asarray(flip, np.float64), degree)[0]
    return np.sign(a * b)


def kmeans_1d(values: np.ndarray, k: int = 256, iters: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """(codebook [k] float32 ascending, labels [len(values)] uint8/uint16): Lloyd's k-means
    on scalars, started from the quantiles. Assignment is by the midpoints between sorted
    centroids (searchsorted), so each iteration is O(n log k)."""
    v = np.asarray(values, np.float64).reshape(-1)
    if v.size == 0:
        return np.zeros(k, np.float32), np.zeros(0, np.uint8 if k <= 256 else np.uint16)
    c = np.quantile(v, (np.arange(k) + 0.5) / k)
    for _ in range(iters):
        c = np.sort(c)
        lab = np.searchsorted(0.5 * (c[1:] + c[:-1]), v)
        sums = np.bincount(lab, v, minlength=k)
        counts = np.bincount(lab, minlength=k)
        c = np.where(counts > 0, sums / np.maximum(counts, 1), c)
    c = np.sort(c).astype(np.float32)
    lab = np.searchsorted(0.5 * (c[1:].astype(np.float64) + c[:-1]), v)
    return c, lab.astype(np.uint8 if k <= 256 else np.uint16)


def _nearest(x: np.ndarray, c: np.ndarray, chunk: int = 16384) -> np.ndarray:
    """[N] index of the nearest row of c [K, D] for each row of x [N, D] (float32 BLAS,
    in chunks that bound the [chunk, K] distance block)."""
    cc = np.sum(c * c, axis=1)
    out = np.empty(len(x), np.int64)
    for s in range(0, len(x), chunk):  # over chunks of rows, not over Gaussians
        blk = x[s:s + chunk]
        out[s:s + chunk] = np.argmin(cc[None, :] - 2.0 * (blk @ c.T), axis=1)
    return out


def kmeans(x: np.ndarray, k: int, iters: int = 8, seed: int = 0,
           fit_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(centroids [k', D] float32, labels [N] int64) of Lloyd's k-means on the rows of x
    [N, D]; k' = min(k, N). Started from k' distinct random rows (seeded); an empty cluster
    keeps its centroid. With ``fit_rows``, the iterations run on that many random rows and
    only the final assignment on all N (the cost is rows x k x D per iteration)."""
    x = np.ascontiguousarray(x, np.float32)
    n = len(x)
    k = max(1, min(int(k), n))
    rng = np.random.default_rng(seed)
    fit = x if fit_rows is None or fit_rows >= n else x[rng.choice(n, max(int(fit_rows), k), replace=False)]
    c = fit[rng.choice(len(fit), k, replace=False)].copy()
    for _ in range(iters):
        lab = _nearest(fit, c)
        counts = np.bincount(lab, minlength=k).astype(np.float64)
        sums = np.stack([np.bincount(lab, fit[:, j], minlength=k) for j in range(x.shape[1])], axis=1)  # per dimension
        ok = counts > 0
        c[ok] = (sums[ok] / counts[ok, None]).astype(np.float32)
    return c, _nearest(x, c)


def morton_order(means: np.ndarray, bits: int = 10) -> np.ndarray:
    """[N] permutation sorting the centres [N, 3] along a Z-order (Morton) curve of their
    bounding box at ``bits`` bits per axis: neighbours in space become neighbours in the
    file, which the image and stream compressors exploit."""
    m = np.asarray(means, np.float64)
    if len(m) == 0:
        return np.zeros(0, np.int64)
    lo, hi = m.min(axis=0), m.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    q = np.clip(((m - lo) / span * ((1 << bits) - 1)).astype(np.uint64), 0, (1 << bits) - 1)
    code = np.zeros(len(m), np.uint64)
    for b in range(bits):  # over bits, not Gaussians
        for axis in range(3):
            code |= ((q[:, axis] >> np.uint64(b)) & np.uint64(1)) << np.uint64(3 * b + axis)
    return np.argsort(code, kind="stable")
