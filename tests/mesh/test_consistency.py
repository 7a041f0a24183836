"""The multi-view depth consistency filter (shaders/mesh/consistency.slang) against a NumPy
reference on fresh seeded inputs, and what it is for: a floater one view renders goes, the
sphere every view renders stays."""

import numpy as np

from spirula.engine.mesh.consistency import choose_neighbours, consistent_depths
from tests.mesh.analytic import orbit_cameras, sphere_depth, table


def reference_counts(cams, depths, neighbours, tol_rel):
    """(counts [V] of [H, W] int, ambiguous [V] of [H, W] bool): float64 NumPy version of the
    kernel; ambiguous marks pixels where some neighbour's test sits within float32 rounding
    of a decision (the tolerance edge, a pixel edge or centre, the image border)."""
    counts, ambiguous = [], []
    for i, ((w2c, fx, fy, cx, cy, w, h), d) in enumerate(zip(cams, depths)):
        u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
        rc = np.stack([(u - cx) / fx, (v - cy) / fy, np.ones_like(u)], -1) * d[..., None]
        X = (rc - w2c[:3, 3]) @ w2c[:3, :3]
        has = d > 0.01
        cnt = np.zeros((h, w), int)
        amb = np.zeros((h, w), bool)
        for j in neighbours[i]:
            if j < 0:
                break
            wj, fxj, fyj, cxj, cyj, ww, hh = cams[j]
            pc = X @ wj[:3, :3].T + wj[:3, 3]
            z = pc[..., 2]
            zs = np.where(z > 0.01, z, 1.0)
            uj, vj = fxj * pc[..., 0] / zs + cxj, fyj * pc[..., 1] / zs + cyj
            inside = has & (z > 0.01) & (uj >= 0) & (vj >= 0) & (uj < ww) & (vj < hh)
            ix = np.clip(np.floor(uj).astype(int), 0, ww - 1)
            iy = np.clip(np.floor(vj).astype(int), 0, hh - 1)
            dn = depths[j].astype(np.float64)
            dj = dn[iy, ix]
            bu, bv = uj - 0.5, vj - 0.5
            x0, y0 = np.floor(bu).astype(int), np.floor(bv).astype(int)
            ax, ay = bu - x0, bv - y0
            xa, xb = np.clip(x0, 0, ww - 1), np.clip(x0 + 1, 0, ww - 1)
            ya, yb = np.clip(y0, 0, hh - 1), np.clip(y0 + 1, 0, hh - 1)
            d00, d10, d01, d11 = dn[ya, xa], dn[ya, xb], dn[yb, xa], dn[yb, xb]
            four = (d00 > 0.01) & (d10 > 0.01) & (d01 > 0.01) & (d11 > 0.01)
            dj = np.where(four, (1 - ay) * ((1 - ax) * d00 + ax * d10) + ay * ((1 - ax) * d01 + ax * d11), dj)
            err = np.abs(dj - z) - tol_rel * z
            cnt += inside & (dj > 0.01) & (err <= 0)
            frac = lambda a: np.abs(a - np.round(a))
            amb |= has & ((np.abs(err) < 1e-4 * np.abs(z)) | (frac(uj) < 2e-3) | (frac(vj) < 2e-3)
                          | (frac(uj - 0.5) < 2e-3) | (frac(vj - 0.5) < 2e-3))
        counts.append(cnt)
        ambiguous.append(amb)
    return counts, ambiguous


def scene(rng, count=20, size=48):
    cams = orbit_cameras(count, 3.0, size, 1.1 * size, seed_offset=rng.uniform(0.1, 0.9))
    centre, radius = rng.normal(0, 0.05, 3), rng.uniform(0.8, 1.0)
    depths = []
    for c in cams:
        d, _ = sphere_depth(c, centre, radius)
        d = d * (1 + rng.normal(0, 0.002, d.shape)).astype(np.float32)   # a little noise
        depths.append(d.astype(np.float32))
    return cams, depths


def test_kernel_matches_numpy(gpu):
    rng = np.random.default_rng(11)
    cams, depths = scene(rng)
    for d in depths:   # random depths on random pixels: floaters, holes
        m = rng.random(d.shape) < 0.05
        d[m] = np.where(rng.random(m.sum()) < 0.3, 0.0, rng.uniform(0.5, 4.0, m.sum()))
    nb = choose_neighbours(np.stack([c[0] for c in cams]), np.array([c[1:] for c in cams], float), depths, count=5)
    tol = 0.01
    kept, counts = consistent_depths(gpu, gpu.upload(table(cams)), depths, nb, tol_rel=tol, min_agree=2)
    ref, amb = reference_counts(cams, depths, nb, tol)
    compared = 0
    for d, k, c, r, a in zip(depths, kept, counts, ref, amb):
        np.testing.assert_array_equal(c[~a], r[~a])
        np.testing.assert_array_equal(k[~a], np.where(r[~a] >= 2, d[~a], 0.0))
        compared += (~a & (d > 0)).sum()
    assert compared > 0.8 * sum((d > 0).sum() for d in depths)
    assert sum((r > 0).sum() for r in ref) > 0.5 * compared   # the test holds agreeing pixels as well as not


def test_a_floater_of_one_view_goes_and_the_surface_stays(gpu):
    rng = np.random.default_rng(5)
    cams, depths = scene(rng, count=24)
    d0 = depths[0]
    on = d0 > 0
    patch = np.zeros_like(on)
    patch[20:28, 20:28] = True
    d0[patch & on] *= 0.6           # a floater between camera 0 and the sphere
    nb = choose_neighbours(np.stack([c[0] for c in cams]), np.array([c[1:] for c in cams], float), depths)
    kept, _ = consistent_depths(gpu, gpu.upload(table(cams)), depths, nb, tol_rel=0.01, min_agree=2)
    assert (kept[0][patch & on] == 0).all()
    rest = [(k > 0).sum() / (d > 0).sum() for k, d in zip(kept, depths)]
    rest[0] = (kept[0][on & ~patch] > 0).sum() / (on & ~patch).sum()
    assert min(rest) > 0.85, rest


def test_neighbours_rank_overlap_and_skip_views_that_see_nothing_of_it():
    rng = np.random.default_rng(3)
    cams, depths = scene(rng, count=24)
    w2c = np.stack([c[0] for c in cams])
    intr = np.array([c[1:] for c in cams], float)
    nb = choose_neighbours(w2c, intr, depths, count=4)
    centres = np.stack([-w[:3, :3].T @ w[:3, 3] for w in w2c])
    for i, row in enumerate(nb):
        row = row[row >= 0]
        assert i not in row and len(row) > 0
        # the view on the far side of the sphere sees none of what view i sees
        far = int(np.argmin(centres @ centres[i]))
        assert far not in row
