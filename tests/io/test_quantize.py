"""The shared quantisation helpers of the splat formats, against references written here."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.io import quantize as q
from tests.splat.reference import quat_to_rotmat, sh_basis


def test_smallest_three_round_trip_keeps_the_rotation():
    rng = np.random.default_rng(0)
    quats = rng.standard_normal((500, 4))
    idx, rest = q.smallest_three(quats)
    assert np.all(np.abs(rest) <= np.sqrt(0.5) + 1e-12)
    back = q.from_smallest_three(idx, rest)
    assert np.allclose(quat_to_rotmat(back), quat_to_rotmat(quats), atol=1e-12)
    assert np.all(back[np.arange(500), idx] >= 0)


@pytest.mark.parametrize("flip", [(1, -1, -1), (-1, 1, 1), (-1, -1, 1)])
def test_sh_axis_signs_match_the_basis_under_the_flip(flip):
    d = np.random.default_rng(1).standard_normal((200, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    s = q.sh_axis_signs(flip, 3)
    assert np.allclose(sh_basis(d * np.asarray(flip), 3)[:, 1:], sh_basis(d, 3)[:, 1:] * s, atol=1e-12)


def test_kmeans_1d_is_exact_on_few_values_and_kmeans_finds_separated_clusters():
    v = np.random.default_rng(2).choice([-3.0, 0.5, 7.25], 1000)
    cb, lab = q.kmeans_1d(v, 256)
    assert np.array_equal(cb[lab].astype(np.float64), v) and np.all(np.diff(cb) >= 0)
    rng = np.random.default_rng(3)
    centres = rng.uniform(-10, 10, (8, 5))
    x = centres[rng.integers(0, 8, 4000)] + rng.normal(0, 0.01, (4000, 5))
    c, lab = q.kmeans(x, 32, fit_rows=1000)
    assert np.abs(c[lab] - x).max() < 0.1


def test_morton_order_is_a_permutation_that_keeps_neighbours_close():
    m = np.random.default_rng(4).uniform(0, 1, (4096, 3))
    order = q.morton_order(m)
    assert np.array_equal(np.sort(order), np.arange(4096))
    step = np.linalg.norm(np.diff(m[order], axis=0), axis=1).mean()
    rand = np.linalg.norm(np.diff(m, axis=0), axis=1).mean()
    assert step < rand / 4
