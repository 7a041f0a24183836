"""fit_plane's upright_tie (engine/mesh/plane.py): of two planes with nearly as many points,
the one nearer the orbit's up wins; a clearly fuller tilted plane still wins."""

import numpy as np

from engine.mesh.plane import fit_plane


def _two_planes(n_flat: int, n_tilted: int, seed: int):
    """A flat table (z = 0, normal +z) and a plane tilted 22 degrees about x, both
    sampled over [-1, 1]^2 with 2 mm of noise."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-1, 1, (n_flat, 2))
    flat = np.column_stack([xy, rng.normal(0, 0.002, n_flat)])
    t = np.radians(22.0)
    uv = rng.uniform(-1, 1, (n_tilted, 2))
    tilted = np.column_stack([uv[:, 0], uv[:, 1] * np.cos(t), 0.3 + uv[:, 1] * np.sin(t)])
    tilted += rng.normal(0, 0.002, tilted.shape)
    return np.vstack([flat, tilted])


def _normal_tilt_deg(found) -> float:
    return float(np.degrees(np.arccos(np.clip(found[0].normal @ np.array([0.0, 0.0, 1.0]), -1, 1))))


def test_a_near_tie_goes_to_the_plane_nearest_up():
    pts = _two_planes(950, 1000, seed=1)   # the tilted plane has 5% more points
    up = np.array([0.0, 0.0, 1.0])
    plain = fit_plane(pts, 0.01, np.random.default_rng(0), hypotheses=2048, up=up, max_tilt_deg=35.0)
    tie = fit_plane(pts, 0.01, np.random.default_rng(0), hypotheses=2048, up=up, max_tilt_deg=35.0, upright_tie=0.9)
    assert abs(_normal_tilt_deg(plain) - 22.0) < 2.0   # without it: the fuller, tilted plane
    assert _normal_tilt_deg(tie) < 2.0 and tie[0].inliers > 900


def test_a_clearly_fuller_tilted_plane_still_wins():
    pts = _two_planes(600, 1000, seed=2)
    found = fit_plane(pts, 0.01, np.random.default_rng(0), hypotheses=2048, up=np.array([0.0, 0.0, 1.0]),
                      max_tilt_deg=35.0, upright_tie=0.9)
    assert abs(_normal_tilt_deg(found) - 22.0) < 2.0
