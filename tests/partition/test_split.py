"""Split: the up axis, ownership (every point has exactly one owner cell), the overlap, the
camera choice by visibility, the parts as datasets, and the refusals. References are
computed here independently (brute force over the boxes, geometry of the test's own
cameras)."""

import json
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.partition.geometry import PartitionError, SceneGeometry, read_geometry, up_axis
from spirula.engine.partition.parts_layout import read_layout
from spirula.engine.partition.parts import split_dataset
from spirula.engine.partition.split import SplitSettings, split_scene
from tests.partition.city import _look, make_city, write_city


@pytest.fixture(scope="module")
def city_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("city") / "city"
    city = make_city(blocks=4, width=40, height=30)
    write_city(root, city, points=3000)
    return root, city


def _random_rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def test_up_axis_of_a_tilted_street_walk():
    city = make_city(blocks=3)
    rng = np.random.default_rng(3)
    for _ in range(3):
        rot = _random_rotation(rng)            # world' = rot @ world
        m = np.eye(4)
        m[:3, :3] = rot.T
        w2c = city.w2c @ m                     # the same cameras in the rotated world
        centers = -np.einsum("cji,cj->ci", w2c[:, :3, :3], w2c[:, :3, 3])
        up = up_axis(w2c, centers)
        assert np.degrees(np.arccos(np.clip(up @ (rot @ [0, 0, 1]), -1, 1))) < 1.0


def test_up_axis_refuses_cameras_that_agree_on_none():
    w2c = np.stack([_look(np.zeros(3), 0.0, 0.0), _look(np.zeros(3), 0.0, 0.0)])
    w2c[1, :3, :3] = np.diag([1.0, -1.0, -1.0]) @ w2c[1, :3, :3]  # the second upside down
    with pytest.raises(PartitionError, match="up directions disagree"):
        up_axis(w2c, np.zeros((2, 3)))


def test_every_point_has_exactly_one_owner(city_root, tmp_path):
    root, _ = city_root
    split_dataset(root, tmp_path / "parts", SplitSettings(parts=4, min_cameras=4), on_message=lambda _: None)
    layout = read_layout(tmp_path / "parts")
    assert len(layout.parts) == 4
    rng = np.random.default_rng(0)
    pts = rng.uniform(-40, 60, (20000, 3))    # far beyond the scene too
    # points exactly on the cuts and on their crossings (ground coordinates -> world)
    xs = sorted({v for p in layout.parts for v in p.owner[:2] if np.isfinite(v)})
    ys = sorted({v for p in layout.parts for v in p.owner[2:] if np.isfinite(v)})
    on = np.array([[a, b] for a in xs for b in ys] + [[a, 3.0] for a in xs] + [[3.0, b] for b in ys])
    pts[:len(on)] = on @ layout.frame + 0.7 * layout.up
    g = pts @ layout.frame.T
    count = np.zeros(len(pts), int)
    for p in layout.parts:                    # brute force: in how many owner boxes
        x0, x1, y0, y1 = p.owner
        count += (g[:, 0] >= x0) & (g[:, 0] < x1) & (g[:, 1] >= y0) & (g[:, 1] < y1)
    assert (count == 1).all()
    owner = layout.owner_of(pts)
    for p in layout.parts:
        x0, x1, y0, y1 = p.owner
        mine = owner == p.index
        assert ((g[mine, 0] >= x0) & (g[mine, 0] < x1) & (g[mine, 1] >= y0) & (g[mine, 1] < y1)).all()


