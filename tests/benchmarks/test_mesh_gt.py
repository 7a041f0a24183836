"""benchmarks/mesh_gt: the ray caster against analytic hits, the dataset writer through our
dataset loader, and the scorer on meshes whose scores are known by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
import trimesh

from benchmarks.mesh_gt import geometry as G
from benchmarks.mesh_gt import scenes as S
from benchmarks.mesh_gt import score as SC
from benchmarks.mesh_gt import writer as W
from benchmarks.mesh_gt.__main__ import main
from benchmarks.mesh_gt.raycast import Camera, first_hit, look_at, render
from benchmarks.mesh_gt.texture import Texture

PLAIN = Texture("plain", (0.5, 0.5, 0.5))


def _tangent_jitter(n, rng, scale):
    """Random vectors [N, 3] perpendicular to the unit normals n [N, 3]."""
    r = rng.normal(size=n.shape)
    return (r - (r * n).sum(1, keepdims=True) * n) * scale


@pytest.mark.parametrize("shape", [G.Box((-0.3, -0.2, 0.1), (0.5, 0.4, 0.9)), G.Cylinder(0.2, -0.1, 0.35, -0.2, 0.6),
                                   G.Sphere((0.1, 0.2, -0.3), 0.45)], ids=["box", "cylinder", "sphere"])
def test_first_hit_is_the_surface_point_aimed_at(shape):
    """Rays from the outer side of a convex solid's tangent plane at a surface point, aimed
    at it, hit exactly there with that normal (a convex solid lies behind each tangent plane)."""
    rng = np.random.default_rng(1)
    p, n = shape.sample(0.05)
    pick = rng.choice(len(p), 400, replace=False)
    p, n = p[pick], n[pick]
    o = p + n * rng.uniform(0.2, 3.0, (len(p), 1)) + _tangent_jitter(n, rng, 0.3)
    d = (p - o) * rng.uniform(0.3, 3.0, (len(p), 1))  # any length: t scales with it
    t, normal = shape.intersect(o, d)
    np.testing.assert_allclose(o + t[:, None] * d, p, atol=1e-9)
    np.testing.assert_allclose(normal, n, atol=1e-9)
    assert np.all(np.abs(shape.sdf(p)) < 1e-9)
    # the same rays turned away miss
    t, _ = shape.intersect(o, -d)
    assert np.all(np.isinf(t))


def test_room_is_hit_from_inside_on_its_walls_with_inward_normals():
    rng = np.random.default_rng(2)
    room = G.Box((-2.0, -1.5, 0.0), (2.5, 1.5, 2.6), inside=True)
    o = rng.uniform([-1.9, -1.4, 0.1], [2.4, 1.4, 2.5], (500, 3))
    d = rng.normal(size=(500, 3))
    t, n = room.intersect(o, d)
    p = o + t[:, None] * d
    assert np.all(np.isfinite(t)) and np.all(t > 0)
    assert np.all(np.abs(room.sdf(p)) < 1e-9)
    assert np.all((n * d).sum(1) < 0)  # facing the ray, i.e. into the room
    # the point is on the wall the normal names
    axis = np.argmax(np.abs(n), 1)
    wall = np.where(n[np.arange(500), axis] > 0, np.asarray(room.lo)[axis], np.asarray(room.hi)[axis])
    np.testing.assert_allclose(p[np.arange(500), axis], wall, atol=1e-9)


def test_nearest_of_several_shapes_and_pixel_conventions():
    """Two spheres one behind the other: the front one is hit; every pixel's depth is the
    camera z of a point that projects back to that pixel's centre (+0.5 convention)."""
    front, back = G.Sphere((0.0, 0.0, 0.0), 0.5), G.Sphere((0.0, 0.0, -1.5), 0.9)
    cam = Camera(look_at((0.3, -3.0, 0.4), (0.0, 0.0, 0.0)), 40.0, 42.0, 15.3, 11.7, 32, 24)
    o, d, uv = cam.rays(1)
    t, which, _ = first_hit([back, front], o, d)
    centre_row = (np.abs(uv[:, 0] - cam.cx) < 1) & (np.abs(uv[:, 1] - cam.cy) < 1)
    assert np.all(which[centre_row] == 1)
    hit = np.isfinite(t)
    assert hit.mean() > 0.2
    p = o[hit] + t[hit, None] * d[hit]
    back_uv, z = cam.project(p)
    np.testing.assert_allclose(back_uv, uv[hit], atol=1e-9)
    np.testing.assert_allclose(z, t[hit], rtol=1e-12)
    img, depth, idx = render([back, front], [PLAIN, Texture("plain", (0.9, 0.1, 0.1))], cam, supersample=2)
    assert img.shape == (24, 32, 3) and depth.shape == (24, 32)
    np.testing.assert_array_equal(depth.ravel(), t)
    np.testing.assert_array_equal(idx.ravel(), which)
    # the front sphere is red, lit from above: its top half brighter than its bottom half
    red = idx == 1
    assert img[red, 0].mean() > 2 * img[red, 1].mean()


