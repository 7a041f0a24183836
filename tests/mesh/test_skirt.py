"""An orbit subject's skirt of support (engine/mesh/support.py ``drop_skirt``, run by
engine/mesh/repair.py ``repair_mesh``): sheets of table or floor fused a little over the cut
and joined to the subject go; legs touching the floor, a dome's lower rim and a wide flat
box's bottom stay. Scenes are signed distance fields made here with NumPy, meshed by
scikit-image's marching cubes (as the TSDF is), the support being the plane z = 0."""

from __future__ import annotations

import numpy as np
from skimage.measure import marching_cubes

from engine.mesh.plane import Plane
from engine.mesh.repair import is_watertight, repair_mesh

VOXEL = 0.015      # the marching cubes' voxel
CUT = 2 * VOXEL    # the cut over the support (as engine/jobs/mesh.py: at least 2 voxels)
CELL = 0.05        # the subject's coarse voxel
# what stays of the sheet beside a wall: the column test looks one grid cell (two edges of
# about a voxel) aside, and a face's cell is up to one more away from the wall's
BRIM = 5 * VOXEL
SHEET = 2 * CUT    # the fused sheets' height over the support: under it the subject is inside them
FLOOR = Plane(np.array([0.0, 0.0, 1.0]), 0.0, 1000, 0.0)


def _box(p, lo, hi):
    c, e = (np.asarray(lo) + hi) / 2, (np.asarray(hi) - lo) / 2
    q = np.abs(p - c) - e
    return np.linalg.norm(np.maximum(q, 0), axis=-1) + np.minimum(q.max(-1), 0)


def _mesh(sdf, lo, hi):
    """Marching cubes of sdf(points [..., 3]) over the box lo..hi at VOXEL."""
    axes = [np.arange(a, b + VOXEL / 2, VOXEL) for a, b in zip(lo, hi)]
    p = np.stack(np.meshgrid(*axes, indexing="ij"), -1)
    v, f, _, _ = marching_cubes(sdf(p), 0.0, spacing=(VOXEL,) * 3)
    return v + np.asarray(lo, float), f.astype(np.int64)


def _cells(inside, lo, hi):
    """Centres of the coarse voxels where inside(points) holds (the subject's occupied voxels)."""
    axes = [np.arange(a, b, CELL) + CELL / 2 for a, b in zip(lo, hi)]
    g = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    return g[inside(g)]


def _repair(v, f, cells):
    return repair_mesh(v, f, [-3, -3, -1], [3, 3, 3], FLOOR, CUT, close=True, cells=cells, cell=CELL)


def _slab(p, radius, top):
    """A disc of table radius wide, its top ``top`` over the support (a sheet of it fused there)."""
    return np.maximum(np.hypot(p[..., 0], p[..., 1]) - radius, np.maximum(p[..., 2] - top, -0.1 - p[..., 2]))


def test_a_sheet_of_table_round_a_dome_goes_and_its_lower_rim_stays():
    """A mouse-like half ellipsoid (0.6 x 0.4 wide, 0.5 high, walls upright at the table) on a
    disc of table 1.4 wide fused 0.06 over the support (twice the cut), which the subject's
    coarse voxels reach (table splats a voxel up): the disc goes, the dome's rim stays."""
    dome = lambda p: np.maximum(np.linalg.norm(p / [0.6, 0.4, 0.5], axis=-1) - 1.0, -p[..., 2]) * 0.4
    sdf = lambda p: np.minimum(dome(p), _slab(p, 1.4, SHEET))
    v, f = _mesh(sdf, [-1.5, -1.5, -0.12], [1.5, 1.5, 0.6])
    cells = _cells(lambda g: (dome(g) < 0.03) & (g[:, 2] > CELL) | (np.hypot(g[:, 0], g[:, 1]) < 1.3) & (g[:, 2] < 2 * CELL),
                   [-1.5, -1.5, 0], [1.5, 1.5, 0.6])
    v2, f2, rep = _repair(v, f, cells)
    ell = np.linalg.norm(v2[:, :2] / [0.6, 0.4], axis=1)
    assert ell.max() < 1.0 + BRIM / 0.4, ell.max()                      # nothing of the table around it
    assert is_watertight(v2, f2)
    low = v2[v2[:, 2] < SHEET + 1e-6]
    az = np.arctan2(low[:, 1] / 0.4, low[:, 0] / 0.6)
    rim = np.linalg.norm(low[:, :2] / [0.6, 0.4], axis=1) > 0.95               # its rim down at the sheet,
    assert len(np.unique(np.floor((az[rim] + np.pi) / (np.pi / 8)) % 16)) == 16     # all the way round


