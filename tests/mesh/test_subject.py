"""The subject finder (engine/mesh/subject.py) and the mesh repair (engine/mesh/repair.py)
on synthetic inputs made here with known answers: orbit cameras around a known point, a
forward walk, a noisy plane with outliers, a box of splat centres standing on a table in a
room, trimesh primitives with holes, sheets and far components. CPU only, a few seconds."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from engine.cli.main import build_parser
from engine.cli.mesh import config_from_args
from engine.errors import SpirulaError
from engine.mesh.repair import boundary_edges, is_watertight, largest_component_share, repair_mesh
from engine.mesh.subject import Plane, detect_orbit, find_subject, fit_plane, resolve_bounds
from tests.mesh.analytic import orbit_cameras
from tests.splat.scenes import look_at_w2c

UP = np.array([0.0, 0.0, 1.0])


def _c2w(eyes, targets):
    """[N, 4, 4] c2w of cameras at eyes looking at targets, image up = world +z."""
    return np.stack([np.linalg.inv(look_at_w2c(e, t, -UP)) for e, t in zip(eyes, targets)])


def _two_ring_orbit(rng, centre, radius, count=36, heights=(0.4, 1.0), jitter=0.0):
    az = rng.uniform(0, 2 * np.pi) + np.linspace(0, 2 * np.pi, count, endpoint=False)
    h = np.where(np.arange(count) % 2 == 0, heights[0], heights[1]) * radius
    eyes = centre + np.stack([radius * np.cos(az), radius * np.sin(az), h], 1)
    targets = centre + rng.normal(0, jitter, (count, 3))
    return _c2w(eyes, targets), eyes


def test_orbit_at_two_heights_recovers_the_look_point(rng):
    centre = rng.uniform(-5, 5, 3)
    c2w, eyes = _two_ring_orbit(rng, centre, 3.0, jitter=0.05)
    # a few cameras looking elsewhere must not pull the point
    c2w[:3] = _c2w(eyes[:3], eyes[:3] + rng.normal(0, 1, (3, 3)) * [1, 1, 0] + [0, 0, 4])
    orbit = detect_orbit(c2w)
    assert orbit.is_orbit
    assert np.linalg.norm(orbit.look_point - centre) < 0.05 * 3.0, (orbit.look_point, centre)
    assert orbit.up @ UP > 0.999 and orbit.azimuth_gap_deg < 42  # 3 of 36 left out: 40 deg


def test_forward_walk_and_facing_arc_are_not_orbits(rng):
    eyes = np.stack([np.linspace(0, 10, 40), rng.normal(0, 0.05, 40), 1.6 + rng.normal(0, 0.05, 40)], 1)
    ahead = eyes + [5.0, 0, 0] + rng.normal(0, 0.3, (40, 3))
    assert not detect_orbit(_c2w(eyes, ahead)).is_orbit
    # cameras on a 60 degree arc, all looking at one point: converge, but do not go around it
    az = np.radians(np.linspace(-30, 30, 20))
    arc = np.stack([4 * np.cos(az), 4 * np.sin(az), np.full(20, 1.0)], 1)
    o = detect_orbit(_c2w(arc, np.zeros((20, 3))))
    assert not o.is_orbit and o.azimuth_gap_deg > 250 and np.linalg.norm(o.look_point) < 0.1


def test_ransac_plane_on_noisy_points_with_outliers(rng):
    n = np.array([0.15, -0.1, 1.0])
    n /= np.linalg.norm(n)
    offset = rng.uniform(-1, 1)
    e1 = np.cross(n, [1.0, 0, 0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    uv = rng.uniform(-2, 2, (3000, 2))
    sigma = 0.003
    on = uv[:, :1] * e1 + uv[:, 1:] * e2 - offset * n + rng.normal(0, sigma, (3000, 1)) * n
    out = rng.uniform(-2, 2, (2000, 3)) + [0, 0, 1.0]
    pts = np.concatenate([on, out])
    cams = rng.uniform(-2, 2, (20, 3)) * [1, 1, 0] + [0, 0, 3.0]
    plane, inl = fit_plane(pts, 0.01, rng, up=UP, above=cams)
    assert np.degrees(np.arccos(min(1.0, plane.normal @ n))) < 0.5
    assert abs(plane.offset - offset) < 3 * sigma
    assert inl[:3000].mean() > 0.9 and inl[3000:].mean() < 0.05
    assert plane.thickness < 10 * sigma
    # cameras on both sides of the plane: no support plane
    assert fit_plane(pts, 0.01, rng, up=UP, above=np.concatenate([cams, cams * [1, 1, -1]])) is None


def _box_surface(rng, lo, hi, count, bottom=True):
    """Area-uniform samples on the faces of the box [lo, hi] (without its -z face when
    ``bottom`` is False: a box standing on a table is never seen from below)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    p = rng.uniform(lo, hi, (count, 3))
    size = hi - lo
    areas = np.array([size[1] * size[2], size[0] * size[2], size[0] * size[1]])
    axis = rng.choice(3, count, p=areas / areas.sum())
    side = rng.integers(0, 2, count)
    if not bottom:
        side[axis == 2] = 1
    p[np.arange(count), axis] = np.where(side == 1, hi[axis], lo[axis])
    return p


