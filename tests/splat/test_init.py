"""Random initialisation without SfM points (spirula/engine/splat/init.py) on a synthetic room: a
subject at the origin, cameras orbiting it, walls far behind it. Every pixel's ray,
subject or wall, must start with splats along it, and few points may be wasted where no
camera looks."""

from pathlib import Path

import numpy as np
import pytest
from scipy.spatial import cKDTree

from spirula.engine.ingest.dataset import Camera, Dataset
from spirula.engine.splat.init import initial_points
from tests.splat.scenes import look_at_w2c

ROOM = 25.0   # walls at +-ROOM (x, z), floor and ceiling at +-ROOM/2 (y): past gsplat's cube (9.9)
ORBIT = 3.0
W, H = 64, 48


def orbit_dataset(rng, n_cams=24) -> Dataset:
    cams = []
    for k in range(n_cams):
        a = 2 * np.pi * k / n_cams + rng.uniform(-0.1, 0.1)
        eye = np.array([ORBIT * np.cos(a), rng.uniform(-0.5, 0.5), ORBIT * np.sin(a)])
        w2c = look_at_w2c(eye, rng.normal(0, 0.1, 3))
        f = rng.uniform(50, 70)
        cams.append(Camera(name=f"{k:03d}.png", image_path=Path(f"{k:03d}.png"), width=W, height=H, fx=f, fy=f,
                           cx=W / 2, cy=H / 2, w2c=w2c, image=np.zeros((H, W, 3), np.uint8)))
    return Dataset(root=Path("room"), cameras=cams)


def wall_distance(o, d):
    """Distance along unit rays d [R, 3] from o [R, 3] to the room's walls."""
    half = np.array([ROOM, ROOM / 2, ROOM])
    with np.errstate(divide="ignore"):
        t = np.where(d > 0, (half - o) / d, (-half - o) / d)
    return t.min(axis=1)


def rays(ds, rng, count):
    """(origins, unit directions, wall distance, hits the unit subject sphere) of random pixels."""
    pick = rng.integers(0, len(ds.cameras), count)
    o, d = np.empty((count, 3)), np.empty((count, 3))
    for j, i in enumerate(pick):
        c = ds.cameras[i]
        u, v = rng.uniform(0, W), rng.uniform(0, H)
        r = c.w2c[:3, :3].T @ np.array([(u - c.cx) / c.fx, (v - c.cy) / c.fy, 1.0])
        o[j], d[j] = c.center, r / np.linalg.norm(r)
    tc = -(o * d).sum(axis=1)  # closest approach to the origin
    subject = (tc > 0) & (np.linalg.norm(o + tc[:, None] * d, axis=1) < 1.0)
    return o, d, wall_distance(o, d), subject


def met(points, radius, o, d, t_lo, t_hi):
    """Per ray: does it pass within an initial splat's radius of its centre at a depth
    between t_lo and t_hi (near the surface it sees)?"""
    out = np.zeros(len(o), bool)
    for s in range(0, len(o), 100):
        rel = points[None] - o[s:s + 100, None]                          # [r, P, 3]
        t = np.einsum("rpk,rk->rp", rel, d[s:s + 100])
        perp = np.linalg.norm(rel - t[..., None] * d[s:s + 100, None], axis=2)
        near = (t > t_lo[s:s + 100, None]) & (t < t_hi[s:s + 100, None])
        out[s:s + 100] = ((perp < radius[None]) & near).any(axis=1)
    return out


def coverage(points, o, d, t_wall, subject):
    """(wall, subject): fractions of wall pixels with a splat near the wall (the last
    quarter of the ray before it) and of subject pixels with one inside the subject's
    sphere (depths within 1 of the orbit radius)."""
    dist, _ = cKDTree(points).query(points, k=4)
    radius = np.sqrt((dist[:, 1:] ** 2).mean(axis=1))  # the initial scale (gaussians_from_points)
    wall = met(points, radius, o[~subject], d[~subject], 0.75 * t_wall[~subject], 1.02 * t_wall[~subject])
    sub = met(points, radius, o[subject], d[subject], np.full(subject.sum(), ORBIT - 1.0),
              np.full(subject.sum(), ORBIT + 1.0))
    return wall.mean(), sub.mean()


