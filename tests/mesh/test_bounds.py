"""The bounds step (engine/mesh/bounds.py), one test per capture class a rule serves, and the
floor cut's flat cap (engine/mesh/extract.py cross_section / cap_layer)."""

import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

from engine.errors import SpirulaError
from engine.mesh.bounds import camera_up, convergence, object_box, resolve_bounds
from engine.mesh.extract import cross_section, extract_mesh
from engine.mesh.grid import grid_for_bounds
from engine.mesh.tsdf import fuse_depth_maps
from engine.pose import look_at
from tests.mesh.analytic import orbit_cameras, sphere_depth, table


def c2w_of(w2cs):
    return np.stack([np.linalg.inv(w) for w in w2cs])


def ring(rng, rot, count=24, arc=360.0, radius=2.0, height=1.0, target=(0.0, 0.0, 0.3)):
    """Cameras on an arc around ``target`` (world up = rot @ z), looking at it, a little jitter."""
    up = rot @ np.array([0.0, 0.0, 1.0])
    out = []
    for a in np.radians(np.linspace(0, arc, count, endpoint=arc < 360)):
        eye = rot @ np.array([radius * np.cos(a), radius * np.sin(a), height]) + rng.normal(0, 0.03, 3)
        out.append(look_at(eye, rot @ np.asarray(target) + rng.normal(0, 0.03, 3), up))
    return c2w_of(out), up


@pytest.mark.parametrize("arc", [360.0, 200.0])
def test_orbits_converge_on_what_they_circle_with_the_up_of_their_rows(arc):
    """Full and partial orbits (the object captures), in a world turned at random."""
    rng = np.random.default_rng(int(arc))
    rot = Rotation.random(random_state=int(arc)).as_matrix()
    c2w, up = ring(rng, rot, arc=arc)
    conv = convergence(c2w)
    assert conv.converges and conv.share > 0.9
    assert np.linalg.norm(conv.point - rot @ np.array([0.0, 0.0, 0.3])) < 0.05
    assert np.degrees(np.arccos(np.clip(camera_up(c2w) @ up, -1, 1))) < 2.0


def test_a_room_from_inside_a_pan_and_a_walk_do_not_converge():
    rng = np.random.default_rng(2)
    up = np.array([0.0, 0.0, 1.0])
    room = c2w_of([look_at(rng.normal(0, 0.1, 3), [np.cos(a), np.sin(a), 0.1], up)
                   for a in np.radians(np.arange(0, 360, 15))])            # looking out at the walls
    pan = c2w_of([look_at([0, 0, 1.5], [np.cos(a), np.sin(a), 1.4], up)
                  for a in np.radians(np.linspace(0, 20, 12))])             # turning on the spot, a little
    walk = c2w_of([look_at([0, t, 1.5], [0, t + 5, 1.4], up) for t in np.linspace(0, 3, 12)])
    for c2w, name in ((room, "room"), (pan, "pan"), (walk, "walk")):
        assert not convergence(c2w).converges, name
    # a room's turn gives the up (its rows turn all round); a small pan and a straight walk
    # the mean image up, off by their cameras' look down (5.7 degrees)
    assert camera_up(room) @ up > np.cos(np.radians(1))
    for c2w in (pan, walk):
        assert camera_up(c2w) @ up > np.cos(np.radians(6))


def box_scene(rng, floor=True, rot=np.eye(3)):
    """Points and normals of a 0.4 x 0.3 x 0.5 box standing on z = 0 at the origin, a floor
    disc of radius 1.5 around it, a wall 3 away and a floater cluster far off; all turned by
    ``rot``."""
    pts, nrm = [], []
    lo, hi = np.array([-0.2, -0.15, 0.0]), np.array([0.2, 0.15, 0.5])
    for axis in range(3):
        for side in (0, 1):
            if axis == 2 and side == 0:
                continue  # the bottom stands on the floor
            p = rng.uniform(lo, hi, (3000, 3))
            p[:, axis] = (lo, hi)[side][axis]
            n = np.zeros((3000, 3))
            n[:, axis] = 1 if side else -1
            pts.append(p)
            nrm.append(n)
    if floor:
        r, a = 1.5 * np.sqrt(rng.uniform(0, 1, 30000)), rng.uniform(0, 2 * np.pi, 30000)
        f = np.stack([r * np.cos(a), r * np.sin(a), rng.normal(0, 0.002, 30000)], 1)
        f = f[~((np.abs(f[:, 0]) < 0.2) & (np.abs(f[:, 1]) < 0.15))]
        pts.append(f)
        nrm.append(np.tile([0.0, 0.0, 1.0], (len(f), 1)))
    wall = np.stack([np.full(5000, 3.0), rng.uniform(-2, 2, 5000), rng.uniform(0, 2, 5000)], 1)
    pts += [wall, rng.normal([0.0, -2.5, 1.5], 0.05, (300, 3))]
    nrm += [np.tile([-1.0, 0.0, 0.0], (5000, 1)), np.zeros((300, 3))]
    return np.concatenate(pts) @ rot.T, np.concatenate(nrm) @ rot.T, lo, hi