def test_hidden_faces_are_dropped_and_contact_faces_flagged():
    """A box standing on a floor slab, a second box half sunk in the first: samples inside
    a part go, the base on the floor is kept as contact (not visible), the rest visible."""
    parts = [S.Part("a", G.Box((-0.2, -0.2, 0.0), (0.2, 0.2, 0.4)), PLAIN),
             S.Part("b", G.Box((0.1, -0.1, 0.1), (0.4, 0.1, 0.3)), PLAIN),
             S.Part("floor", G.Box((-1, -1, -0.1), (1, 1, 0.0)), PLAIN, "support")]
    p, n, k, vis = S.surface_samples(parts, 0.01)
    for j, part in enumerate(parts):
        others = [q.shape.sdf(p[k == j]) for i, q in enumerate(parts) if i != j]
        assert np.min(others) > -S.HIDDEN_TOL
    base = (k == 0) & (p[:, 2] == 0.0)
    assert base.sum() == 40 * 40 and not vis[base].any()
    assert vis[(k == 0) & (p[:, 2] > 0)].all()
    # b's faces inside a are gone: none of its samples has x < 0.2 except on a's face x = 0.2
    assert np.all(p[k == 1, 0] >= 0.2 - 1e-12)
    # areas: every visible sample stands for about spacing^2
    top = (k == 2) & (p[:, 2] == 0.0) & vis
    np.testing.assert_allclose(top.sum() * 0.01 ** 2, 4.0 - 0.16, rtol=0.01)


def test_seen_count_is_the_analytic_visibility():
    """Points on a lone sphere seen by cameras around it: a camera sees a point in its frame
    exactly when the point faces it (the sphere hides its far side); points within about
    a pixel of the outline (|cos| < 0.6 here), where the depth samples decide, are left out."""
    ball = G.Sphere((0.1, -0.2, 0.3), 0.5)
    cams = [Camera(look_at(e, ball.centre), 60.0, 60.0, 32.0, 24.0, 64, 48)
            for e in ((3.0, 0.0, 0.5), (-2.0, 2.0, 0.0), (0.0, -2.5, 2.0))]
    depths = [render([ball], [PLAIN], c, 1)[1] for c in cams]
    p, n = ball.sample(0.02)
    total = np.zeros(len(p), int)
    for c, depth in zip(cams, depths):
        count = W.seen_count(p, [c], [depth])
        total += count
        to_cam = c.centre - p
        cos = (to_cam * n).sum(1) / np.linalg.norm(to_cam, axis=1)
        uv, z = c.project(p)
        inside = (uv[:, 0] >= 0.5) & (uv[:, 0] < 63.5) & (uv[:, 1] >= 0.5) & (uv[:, 1] < 47.5) & (z > 0)
        clear = np.abs(cos) > 0.6
        assert clear.mean() > 0.3  # (0.4 of a sphere seen from afar)
        np.testing.assert_array_equal(count[clear], ((cos > 0) & inside)[clear])
    np.testing.assert_array_equal(W.seen_count(p, cams, depths), total)


@pytest.fixture(scope="module")
def can_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("can") / "data"
    size = S.Size("tiny", 48, 36, 6, 1, 300, 10)
    info = W.write_scene(S.get_scene("b"), size, root, seed=3)
    return root, size, info