@pytest.mark.parametrize("case", [0, 1])
def test_views_init_covers_the_far_walls_and_the_subject(case, rng):
    ds = orbit_dataset(rng)
    pts, cols = initial_points(ds, 20_000, rng, mode="views")
    assert pts.shape == (20_000, 3) and cols.shape == (20_000, 3) and np.isfinite(pts).all()
    o, d, t_wall, subject = rays(ds, rng, 800)
    assert (~subject).sum() > 200 and subject.sum() > 50
    wall, sub = coverage(pts.astype(np.float64), o, d, t_wall, subject)
    assert wall > 0.9 and sub > 0.9, (wall, sub)
    seen = np.zeros(len(pts), bool)  # nothing wasted behind the cameras or outside every view
    for c in ds.cameras:
        x = pts @ c.w2c[:3, :3].T + c.w2c[:3, 3]
        with np.errstate(divide="ignore", invalid="ignore"):
            u, v = c.fx * x[:, 0] / x[:, 2] + c.cx, c.fy * x[:, 1] / x[:, 2] + c.cy
        seen |= (x[:, 2] > 0) & (u >= 0) & (u < W) & (v >= 0) & (v < H)
    assert seen.mean() > 0.99


@pytest.mark.parametrize("mode", ["box", "small"])
def test_the_check_fails_for_inits_that_stop_short_of_the_walls(mode, rng):
    """The check can fail: gsplat's cube (half size 9.9 here) and the init this replaced (a
    cube of half the camera distance around the look point) leave the wall rays bare."""
    ds = orbit_dataset(rng)
    if mode == "box":
        pts = initial_points(ds, 20_000, rng, mode="box")[0].astype(np.float64)
    else:
        pts = rng.uniform(-ORBIT / 2, ORBIT / 2, (20_000, 3))
    o, d, t_wall, subject = rays(ds, rng, 400)
    wall, sub = coverage(pts, o, d, t_wall, subject)
    assert wall < 0.1 and sub > 0.9, (wall, sub)


def test_unknown_init_mode_is_refused():
    with pytest.raises(ValueError, match="views, box"):
        initial_points(orbit_dataset(np.random.default_rng(0)), 10, np.random.default_rng(0), mode="sphere")


def test_initial_scale_is_the_rms_distance_to_the_three_nearest_neighbours(rng):
    """3DGS's distCUDA2 / gsplat's knn init: sqrt of the mean squared distance to the 3
    nearest other points, checked by brute force (all pairwise distances, float64)."""
    from spirula.engine.splat.init import gaussians_from_points
    from spirula.engine.splat.param_layout import unpack

    pts = rng.normal(size=(300, 3)) * rng.uniform(0.1, 3.0, 3)
    cols = rng.integers(0, 256, (300, 3), dtype=np.uint8)
    d = np.linalg.norm(pts[:, None] - pts[None], axis=2)
    np.fill_diagonal(d, np.inf)
    near3 = np.sort(d, axis=1)[:, :3]
    want = np.sqrt((near3 ** 2).mean(axis=1))
    got = unpack(gaussians_from_points(pts, cols, 0, init_scale=1.0), 0)["scales"]
    assert np.allclose(np.exp(got), want[:, None], rtol=1e-5)
    assert not np.allclose(want, near3.mean(axis=1), rtol=1e-3)  # the mean would fail the check


def test_init_from_a_ply_notes_the_unknown_properties_it_drops(tmp_path):
    """`spirula train --init` (issue 49): a PLY's own properties are kept by `spirula export`
    but the training has no place for them; one note names them and the file."""
    from spirula.engine.io.ply import GaussianPly, write_ply
    from spirula.engine.splat.init import gaussians_from_file

    rng = np.random.default_rng(3)
    n = 40
    g = GaussianPly(means=rng.normal(size=(n, 3)).astype(np.float32),
                    scales=rng.normal(-3, 0.2, (n, 3)).astype(np.float32),
                    quats=rng.normal(size=(n, 4)).astype(np.float32), opacities=rng.normal(size=n).astype(np.float32),
                    sh0=rng.normal(size=(n, 3)).astype(np.float32), shN=np.zeros((n, 0, 3), np.float32),
                    extra={"label": rng.integers(0, 9, n).astype(np.int32),
                           "confidence": rng.random(n).astype(np.float32)})
    path = tmp_path / "labelled.ply"
    write_ply(path, g)
    rows, _, notes = gaussians_from_file(path, 0)
    assert len(rows) == n
    said = [t for t in notes if "confidence" in t]
    assert len(said) == 1 and "label" in said[0] and str(path) in said[0] and "\n" not in said[0]
    g.extra = {}
    write_ply(path, g)
    assert gaussians_from_file(path, 0)[2] == []  # nx, ny, nz and the rest are the format's own: no note