def test_box_on_a_table_in_a_room_is_found_and_cut_at_the_table(rng):
    lo_true, hi_true = np.array([-0.3, -0.2, 0.0]), np.array([0.25, 0.3, 0.45])
    subject = _box_surface(rng, lo_true, hi_true, 15000)
    table = np.concatenate([rng.uniform(-1.5, 1.5, (20000, 2)), rng.normal(0, 0.002, (20000, 1))], 1)
    room = _box_surface(rng, [-6, -6, -1], [6, 6, 4], 20000)
    floaters = rng.uniform(-2, 2, (200, 3)) + [0, 0, 1.0]
    means = np.concatenate([subject, table, room, floaters])
    logits = np.full(len(means), 3.0)
    logits[rng.random(len(means)) < 0.1] = -3.0          # some transparent splats anywhere
    scales = np.log(np.full((len(means), 3), 0.005))
    c2w, _ = _two_ring_orbit(rng, np.array([0, 0, 0.2]), 2.0, 48, jitter=0.02)
    intr = np.tile([200.0, 200.0, 100.0, 75.0, 200, 150], (len(c2w), 1))
    sb = find_subject(c2w, means, logits, scales, intr)
    assert sb.found == "subject" and sb.plane is not None, sb.reason
    assert sb.plane.normal @ UP > 0.999 and abs(sb.plane.offset) < 0.005
    vox = sb.extra["coarse_voxel"]
    # the grown box: the true box within 2 coarse voxels (1 of padding); the bottom at the table
    assert np.all(np.abs(sb.hi - hi_true) < 2 * vox), (sb.hi, hi_true, vox)
    assert np.all(np.abs(sb.lo[:2] - lo_true[:2]) < 2 * vox), (sb.lo, lo_true, vox)
    assert -3 * vox < sb.lo[2] < 0.0
    assert sb.to_json()["plane"]["normal"][2] > 0.999


def test_textureless_table_gives_a_base_plane_under_the_box(rng):
    """A textureless table holds almost no opaque splats (the photometric loss cannot place
    them): no RANSAC plane, but the box still gets closed under its lowest splats."""
    lo_true, hi_true = np.array([-0.3, -0.2, 0.0]), np.array([0.25, 0.3, 0.45])
    subject = _box_surface(rng, lo_true, hi_true, 15000, bottom=False)
    table = np.concatenate([rng.uniform(-1.5, 1.5, (25, 2)), rng.normal(0, 0.1, (25, 1))], 1)
    room = _box_surface(rng, [-6, -6, -1], [6, 6, 4], 20000)
    means = np.concatenate([subject, table, room])
    scales = np.log(np.full((len(means), 3), 0.005))
    c2w, _ = _two_ring_orbit(rng, np.array([0, 0, 0.2]), 2.0, 48, jitter=0.02)
    sb = find_subject(c2w, means, np.full(len(means), 3.0), scales)
    assert sb.found == "subject" and sb.plane is not None and sb.plane.source == "base", sb.reason
    vox = sb.extra["coarse_voxel"]
    assert sb.plane.normal @ UP > 0.999 and abs(sb.plane.offset) < 0.5 * vox, (sb.plane, vox)
    assert -3 * vox < sb.lo[2] < -vox and "lowest splats" in sb.reason
    assert np.all(np.abs(sb.hi - hi_true) < 2 * vox)