def test_written_dataset_reads_back_through_our_loader(can_dataset):
    from spirula.engine.ingest import load_dataset

    root, size, info = can_dataset
    scene = S.get_scene("b")
    cams = scene.cameras(size, np.random.default_rng(3))
    ds = load_dataset(root, max_size=None)
    assert [c.name for c in ds.cameras] == [f"view_{i:03d}.png" for i in range(6)]
    for cam, ours in zip(ds.cameras, cams):
        np.testing.assert_allclose(cam.w2c, ours.w2c, atol=1e-12)
        assert (cam.width, cam.height) == (48, 36)
        np.testing.assert_allclose([cam.fx, cam.fy, cam.cx, cam.cy], [ours.fx, ours.fy, ours.cx, ours.cy])
    assert len(ds.points) == info["sparse_points"] > 100
    # each sparse point lies where a view sees it: projected by the loader's cameras its
    # colour is the image's there (noise 0.3 px; texture edges give a few misses)
    diffs = []
    for cam in ds.cameras:
        pc = ds.points.astype(np.float64) @ cam.w2c[:3, :3].T + cam.w2c[:3, 3]
        u = cam.fx * pc[:, 0] / pc[:, 2] + cam.cx
        v = cam.fy * pc[:, 1] / pc[:, 2] + cam.cy
        ok = (pc[:, 2] > 0) & (u >= 0) & (v >= 0) & (u < cam.width) & (v < cam.height)
        px = cam.image[v[ok].astype(int), u[ok].astype(int)].astype(float)
        diffs.append(np.abs(px - ds.colors[ok]).mean(1))
    assert np.median(np.concatenate(diffs)) < 40
    # the ground truth reads back as made
    gt, again = W.read_ground_truth(root), S.ground_truth(scene)
    np.testing.assert_allclose(gt.points, again.points, atol=1e-6)
    np.testing.assert_array_equal(gt.visible, again.visible)
    # the views that see each point: the can's side and lid are seen (>= 2 views) almost
    # everywhere from the 200-degree arc (each view sees ~160 degrees of it); its base (in
    # contact with the floor) is never asked for
    assert gt.views is not None and again.views is None
    can = gt.mask("object", seen=False) & gt.visible
    assert (gt.views[can] >= S.MIN_SEEN).mean() > 0.9
    assert not gt.mask()[~gt.visible].any()
    assert gt.parts == again.parts and gt.kind == "object"
    meta = json.loads((root / "gt.json").read_text())
    assert meta["up"] == [0.0, 0.0, 1.0] and meta["units"] == "metres"
    np.testing.assert_allclose(meta["object_box"]["hi"], [0.063, 0.063, 0.162])


def test_sparse_points_are_on_textured_surfaces_seen_by_several_views(can_dataset):
    from spirula.engine.ingest.colmap_format import read_model

    root, size, _ = can_dataset
    model = read_model(root / "sparse" / "0")
    scene = S.get_scene("b")
    d = np.min([p.shape.sdf(model.points.astype(np.float64)) for p in scene.parts], axis=0)
    assert np.median(np.abs(d)) < 2e-3  # on some surface, within the angular noise


def _gt(parts, kind="object"):
    return S.ground_truth(S.Scene("t", "t", kind, parts, None))


CUBE = [S.Part("cube", G.Box((-0.1, -0.1, 0.0), (0.1, 0.1, 0.2)), PLAIN),
        S.Part("floor", G.Box((-3, -3, -0.1), (3, 3, 0.0)), PLAIN, "support")]


def _cube_mesh():
    m = trimesh.creation.box(extents=(0.2, 0.2, 0.2))
    m.apply_translation((0, 0, 0.1))
    return m


@pytest.fixture(scope="module")
def cube_gt():
    return _gt(CUBE)


@pytest.fixture(scope="module")
def cube_score(cube_gt):
    """The scores of the cube's own surface (~10 CPU-s: two tests read them)."""
    return SC.score_mesh(_cube_mesh(), cube_gt)


def test_score_of_the_ground_truth_itself_is_perfect(cube_score):
    r = cube_score
    assert r["fscore@0.5%"] == 1.0 and r["fscore@1%"] == 1.0
    assert r["outside_area_pct"] == 0.0 and r["components"] == 1 and r["watertight"]
    assert r["chamfer"] < 0.2 * r["tau"]["0.5%"]  # the sampling's bias only (about 0.13)


@pytest.mark.parametrize("offset", [0.4, 1.5])
def test_offset_sphere_scores_its_distance(offset):
    """A sphere of radius r + delta around the ground-truth sphere of radius r: every
    distance is delta (F at a tau is 1 above delta, 0 below). Completeness reads the
    distance to the mesh's samples, sqrt(delta^2 + r^2) with r the offset to the nearest
    sample along the surface: up to 10% over delta at delta = 0.4 tau(0.5%)."""
    gt = _gt([S.Part("ball", G.Sphere((0.0, 0.0, 0.5), 0.2), PLAIN)])
    delta = offset * 0.005 * gt.diagonal
    m = trimesh.creation.icosphere(6, 0.2 + delta)
    m.apply_translation((0, 0, 0.5))
    r = SC.score_mesh(m, gt)
    np.testing.assert_allclose(r["accuracy"], delta, rtol=0.04)
    assert delta <= r["completeness"] <= 1.12 * delta
    assert r["fscore@1%"] == 1.0
    assert r["fscore@0.5%"] == (1.0 if offset < 1 else 0.0)