def test_floor_patches_at_a_chairs_legs_go_and_the_legs_stay_to_the_floor():
    """A seat 0.8 over the floor overhanging four legs 0.06 thick; a patch of floor 0.5 wide
    fused 0.06 over the support round each leg's foot (a glossy floor's reflections), under the
    seat: the patches go, each leg reaches down to them (inside them, no leg was meshed)."""
    feet = np.array([[-0.45, -0.45], [0.45, -0.45], [-0.45, 0.45], [0.45, 0.45]])
    seat = lambda p: _box(p, [-0.7, -0.7, 0.8], [0.7, 0.7, 0.9])
    legs = lambda p: np.min([_box(p, [x - 0.03, y - 0.03, -0.2], [x + 0.03, y + 0.03, 0.85]) for x, y in feet], 0)
    patches = lambda p: np.min([_slab(p - [x, y, 0], 0.25, SHEET) for x, y in feet], 0)
    sdf = lambda p: np.minimum(np.minimum(seat(p), legs(p)), patches(p))
    v, f = _mesh(sdf, [-0.8, -0.8, -0.12], [0.8, 0.8, 0.95])
    cells = _cells(lambda g: (np.minimum(seat(g), legs(g)) < 0.03) & (g[:, 2] > CELL) | (patches(g) < CELL),
                   [-0.8, -0.8, 0], [0.8, 0.8, 0.95])
    v2, f2, rep = _repair(v, f, cells)
    assert is_watertight(v2, f2)
    low = v2[v2[:, 2] < 0.5]
    off = np.abs(low[:, None, :2] - feet[None]).max(2).min(1)               # off the nearest leg's axis
    assert off.max() < 0.03 + BRIM, off.max()                             # no floor round the legs
    for x, y in feet:                                                          # each leg down to the sheet
        near = np.abs(v2[:, :2] - [x, y]).max(1) < 0.05
        assert v2[near, 2].min() < SHEET + 1e-6


def test_a_wide_flat_box_keeps_its_bottom_and_loses_its_skirt():
    """A box 1.6 wide and 0.3 high on a sheet of table 2.6 wide fused 0.06 over the support:
    its walls reach down to the sheet all round (corners included), the sheet beyond them goes."""
    box = lambda p: _box(p, [-0.8, -0.8, -0.2], [0.8, 0.8, 0.3])
    sdf = lambda p: np.minimum(box(p), _slab(p, 1.3, SHEET))
    v, f = _mesh(sdf, [-1.4, -1.4, -0.12], [1.4, 1.4, 0.4])
    cells = _cells(lambda g: (box(g) < 0.03) & (g[:, 2] > CELL) | (np.hypot(g[:, 0], g[:, 1]) < 1.2) & (g[:, 2] < 2 * CELL),
                   [-1.4, -1.4, 0], [1.4, 1.4, 0.4])
    v2, f2, rep = _repair(v, f, cells)
    assert is_watertight(v2, f2)
    assert np.abs(v2[:, :2]).max() < 0.8 + BRIM, np.abs(v2[:, :2]).max()
    bottom = v2[v2[:, 2] < SHEET + 1e-6]
    for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):                        # every corner down at the sheet
        assert np.abs(bottom[:, :2] - [0.8 * sx, 0.8 * sy]).max(1).min() < 2 * VOXEL