def test_torus_around_the_look_point_is_not_cut(rng):
    """The look point is in the torus' hole, the cameras all around (also below): subject
    found, no support plane, the box holds the whole torus."""
    u, v = rng.uniform(0, 2 * np.pi, (2, 20000))
    ring = 0.75 + 0.3 * np.cos(v)
    pts = np.stack([ring * np.cos(u), ring * np.sin(u), 0.3 * np.sin(v)], 1)
    c2w = np.stack([np.linalg.inv(c[0]) for c in orbit_cameras(24, 3.2, 128, 140.0)])
    sb = find_subject(c2w, pts, np.full(len(pts), 4.0), np.full((len(pts), 3), -5.0))
    assert sb.found == "subject" and sb.plane is None, sb.reason
    assert np.all(sb.lo <= pts.min(0)) and np.all(sb.hi >= pts.max(0))


def test_non_orbit_falls_back_to_the_scene_bounds(rng):
    eyes = np.stack([np.linspace(0, 10, 30), np.zeros(30), np.ones(30)], 1)
    pts = rng.uniform(-1, 12, (5000, 3))
    sb = find_subject(_c2w(eyes, eyes + [5.0, 0, 0]), pts, np.full(5000, 2.0))
    assert sb.found == "scene" and not sb.orbit.is_orbit and "not an orbit" in sb.reason
    assert sb.lo[0] < 0 and sb.hi[0] > 11


def test_resolve_bounds_settings(rng):
    pts, logits = rng.uniform(-1, 1, (500, 3)), np.full(500, 2.0)
    c2w = np.stack([np.linalg.inv(c[0]) for c in orbit_cameras(12, 3.0, 64, 64.0)])
    assert resolve_bounds("scene", c2w, pts, logits).found == "scene"
    ex = resolve_bounds((0, 0, 0, 1, 2, 3), c2w, pts, logits)
    assert ex.found == "explicit" and ex.box == (0, 0, 0, 1, 2, 3)
    for bad in ("everything", (0, 0, 0, 1, 1), (0, 0, 0, -1, 1, 1)):
        with pytest.raises(SpirulaError, match="bounds"):
            resolve_bounds(bad, c2w, pts, logits)


@pytest.mark.parametrize("argv,expected", [([], "auto"), (["--bounds", "scene"], "scene"),
                                            (["--bounds", "AUTO"], "auto"),
                                            (["--bounds", "0", "0", "0", "1", "1", "1.5"], (0, 0, 0, 1, 1, 1.5))])
def test_cli_bounds(argv, expected):
    args = build_parser().parse_args(["mesh", "p", *argv])
    assert config_from_args(args).bounds == expected


@pytest.mark.parametrize("argv", [["auto", "1"], ["0", "0", "0", "1", "1"], ["0", "0", "0", "1", "-1", "1"]])
def test_cli_bad_bounds(argv, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["mesh", "p", "--bounds", *argv])
    assert "argument --bounds: must" in capsys.readouterr().err


# ----- repair ---------------------------------------------------------------------------------

def test_punched_hole_is_filled_watertight(rng):
    s = trimesh.creation.icosphere(4, radius=rng.uniform(0.5, 2))
    v, f = np.asarray(s.vertices), np.asarray(s.faces)
    d = rng.normal(0, 1, 3)
    d /= np.linalg.norm(d)
    c = v[f].mean(1) @ d
    f = f[c < np.sort(c)[-12]]                        # punch out the 12 faces nearest to d
    assert not is_watertight(v, f) and 6 <= len(boundary_edges(f)) <= 100
    v2, f2, rep = repair_mesh(v, f)
    assert rep["holes_filled"] == 1 and rep["watertight_after"] and not rep["watertight_before"]
    assert is_watertight(v2, f2)
    # the filled sphere holds nearly the exact volume again
    assert abs(trimesh.Trimesh(v2, f2).volume / s.volume - 1) < 0.01