def test_floor_slab_reports_its_outside_area(cube_gt):
    """The cube plus a 1 m square floor slab under it: the area outside the box grown by 1%
    of its diagonal is known; the slab inside the box is accurate (floor and contact)."""
    # a grid of 2 cm cells, as a mesher's faces are small (the scorer samples densely only
    # the faces near the object box: two 1 m triangles would cost it 3M samples)
    g = np.linspace(-0.5, 0.5, 51)
    gx, gy = np.meshgrid(g, g, indexing="ij")
    verts = np.stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)], 1)
    i, j = np.meshgrid(np.arange(50), np.arange(50), indexing="ij")
    a, b, c, d = (i * 51 + j).ravel(), ((i + 1) * 51 + j).ravel(), ((i + 1) * 51 + j + 1).ravel(), (i * 51 + j + 1).ravel()
    slab = trimesh.Trimesh(verts, np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)]))
    mesh = trimesh.util.concatenate([_cube_mesh(), slab])
    gt = cube_gt
    r = SC.score_mesh(mesh, gt)
    g = 0.01 * gt.diagonal
    expected = 100 * (1.0 - (0.2 + 2 * g) ** 2) / (0.24 + 1.0)
    assert abs(r["outside_area_pct"] - expected) < 0.3, (r["outside_area_pct"], expected)
    assert r["components"] == 2 and not r["watertight"]
    assert r["fscore@1%"] == 1.0


STOOL = [S.Part("seat", G.Box((-0.2, -0.2, 0.4), (0.2, 0.2, 0.45)), PLAIN)] + [
    S.Part(f"leg{k}", G.Box((x - 0.02, y - 0.02, 0.0), (x + 0.02, y + 0.02, 0.4)), PLAIN, thin=True)
    for k, (x, y) in enumerate(((-0.17, -0.17), (0.17, -0.17), (-0.17, 0.17), (0.17, 0.17)))] + [
    S.Part("floor", G.Box((-3, -3, -0.1), (3, 3, 0.0)), PLAIN, "support")]


