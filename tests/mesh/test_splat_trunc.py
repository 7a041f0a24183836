"""The TSDF band follows the splats (engine/mesh/grid.py splat_trunc): depth maps of wide,
non-flat splats disagree between views by about a splat's extent, and a band narrower than
that fuses each view's surface into a sheet of its own (issue 21's book: a field of torn
sheets). Here a sphere whose every view's depth is off by its own amount of up to the
splats' standard deviation (NumPy ray-sphere depths, tests/mesh/analytic.py) must fuse into
one closed sphere with the band from the splats; at the fixed 4 voxels it does not."""

from __future__ import annotations

import numpy as np

from engine.mesh.clean import remove_small_components
from engine.mesh.extract import extract_mesh
from engine.mesh.grid import grid_for_bounds, splat_trunc
from engine.mesh.repair import is_watertight, largest_component_share
from engine.mesh.tsdf import fuse_depth_maps
from tests.mesh.analytic import orbit_cameras, sphere_depth, table


def _splats(rng, sigma, count=4000):
    """(means, log scales, logits) of splats on the unit sphere, largest sigma about ``sigma``."""
    d = rng.normal(size=(count, 3))
    means = d / np.linalg.norm(d, axis=1, keepdims=True)
    scales = np.log(np.stack([np.full(count, sigma) * rng.uniform(0.8, 1.2, count),
                              np.full(count, 0.3 * sigma), np.full(count, 0.05 * sigma)], 1))
    logits = np.full(count, 2.0)
    logits[rng.random(count) < 0.3] = -3.0     # transparent ones count for nothing
    scales[logits < 0, 0] = np.log(10 * sigma)
    return means, scales, logits


def test_band_from_the_splats(rng):
    sigma = 0.2
    means, scales, logits = _splats(rng, sigma)
    lo, hi = [-1.5] * 3, [1.5] * 3
    voxel = grid_for_bounds(lo, hi, resolution=96).voxel
    got = splat_trunc(means, scales, logits, lo, hi, voxel, trunc_voxels=4.0, max_trunc_voxels=16.0)
    assert abs(got - 2 * sigma) < 0.1 * sigma, (got, sigma)              # twice the opaque ones' median
    assert splat_trunc(means, scales - 3.0, logits, lo, hi, voxel) == 4.0 * voxel          # thin: the floor
    assert np.isclose(splat_trunc(means, scales + 3.0, logits, lo, hi, voxel), 16.0 * voxel)  # the cap
    assert splat_trunc(means + 10.0, scales, logits, lo, hi, voxel) == 4.0 * voxel   # none in the box


def _fused(gpu, cams, maps, trunc):
    spec = grid_for_bounds([-1.6] * 3, [1.6] * 3, resolution=96, trunc=trunc)
    vol = fuse_depth_maps(gpu, spec, gpu.upload(table(cams)), [(c[5], c[6]) for c in cams], lambda i: maps[i])
    return extract_mesh(vol, 2)


def test_views_that_disagree_by_a_splat_fuse_into_one_surface(gpu, rng):
    sigma = 0.15
    means, scales, logits = _splats(rng, sigma)
    cams = orbit_cameras(24, 3.5, 64, 64.0, seed_offset=rng.uniform(0.1, 0.9))
    offsets = rng.uniform(-sigma, sigma, len(cams))      # each view's depth of the surface
    maps = []
    for c, off in zip(cams, offsets):
        d, a = sphere_depth(c)
        maps.append((np.where(a > 0, d + off, 0.0).astype(np.float32), a))
    spec = grid_for_bounds([-1.6] * 3, [1.6] * 3, resolution=96)
    band = splat_trunc(means, scales, logits, [-1.6] * 3, [1.6] * 3, spec.voxel)
    narrow = _fused(gpu, cams, maps, 4.0 * spec.voxel)
    wide = _fused(gpu, cams, maps, band)
    r = np.linalg.norm(wide[0], axis=1)
    share_narrow = largest_component_share(*narrow) if len(narrow[1]) else 0.0
    print(f"\nband {band / spec.voxel:.1f} voxels: watertight {is_watertight(*wide)}, largest "
          f"{largest_component_share(*wide):.3f}, radius {r.mean():.3f} +- {r.std():.3f}; 4 voxels: "
          f"watertight {is_watertight(*narrow)}, largest {share_narrow:.3f}")
    # one closed surface: a stray speck of a few faces may survive the random draw (0.02% seen;
    # an open speck once in ~35 runs), so the largest component is the one that must be closed
    largest = remove_small_components(*wide, 0.5, 0)[:2]
    assert is_watertight(*largest) and largest_component_share(*wide) >= 0.995
    assert abs(r.mean() - 1.0) < 0.1 and r.std() < 0.05
    assert not (is_watertight(*narrow) and share_narrow >= 0.995)
