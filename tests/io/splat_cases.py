"""Random Gaussians for the splat-format tests, and the comparisons they use (written from
the formats' definitions, not from spirula/engine/io's code)."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from spirula.engine.io.ply import GaussianPly
from tests.splat.reference import SH_C0, quat_to_rotmat

M_FOR_DEGREE = {0: 0, 1: 3, 2: 8, 3: 15}


def random_gaussians(rng: np.random.Generator, n: int, degree: int, *, extent: float = 5.0,
                     sh_range: float = 0.9) -> GaussianPly:
    """Fresh Gaussians within every format's range: centres in a cube of half size
    ``extent``, log sigma in [-6, 1], colours inside [0, 1] after SH_C0, SH in +-sh_range."""
    m = M_FOR_DEGREE[degree]
    rgb = rng.uniform(0.02, 0.98, (n, 3))
    return GaussianPly(
        means=rng.uniform(-extent, extent, (n, 3)).astype(np.float32),
        scales=rng.uniform(-6.0, 1.0, (n, 3)).astype(np.float32),
        quats=rng.standard_normal((n, 4)).astype(np.float32),
        opacities=rng.uniform(-5.0, 5.0, n).astype(np.float32),
        sh0=((rgb - 0.5) / SH_C0).astype(np.float32),
        shN=rng.uniform(-sh_range, sh_range, (n, m, 3)).astype(np.float32),
    )


def match(a: GaussianPly, b: GaussianPly) -> np.ndarray:
    """Index into ``a`` of each Gaussian of ``b`` (the nearest centre), for formats that
    reorder; asserts the matching is one to one."""
    _, j = cKDTree(np.asarray(a.means, np.float64)).query(np.asarray(b.means, np.float64))
    assert len(set(j.tolist())) == len(b) == len(a), "the Gaussians do not match one to one"
    return j


def rotation_error(qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """[N] largest entry of |R(qa) - R(qb)| (the rotation matrices of the quaternions w, x, y, z)."""
    return np.abs(quat_to_rotmat(np.asarray(qa, np.float64)) - quat_to_rotmat(np.asarray(qb, np.float64))).max(axis=(1, 2))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


def rgb(sh0):
    return 0.5 + SH_C0 * np.asarray(sh0, np.float64)