def test_cut_below_the_plane_is_capped_flat(rng):
    r, h = 1.0, rng.uniform(-0.5, 0.5)                # cut a unit sphere at height h
    s = trimesh.creation.icosphere(5, radius=r)
    plane = Plane(UP.copy(), 0.0)
    v, f, rep = repair_mesh(s.vertices, s.faces, plane=plane, cut=h)
    assert v[:, 2].min() > h - 1e-9 and rep["watertight_after"]
    m = trimesh.Trimesh(v, f)
    cap = np.abs(m.triangles_center[:, 2] - h) < 1e-9
    assert abs(m.area_faces[cap].sum() / (np.pi * (r * r - h * h)) - 1) < 0.01
    # spherical cap volume pi (r - h)^2 (2r + h) / 3
    assert abs(m.volume / (np.pi * (r - h) ** 2 * (2 * r + h) / 3) - 1) < 0.02


def test_components_outside_the_bounds_are_dropped():
    a = trimesh.creation.icosphere(3, radius=0.5)
    b = trimesh.creation.box([0.4, 0.4, 0.4])
    b.apply_translation([3.0, 0, 0])
    v = np.concatenate([a.vertices, b.vertices])
    f = np.concatenate([a.faces, b.faces + len(a.vertices)])
    v2, f2, rep = repair_mesh(v, f, lo=[-1, -1, -1], hi=[1, 1, 1], min_component_faces=1)
    assert len(f2) == len(a.faces) and v2[:, 0].max() < 1 and rep["watertight_after"]


def test_sheet_on_the_plane_is_cut_away_and_the_object_closed(rng):
    obj = trimesh.creation.cylinder(radius=0.3, height=0.6, sections=48)
    obj.apply_translation([0, 0, 0.3])               # stands on z = 0
    sheet = trimesh.creation.box([3.0, 3.0, 0.01])   # the table's torn surface around it
    sheet.apply_translation([0, 0, 0.002])
    grid = trimesh.remesh.subdivide_to_size(sheet.vertices, sheet.faces, 0.05)
    gv = grid[0] + rng.normal(0, 0.001, grid[0].shape)
    v = np.concatenate([obj.vertices, gv])
    f = np.concatenate([obj.faces, grid[1] + len(obj.vertices)])
    v2, f2, rep = repair_mesh(v, f, lo=[-2, -2, -1], hi=[2, 2, 2], plane=Plane(UP.copy(), 0.0), cut=0.03)
    assert rep["watertight_after"] and rep["largest_share_after"] == 1.0
    assert np.abs(v2[:, :2]).max() < 0.3 + 1e-6      # nothing of the sheet beyond the object
    assert v2[:, 2].min() > 0.03 - 1e-9


def _office_chair(rng, lift=0.0):
    """(means [M, 3], logits [M]) of a chair on a glossy floor (z = 0, metres): a flat seat
    (z 0.45) and a backrest of opaque splats; a pole of translucent fog only (a thin dark part
    at a small training size); a 5-legged star base near the floor; the floor sparse (glossy:
    few opaque splats), the chair mirrored under it in translucent splats (the reflection).
    lift: the base and pole raised by this much (casters no splat holds: a gap under the base)."""
    seat = np.concatenate([rng.uniform(-0.25, 0.25, (3000, 2)), np.full((3000, 1), 0.45)], 1)
    back = np.stack([rng.uniform(-0.22, 0.22, 3000), np.full(3000, -0.27), rng.uniform(0.5, 1.0, 3000)], 1)
    t, leg = rng.uniform(0, 1, 1500), rng.integers(0, 5, 1500)
    ang = 2 * np.pi * leg / 5
    base = np.stack([0.33 * t * np.cos(ang), 0.33 * t * np.sin(ang), 0.12 - 0.07 * t + lift], 1) + rng.normal(0, 0.015, (1500, 3))
    pole = np.stack([rng.normal(0, 0.06, 400), rng.normal(0, 0.06, 400), rng.uniform(0.12 + lift, 0.42, 400)], 1)
    r, a = 2.5 * np.sqrt(rng.uniform(0, 1, 2500)), rng.uniform(0, 2 * np.pi, 2500)
    floor = np.stack([r * np.cos(a), r * np.sin(a), rng.normal(0, 0.003, 2500)], 1)
    chair = np.concatenate([seat, back, base])
    means = np.concatenate([chair, chair * [1, 1, -1], floor, pole])
    logits = np.full(len(means), 3.0)
    logits[len(chair):2 * len(chair)] = -2.0                    # opacity 0.12
    logits[-len(pole):] = -3.5                                  # opacity 0.03
    return means, logits