@pytest.mark.parametrize("floor", [True, False], ids=["on-a-floor", "no-floor"])
def test_object_box_holds_the_object_and_stands_on_its_floor(floor):
    """An object on a floor (cut at the floor), and one whose table gave no consistent
    points (textureless: the box ends under its lowest points, nothing cut)."""
    rng = np.random.default_rng(4)
    rot = Rotation.random(random_state=4).as_matrix()
    c2w, up = ring(rng, rot, radius=2.0, height=1.2, target=(0.0, 0.0, 0.25))
    pts, nrm, lo, hi = box_scene(rng, floor, rot)
    b = resolve_bounds("auto", c2w, pts, nrm)
    assert b.mode == "object"
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2] + 0.02, hi[2])])
    assert b.contains(corners @ rot.T, tol=1e-9).all()
    size = b.hi - b.lo
    # the object's extent and its padding (5% and a cell a side), not the floor's 3 m
    assert np.all(np.abs(np.sort(size[:2]) - [0.3, 0.4] - 0.14) < 0.03), size
    assert b.frame[2] @ up > 0.999
    if floor:
        assert b.floor == pytest.approx(0.0, abs=0.01) and b.lo[2] == b.floor
        assert "floor" in b.reason
    else:   # the box's bottom at the object's lowest points
        assert b.floor is None and b.lo[2] == pytest.approx(0.0, abs=0.01)
    assert not b.contains(pts[-300:]).any()                                # the floater
    assert b.describe().startswith("bounds object")


def test_scene_and_explicit_bounds_and_bad_values():
    rng = np.random.default_rng(6)
    pts = rng.normal(0, 1, (5000, 3))
    c2w, _ = ring(rng, np.eye(3))
    b = resolve_bounds("scene", c2w, pts, np.zeros_like(pts))
    assert b.mode == "scene" and b.floor is None and b.contains(pts).mean() > 0.98
    e = resolve_bounds((0, 0, 0, 1, 2, 3), c2w, pts, np.zeros_like(pts))
    assert e.mode == "explicit" and e.aabb() == (0, 0, 0, 1, 2, 3)
    with pytest.raises(SpirulaError, match="auto, scene or six"):
        resolve_bounds("subject", c2w, pts, np.zeros_like(pts))
    with pytest.raises(SpirulaError, match="no consistent depth"):
        resolve_bounds("scene", c2w, pts[:3], np.zeros((3, 3)))
    # a room seen from inside is meshed as the scene, saying why
    room = c2w_of([look_at([0, 0, 0], [np.cos(a), np.sin(a), 0.0]) for a in np.radians(np.arange(0, 360, 20))])
    r = resolve_bounds("auto", room, pts, np.zeros_like(pts))
    assert r.mode == "scene" and "do not converge" in r.reason


def test_cross_section_fills_walled_interiors_only():
    """A solid's interior (unobserved, walled by the back of its surface: tsdf < 0) is inside;
    an unobserved pocket walled by empty space (under a chair's seat) is not."""
    t = np.ones((40, 40), np.float32)
    w = np.ones((40, 40), np.float32)
    t[5:15, 5:15], w[7:13, 7:13] = -0.5, 0.0          # a wall ring, its interior unobserved
    w[25:35, 25:35] = 0.0                               # a pocket no view saw, among empty space
    inside = cross_section(t, w)
    assert inside[5:15, 5:15].all()
    assert not inside[25:35, 25:35].any() and inside.sum() == 100


def test_floor_cut_is_closed_by_a_flat_cap(gpu):
    """A sphere cut at z = -0.4 by the cap layer: watertight, every vertex at or above the
    cut, the cut's vertices on one plane, and the cap's area the disc's."""
    radius, size = 1.0, 96
    cams = orbit_cameras(24, 3.0, size, 96.0)
    spec = grid_for_bounds([-1.2] * 3, [1.2] * 3, resolution=64)
    vol = fuse_depth_maps(gpu, spec, gpu.upload(table(cams)), [(size, size)] * len(cams),
                          lambda i: sphere_depth(cams[i], radius=radius))
    k = int(round((-0.4 - spec.origin[2]) / spec.voxel))
    v, f = extract_mesh(vol, cap_layer=k)
    cut = spec.origin[2] + k * spec.voxel           # half-way between layers k - 1 and k
    m = trimesh.Trimesh(v, f, process=False)
    assert m.is_watertight and m.volume > 0
    assert v[:, 2].min() >= cut - 1e-6
    on = np.abs(v[:, 2] - cut) < 1e-6
    disc = np.pi * (radius ** 2 - cut ** 2)
    cap = m.area_faces[on[f].all(1)].sum()
    assert abs(cap - disc) < 0.05 * disc, (cap, disc)
    # the cap's faces are marching cubes', not fans: no face much larger than a voxel's square
    assert m.area_faces[on[f].all(1)].max() <= spec.voxel ** 2 + 1e-9


def test_photos_from_one_side_take_the_up_from_the_table_they_look_down_on():
    """A few photos from one side, looking 45 degrees down (the rows do not turn: their image
    up is 45 degrees off): the up is the table's normal, perpendicular to the rows."""
    rng = np.random.default_rng(9)
    rot = Rotation.random(random_state=9).as_matrix()
    up = rot @ np.array([0.0, 0.0, 1.0])
    c2w = c2w_of([look_at(rot @ np.array([x, -1.0, 1.0]), rot @ np.array([x * 0.2, 0.0, 0.0]), up)
                  for x in np.linspace(-0.3, 0.3, 7)])
    assert -c2w[:, :3, 1].mean(0) @ up < np.cos(np.radians(30))       # the image up is far off
    pts, nrm, _, _ = box_scene(rng, True, rot)
    nrm = nrm + rng.normal(0, 0.05, nrm.shape)                          # rendered normals are noisy
    assert camera_up(c2w, normals=nrm) @ up > np.cos(np.radians(2))