def test_overlap_grows_each_region_and_the_parts_hold_its_points(city_root, tmp_path):
    root, _ = city_root
    overlap = 0.2
    split_dataset(root, tmp_path / "parts", SplitSettings(parts=4, overlap=overlap, min_cameras=4),
                  on_message=lambda _: None)
    layout = read_layout(tmp_path / "parts")
    geo = read_geometry(root)
    g = geo.points @ layout.frame.T
    total_owned = 0
    for p in layout.parts:
        x0, x1, y0, y1 = p.extent
        want = [x0 - overlap * (x1 - x0), x1 + overlap * (x1 - x0), y0 - overlap * (y1 - y0), y1 + overlap * (y1 - y0)]
        assert np.allclose(p.region, want)
        # the part's points3D: exactly the SfM points in the region (open where the owner is)
        r = [o if np.isinf(o) else w for w, o in zip(want, p.owner)]
        expect = (g[:, 0] >= r[0]) & (g[:, 0] < r[1]) & (g[:, 1] >= r[2]) & (g[:, 1] < r[3])
        rows = np.loadtxt(tmp_path / "parts" / p.name / "sparse" / "0" / "points3D.txt", comments="#", ndmin=2)
        assert len(rows) == expect.sum() == p.points
        assert np.allclose(np.sort(rows[:, 1]), np.sort(geo.points[expect, 0]), atol=1e-6)
        total_owned += int((layout.owner_of(geo.points) == p.index).sum())
        # the overlap reaches into the neighbours: more points than the cell owns
        assert p.points > (layout.owner_of(geo.points) == p.index).sum()
    assert total_owned == len(geo.points)


def _street(n_pts=400, seed=0):
    """A flat strip of ground points x in [0, 20), y in [-1, 1]; cameras along it at
    height 1 looking down the strip (+x) or back (-x), pitched down 30 degrees."""
    rng = np.random.default_rng(seed)
    pts = np.c_[rng.uniform(0, 20, n_pts), rng.uniform(-1, 1, n_pts), np.zeros(n_pts)]
    poses, names = [], []
    for k, x in enumerate(np.linspace(0.5, 19.5, 40)):
        poses.append(_look(np.array([x, 0.0, 1.0]), 0.0 if k % 2 else np.pi, np.radians(-30)))
        names.append(f"c{k:02d}.png")
    w2c = np.stack(poses)
    centers = -np.einsum("cji,cj->ci", w2c[:, :3, :3], w2c[:, :3, 3])
    intr = np.tile([40.0, 40.0, 40.0, 30.0, 80, 60], (len(w2c), 1))
    return SceneGeometry(Path("street"), Path("street/sparse/0"), names, np.arange(1, 41), np.ones(40, int), w2c,
                         centers, intr, pts, np.zeros((n_pts, 3), np.uint8))