@pytest.mark.parametrize("lift", [0.0, 0.12])
def test_chair_on_a_glossy_floor_is_cut_at_the_floor_with_its_base(lift, rng):
    """Issue 21's office chair: RANSAC took the flat seat for the support (the glossy floor
    holds few opaque splats) and the cut took everything under it; the base, apart from the
    seat on the coarse grid (the pole is fog), was left out of the box. lift 0.12: the chair
    video's casters held no opaque splats, its base floated 5 coarse voxels over the floor
    (1/6 of the chair's height), and the floor was dropped for a plane under the seat."""
    means, logits = _office_chair(rng, lift)
    scales = np.log(np.full((len(means), 3), 0.005))
    c2w, _ = _two_ring_orbit(rng, np.array([0, 0, 0.65]), 1.6, 48, jitter=0.02)
    sb = find_subject(c2w, means, logits, scales)
    assert sb.found == "subject" and sb.plane is not None and sb.plane.source == "table", sb.reason
    assert sb.plane.normal @ UP > 0.999 and abs(sb.plane.offset) < 0.01, sb.plane   # the floor, not the seat
    assert sb.lo[2] < 0.0 and sb.hi[2] > 0.95                                      # base to backrest
    assert np.all(sb.lo[:2] < -0.3) and np.all(sb.hi[:2] > 0.3), (sb.lo, sb.hi)   # the legs' ends


def test_box_on_a_textureless_table_does_not_stand_on_the_floor(rng):
    """The floor under a textureless table is a fine support plane for RANSAC, but the box
    floats over it by more than its own height: no base reaches it, the box is closed under
    its lowest splats (a base plane), and the table's legs outside its footprint stay out."""
    top = 0.7
    lo_true, hi_true = np.array([-0.2, -0.15, top]), np.array([0.2, 0.15, top + 0.35])
    subject = _box_surface(rng, lo_true, hi_true, 15000, bottom=False)
    r, a = 2.5 * np.sqrt(rng.uniform(0, 1, 20000)), rng.uniform(0, 2 * np.pi, 20000)
    floor = np.stack([r * np.cos(a), r * np.sin(a), rng.normal(0, 0.003, 20000)], 1)
    legs = np.concatenate([np.stack([np.full(500, x), np.full(500, y), rng.uniform(0, top, 500)], 1)
                           + rng.normal(0, 0.01, (500, 3)) for x in (-0.8, 0.8) for y in (-0.5, 0.5)])
    means = np.concatenate([subject, floor, legs])
    scales = np.log(np.full((len(means), 3), 0.005))
    c2w, _ = _two_ring_orbit(rng, np.array([0, 0, top + 0.15]), 1.6, 48, jitter=0.02)
    sb = find_subject(c2w, means, np.full(len(means), 3.0), scales)
    assert sb.found == "subject" and sb.plane is not None and sb.plane.source == "base", sb.reason
    vox = sb.extra["coarse_voxel"]
    assert abs(sb.plane.offset + top) < 0.5 * vox, (sb.plane, vox)
    assert top - 3 * vox < sb.lo[2] < top and np.all(np.abs(sb.hi - hi_true) < 2 * vox), (sb.lo, sb.hi)