def _union_mesh(parts, voxel):
    """A connected watertight mesh of the union of the object parts: marching cubes of the
    least SDF (independent of the scorer's sampling)."""
    from skimage.measure import marching_cubes

    obj = [p for p in parts if p.label == "object"]
    lo = np.min([p.shape.bounds()[0] for p in obj], 0) - 2.63 * voxel  # no grid point on a face
    hi = np.max([p.shape.bounds()[1] for p in obj], 0) + 3 * voxel
    axes = [np.arange(a, b + voxel, voxel) for a, b in zip(lo, hi)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    sdf = np.min([p.shape.sdf(grid) for p in obj], 0).reshape([len(a) for a in axes])
    v, f, _, _ = marching_cubes(sdf, 0.0, spacing=(voxel,) * 3)
    return trimesh.Trimesh(v + lo, f)


def test_nn_distance_is_exact_near_and_close_far():
    """Against plain k-d tree distances: equal below the exact bound, never under and at
    most a quarter over beyond it (queries inside a hollow sampled ball and far off a plane)."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(4)
    h = 0.004
    ball, _ = G.Sphere((0.0, 0.0, 0.5), 0.3).sample(h)
    plane, _ = G.Box((-1.0, -1.0, -0.1), (1.0, 1.0, 0.0)).sample(h)
    data = np.concatenate([ball, plane[plane[:, 2] == 0.0]])
    q = np.concatenate([rng.uniform([-0.25, -0.25, 0.25], [0.25, 0.25, 0.75], (3000, 3)),
                        rng.uniform([-1, -1, -0.3], [1, 1, 1.2], (3000, 3))])
    exact = cKDTree(data).query(q)[0]
    bound = 0.03
    d = SC.nn_distance(data, q, bound, h)
    near = exact < bound
    assert near.sum() > 100 and (~near).sum() > 1000
    np.testing.assert_array_equal(d[near], exact[near])
    ratio = d[~near] / exact[~near]
    assert ratio.min() >= 1.0 and ratio.max() <= 1.25 and np.median(ratio) < 1.03


def test_thin_parts_count_only_in_the_largest_component():
    gt = _gt(STOOL)
    whole = _union_mesh(STOOL, 0.004)
    r = SC.score_mesh(whole, gt)
    assert r["components"] == 1 and r["watertight"]
    assert r["thin_in_largest"] is True and r["fscore@1%"] > 0.95
    assert set(r["thin_parts"]) == {"leg0", "leg1", "leg2", "leg3"}
    # the legs as separate pieces: present (recall) but not in the largest component
    pieces = trimesh.util.concatenate([_union_mesh([p], 0.004) for p in STOOL[:5]])
    r = SC.score_mesh(pieces, gt)
    assert r["components"] == 5 and r["thin_in_largest"] is False
    # (only the leg tops within tau of the seat count for the largest component)
    assert all(t["recall"] > 0.9 and t["recall_largest"] < 0.1 for t in r["thin_parts"].values())


def test_score_command_prints_the_scores(can_dataset, tmp_path, capsys):
    root, _, _ = can_dataset
    m = trimesh.creation.cylinder(radius=0.06, height=0.15, sections=256)
    m.apply_translation((0, 0, 0.075))
    m.export(tmp_path / "can.ply")
    assert main(["score", str(tmp_path / "can.ply"), str(root)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["fscore@1%"] > 0.8 and r["components"] == 1 and r["watertight"]
    assert main(["score", str(tmp_path / "none.ply"), str(root)]) == 1
    assert "none.ply: not found" in capsys.readouterr().err
    (tmp_path / "bad.ply").write_bytes(b"ply\nformat nonsense\n")
    assert main(["score", str(tmp_path / "bad.ply"), str(root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{tmp_path / 'bad.ply'}: cannot be scored") and len(err.strip().splitlines()) == 1


def test_spirula_command_and_table(tmp_path, cube_score):
    from benchmarks.mesh_gt.run import spirula_command, table

    ci = spirula_command(tmp_path / "d", tmp_path / "p", "ci", "e", "vulkan", ["--mesh-resolution", "256"])
    assert ci[1:4] == ["-m", "spirula.engine.cli", "run"] and ci[ci.index("--steps") + 1] == "500"
    assert ci[-4:] == ["--mesh-bounds", "scene", "--mesh-resolution", "256"]  # the scene's, then the user's
    gpu = spirula_command(tmp_path / "d", tmp_path / "p", "gpu", "a", None, [])
    assert "--steps" not in gpu and "--device" not in gpu and "--mesh-faces" not in gpu  # its defaults
    score = dict(cube_score, thin_in_largest=None)
    text = table([{"scene": "a", "score": score, "seconds": 12.0}, {"scene": "b", "error": "spirula run exited 1"}])
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["scene", "F@0.5%", "F@1%"]
    assert lines[1].split()[:3] == ["a", "1.000", "1.000"] and lines[1].split()[-1] == "12"
    assert lines[2].split() == ["b", "spirula", "run", "exited", "1"]


def test_unknown_scene_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--scenes", "a,z", "--out", "x"])
    assert "unknown scene(s) z" in capsys.readouterr().err


def test_wide_camera_rays_invert_colmaps_projections():
    # the ray caster's fisheye and equirectangular rays land back on their pixels through
    # pycolmap's own projection (SIMPLE_RADIAL_FISHEYE with k = 0, EQUIRECTANGULAR)
    pycolmap = pytest.importorskip("pycolmap")
    from benchmarks.mesh_gt.raycast import WideCamera

    rng = np.random.default_rng(4)
    f = 40.0 / (np.pi / 2)
    fish = WideCamera(np.eye(4), "fisheye", 80, 80, f, 40.0, 40.0)
    uv = rng.uniform(15, 65, (50, 2))  # inside the 90-degree circle (radius 40 px): pycolmap projects z > 0 only
    cam = pycolmap.Camera(model="SIMPLE_RADIAL_FISHEYE", width=80, height=80, params=[f, 40.0, 40.0, 0.0])
    np.testing.assert_allclose(cam.img_from_cam(fish.camera_rays(uv)), uv, atol=1e-9)
    eq = WideCamera(np.eye(4), "equirect", 120, 60)
    uv = rng.uniform([1, 1], [119, 59], (50, 2))
    cam = pycolmap.Camera(model="EQUIRECTANGULAR", width=120, height=60, params=[120.0, 60.0])
    np.testing.assert_allclose(cam.img_from_cam(eq.camera_rays(uv)), uv, atol=1e-9)