def _sees(w2c, intr, pts):
    """Brute-force reference: points [P, 3] in front of the camera and inside its image
    (the flat strip occludes nothing)."""
    cam = pts @ w2c[:3, :3].T + w2c[:3, 3]
    fx, fy, cx, cy, w, h = intr
    z = cam[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u, v = fx * cam[:, 0] / z + cx, fy * cam[:, 1] / z + cy
    return (z > 1e-6) & (u >= 0) & (u < w) & (v >= 0) & (v < h)


def test_cameras_outside_that_look_into_the_cell_join_and_the_others_do_not():
    geo = _street()
    part = split_scene(geo, SplitSettings(parts=2, overlap=0.05, visibility=0.3, min_cameras=2, eval_every=0,
                                          occlusion=False))
    cam_g, pts_g = geo.centers @ part.frame.T, geo.points @ part.frame.T

    def box(xy, b):
        return (xy[:, 0] >= b[0]) & (xy[:, 0] < b[1]) & (xy[:, 1] >= b[2]) & (xy[:, 1] < b[3])

    for c in part.cells:
        r = [o if np.isinf(o) else v for v, o in zip(c.region, c.owner)]
        inside_region = box(cam_g, r)
        cell_pts = box(pts_g, c.extent)
        for i in range(len(geo.names)):
            seen = _sees(geo.w2c[i], geo.intrinsics[i], geo.points)
            share = (seen & cell_pts).sum() / max(seen.sum(), 1)
            expect = inside_region[i] or share >= 0.3
            assert (i in c.cameras) == expect, (c.index, i, share)
        joined = set(c.joined)
        assert joined and all(not inside_region[i] for i in joined)
        # a camera outside that joined looks towards the cell's middle
        mid = pts_g[cell_pts].mean(axis=0) @ part.frame
        for i in joined:
            fwd = geo.w2c[i, 2, :3]
            assert fwd @ (mid - geo.centers[i]) > 0


def test_a_wall_hides_what_is_behind_it():
    from spirula.engine.partition.geometry import visibility

    cam = _look(np.array([0.0, 0.0, 1.0]), 0.0, 0.0)        # looking along +x
    rng = np.random.default_rng(1)
    wall = np.c_[np.full(300, 4.0), rng.uniform(-1, 1, 300), rng.uniform(0.5, 1.5, 300)]
    behind = np.c_[np.full(50, 9.0), rng.uniform(-0.8, 0.8, 50), rng.uniform(0.7, 1.3, 50)]
    beside = np.c_[np.full(50, 9.0), rng.uniform(3.0, 4.0, 50), rng.uniform(0.7, 1.3, 50)]
    pts = np.r_[wall, behind, beside]
    intr = np.array([[40.0, 40.0, 40.0, 30.0, 80, 60]])
    seen = visibility(cam[None], intr, pts)[0]
    assert seen[:300].mean() > 0.9 and not seen[300:350].any() and seen[350:].all()
    assert visibility(cam[None], intr, pts, occlusion=False)[0][300:].all()


def test_parts_are_datasets_of_their_cameras_without_held_out_views_or_copies(city_root, tmp_path):
    from spirula.engine.ingest import load_dataset

    root, _ = city_root
    split_dataset(root, tmp_path / "parts", SplitSettings(parts=2, min_cameras=4), on_message=lambda _: None)
    d = json.loads((tmp_path / "parts" / "partition.json").read_text())
    test = set(d["test"])
    names = sorted(p.name for p in (root / "images").iterdir())
    assert test == set(names[::8])
    for p in d["parts"]:
        folder = tmp_path / "parts" / p["name"]
        assert (folder / "images").is_symlink() and not any(f.is_file() and f.suffix == ".png" for f in folder.rglob("*"))
        ds = load_dataset(folder, 40)
        assert [c.name for c in ds.cameras] == sorted(p["cameras"])
        assert not test & set(p["cameras"])
        assert not ds.warnings  # the linked folder's other images are not warned about


def test_refusals_give_the_reason(city_root, tmp_path):
    root, _ = city_root
    with pytest.raises(PartitionError, match="too small to split"):
        split_dataset(root, tmp_path / "a", SplitSettings(parts=4, min_cameras=100), on_message=lambda _: None)
    with pytest.raises(PartitionError, match="gets only"):
        split_dataset(root, tmp_path / "b", SplitSettings(parts=16, min_cameras=8, overlap=0.0), on_message=lambda _: None)
    geo = _street()
    geo.points = np.zeros((0, 3))
    with pytest.raises(PartitionError, match="no SfM points"):
        split_scene(geo, SplitSettings(parts=2, min_cameras=2))
    split_dataset(root, tmp_path / "c", SplitSettings(parts=2, min_cameras=4), on_message=lambda _: None)
    from spirula.engine.errors import SpirulaError

    with pytest.raises(SpirulaError, match="already holds a partition"):
        split_dataset(root, tmp_path / "c", SplitSettings(parts=2, min_cameras=4), on_message=lambda _: None)


def test_a_budget_splits_until_every_part_fits(city_root):
    root, _ = city_root
    geo = read_geometry(root)
    p = split_scene(geo, SplitSettings(max_gaussians_per_part=400_000, total_gaussians=1_000_000, min_cameras=2))
    assert len(p.cells) >= 3 and all(c.gaussians <= 400_000 for c in p.cells)
    one = split_scene(geo, SplitSettings(max_gaussians_per_part=2_000_000, total_gaussians=1_000_000, min_cameras=2))
    assert len(one.cells) == 1