def _rotation(rng):
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def test_photos_of_a_book_on_a_table_flatten_the_table_and_drop_what_lies_under_it(rng):
    """Issue 21's book: 7 photos from one side of a book on a table (no orbit: the scene is
    meshed). Few fuzzy views tore the table into sheets at several heights, a quarter of them
    under it. The table is found as the scene's support (all cameras on its front side), its
    layer flattened onto it, what lies under it cut; the book on it stays as it was.
    The scene is rotated at random: nothing may depend on the world axes."""
    rot, shift = _rotation(rng), rng.uniform(-5, 5, 3)
    world = lambda p: np.asarray(p) @ rot.T + shift
    up = rot @ UP
    # splat centres: a table (z = 0), a book (0.4 x 0.3 x 0.06) on it, ghosts under the table, floaters
    table = np.concatenate([rng.uniform(-1.5, 1.5, (6000, 2)), rng.normal(0, 0.01, (6000, 1))], 1)
    book = _box_surface(rng, [-0.2, -0.15, 0.0], [0.2, 0.15, 0.06], 3000, bottom=False)
    ghosts = np.concatenate([rng.uniform(-1.5, 1.5, (1000, 2)), rng.uniform(-0.6, -0.1, (1000, 1))], 1)
    floaters = rng.uniform(-1.5, 1.5, (500, 3)) * [1, 1, 0.5] + [0, 0, 0.8]
    means = world(np.concatenate([table, book, ghosts, floaters]))
    # seven cameras on a 90 degree arc, 55-65 degrees up, looking at the book
    az = np.radians(np.linspace(-45, 45, 7)) + rng.uniform(0, 2 * np.pi)
    el = np.radians(rng.uniform(55, 65, 7))
    eyes = 1.8 * np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], 1)
    c2w = np.stack([np.linalg.inv(look_at_w2c(world(e), world(rng.normal(0, 0.05, 3)), -up)) for e in eyes])
    sb = find_subject(c2w, means, np.full(len(means), 3.0), np.log(np.full((len(means), 3), 0.005)))
    assert sb.found == "scene" and not sb.orbit.is_orbit, sb.reason
    assert sb.plane is not None and sb.plane.source == "scene", sb.reason
    assert sb.plane.normal @ up > np.cos(np.radians(1.0)), (sb.plane, up)
    assert abs(sb.plane.distance(world([[0.0, 0, 0]]))[0]) < 0.01 and sb.plane.thickness < 0.05, sb.plane
    # the mesh: the table as tilted sheets within 0.03 of it, sheets 0.3 under it, the book's closed box
    sheets = []
    for _ in range(40):
        c = np.append(rng.uniform(-1.3, 1.3, 2), rng.uniform(-0.03, 0.03))
        a = rng.uniform(0, np.pi)
        t = np.array([np.cos(a), np.sin(a), rng.uniform(-0.1, 0.1)]) * 0.2
        s = np.array([-np.sin(a), np.cos(a), rng.uniform(-0.1, 0.1)]) * 0.2
        sheets.append(np.array([c - t - s, c + t - s, c + t + s, c - t + s]))
    for _ in range(10):
        c = np.append(rng.uniform(-1.3, 1.3, 2), -0.3)
        sheets.append(c + np.array([[-0.2, -0.2, 0], [0.2, -0.2, 0], [0.2, 0.2, 0.05], [-0.2, 0.2, 0.05]]))
    sv = np.concatenate(sheets)
    sf = np.concatenate([np.array([[0, 1, 2], [0, 2, 3]]) + 4 * k for k in range(len(sheets))])
    box = trimesh.creation.box(extents=[0.4, 0.3, 0.06])
    box.apply_translation([0, 0, 0.05])   # 0.02 .. 0.08: its bottom within the layer, its top above
    v = world(np.concatenate([sv, box.vertices]))
    f = np.concatenate([sf, box.faces + len(sv)])
    band = max(0.04, sb.plane.thickness)
    v2, f2, rep = repair_mesh(v, f, plane=sb.plane, cut=-0.001, max_hole_edges=0, min_component=0.0,
                              min_component_faces=1, flat=band)
    h = sb.plane.distance(v2)
    assert h.min() > -0.001 - 1e-6, h.min()                                 # nothing under the table
    table_part = np.abs(h) < band
    assert np.abs(h[table_part]).max() < 0.001 + 1e-6                       # its layer flat (the cut's caps 0.001 under it)
    assert (np.abs((v2 - shift) @ up - 0.08) < 1e-9).sum() == 4   # the book's top, as it was
    assert rep["vertices_flattened"] > 0
    # the 40 sheets (0.16 each) stay on the table, flattened, or re-meshed as one flat sheet
    # when enough of their faces lie wholly in the layer (engine/mesh/support.py): not dropped
    flat_faces = np.abs(h[f2]).max(1) < 1e-6
    tri = v2[f2[flat_faces]]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1).sum()
    assert area >= 0.3 * 40 * 0.16, (area, rep.get("support_faces_replaced"))
    if rep["support_faces_replaced"]:
        assert largest_component_share(v2, f2[flat_faces]) == 1.0
