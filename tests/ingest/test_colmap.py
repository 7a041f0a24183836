"""COLMAP readers: real binary models (book, mouse, office_chair) and text models the
tests write; pycolmap (when installed) is the independent reference for the parsers."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.errors import DatasetError
from spirula.engine.ingest import load_dataset
from spirula.engine.ingest.colmap import find_model, read_colmap
from spirula.engine.ingest.colmap_format import read_model

from .synth import random_pose, write_colmap_text, write_image


def _dataset(shared_data: Path, name: str) -> Path:
    root = shared_data / name
    if not root.is_dir():
        pytest.skip(f"dataset {root} not found")
    return root


# ------------------------------------------------------------------- real binary models


@pytest.mark.parametrize(
    "name, n_views, n_points, model, shared",
    [
        ("book", 7, 699, "SIMPLE_RADIAL", False),
        ("mouse", 56, 4443, "PINHOLE", False),
        ("office_chair/reference", 121, 10887, "OPENCV", True),
    ],
)
def test_read_real_colmap(shared_data, name, n_views, n_points, model, shared):
    scene = read_colmap(_dataset(shared_data, name))
    assert len(scene.views) == n_views
    assert scene.points.shape == (n_points, 3) and scene.points.dtype == np.float32
    assert scene.colors.shape == (n_points, 3) and scene.colors.dtype == np.uint8
    assert {v.camera.model for v in scene.views} == {model}
    assert (len({v.camera for v in scene.views}) == 1) == shared
    for v in scene.views:
        assert v.image_path.is_file()
        r = v.w2c[:3, :3]
        np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-12)


def test_mouse_reports_unregistered(shared_data, caplog):
    root = _dataset(shared_data, "mouse")
    with caplog.at_level("WARNING", logger="spirula.engine.ingest"):
        scene = read_colmap(root)
    unregistered = ["1282F413", "2047F18D", "701EDB9C"]
    notes = [w for w in scene.warnings if "not registered" in w]
    assert len(notes) == 1 and notes[0].startswith("3 images")
    assert all(u in notes[0] for u in unregistered)
    assert any("not registered" in r.getMessage() for r in caplog.records)
    assert not any(v.name.startswith(tuple(unregistered)) for v in scene.views)
    sizes = {(v.camera.width, v.camera.height) for v in scene.views}
    assert sizes == {(1920, 1440), (1440, 1920)}  # mixed portrait and landscape


def test_office_chair_ids_are_not_names(shared_data):
    """Image id 119 is 0118.jpg: views are keyed by name, not by id."""
    scene = read_colmap(_dataset(shared_data, "office_chair/reference"))
    cam = scene.views[0].camera
    assert (cam.width, cam.height) == (478, 850)
    np.testing.assert_allclose([cam.fx, cam.fy, cam.cx, cam.cy], [501.7, 499.4, 245.6, 431.6], atol=0.1)
    np.testing.assert_allclose(cam.extra, [0.0061, -0.0047, 0.0096, 0.0025], atol=1e-4)
    assert sorted(v.name for v in scene.views) == [f"{i:04d}.jpg" for i in range(1, 122)]


@pytest.mark.parametrize("name", ["book", "mouse", "office_chair/reference"])
def test_parser_matches_pycolmap(shared_data, name):
    pycolmap = pytest.importorskip("pycolmap")
    folder = _dataset(shared_data, name) / "sparse" / "0"
    ours = read_model(folder)
    ref = pycolmap.Reconstruction(str(folder))
    assert set(ours.cameras) == set(ref.cameras)
    for cid, cam in ref.cameras.items():
        mine = ours.cameras[cid]
        assert (mine.model, mine.width, mine.height) == (cam.model.name, cam.width, cam.height)
        np.testing.assert_array_equal(mine.params, cam.params)
    assert {i.name for i in ours.images.values()} == {im.name for im in ref.images.values() if im.has_pose}
    for iid, im in ref.images.items():
        np.testing.assert_allclose(ours.images[iid].w2c()[:3], im.cam_from_world().matrix(), atol=1e-12)
        assert ours.images[iid].camera_id == im.camera_id
    ref_xyz = np.array([p.xyz for p in ref.points3D.values()])
    ref_rgb = np.array([p.color for p in ref.points3D.values()])
    # same order for both: by position, then colour (a few points share a position)
    order_ours = np.lexsort(np.concatenate([ours.colors.T, ours.points.T]))
    order_ref = np.lexsort(np.concatenate([ref_rgb.T, ref_xyz.astype(np.float32).T]))
    np.testing.assert_allclose(ours.points[order_ours], ref_xyz[order_ref], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ours.colors[order_ours], ref_rgb[order_ref])


def test_poses_reproject_colmap_observations(shared_data):
    """Load book through the whole pipeline (undistort, crop, downscale) and project the
    3D points: they land where pycolmap's own unprojection of the 2D observations puts
    them in the final pinhole camera (COLMAP's reprojection error, scaled)."""
    pycolmap = pytest.importorskip("pycolmap")
    root = _dataset(shared_data, "book")
    ds = load_dataset(root, max_size=320)
    ref = pycolmap.Reconstruction(str(root / "sparse" / "0"))
    errors = []
    for im in ref.images.values():
        cam = next(c for c in ds.cameras if c.name == im.name)
        obs = [(p.xy, ref.points3D[p.point3D_id].xyz) for p in im.points2D if p.has_point3D()]
        xy = np.array([o[0] for o in obs])
        xyz = np.array([o[1] for o in obs])
        norm = ref.cameras[im.camera_id].cam_from_img(xy)  # independent undistortion
        expected = np.stack([cam.fx * norm[:, 0] + cam.cx, cam.fy * norm[:, 1] + cam.cy], 1)
        pc = xyz @ cam.w2c[:3, :3].T + cam.w2c[:3, 3]
        assert (pc[:, 2] > 0).all()
        got = np.stack([cam.fx * pc[:, 0] / pc[:, 2] + cam.cx, cam.fy * pc[:, 1] / pc[:, 2] + cam.cy], 1)
        native_f = ref.cameras[im.camera_id].params[0]
        errors.append(np.linalg.norm(got - expected, axis=1) * native_f / cam.fx)  # in native pixels
        assert ((got >= 0) & (got <= [cam.width, cam.height])).mean() > 0.95
    err = np.concatenate(errors)
    assert np.median(err) < 1.0 and np.percentile(err, 95) < 3.0  # COLMAP reports 0.54 px mean


# --------------------------------------------------------------- text models (synthetic)


def _text_scene(root: Path, rng, sparse: str = "sparse/0", n_images: int = 3, on_disk: int | None = None):
    cameras = [
        (1, "PINHOLE", 64, 48, [70.5, 71.25, 31.75, 24.5]),
        (2, "SIMPLE_PINHOLE", 40, 60, [55.0, 20.25, 29.5]),
    ]
    images, poses = [], {}
    for i in range(n_images):
        w2c = random_pose(rng)
        name = f"sub/img_{i:02d}.png" if i == 0 else f"img_{i:02d}.png"
        cid = 1 + i % 2
        images.append((10 + i, w2c, cid, name, 0 if i == 1 else 5))
        poses[name] = (w2c, cid)
    points = rng.normal(size=(6, 3))
    colors = rng.integers(0, 256, size=(6, 3))
    write_colmap_text(root / sparse, cameras, images, points, colors)
    for i, (_, _, cid, name, _) in enumerate(images[: on_disk if on_disk is not None else n_images]):
        w, h = (64, 48) if cid == 1 else (40, 60)
        write_image(root / "images" / name, w, h, rng)
    return cameras, poses, points, colors


def test_text_model_exact(tmp_path):
    rng = np.random.default_rng(1)
    cameras, poses, points, colors = _text_scene(tmp_path, rng)
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == sorted(poses)
    assert ds.warnings == []
    intr = {cid: params for cid, _, _, _, params in cameras}
    for cam in ds.cameras:
        w2c, cid = poses[cam.name]
        np.testing.assert_allclose(cam.w2c, w2c, atol=1e-14)
        p = intr[cid]
        expect = (p[0], p[1], p[2], p[3]) if cid == 1 else (p[0], p[0], p[1], p[2])
        assert (cam.fx, cam.fy, cam.cx, cam.cy) == expect
        assert cam.image.shape == (cam.height, cam.width, 3) and cam.image.dtype == np.uint8
    np.testing.assert_allclose(ds.points, points.astype(np.float32))
    np.testing.assert_array_equal(ds.colors, colors)


def test_text_model_downscale_scales_intrinsics(tmp_path):
    rng = np.random.default_rng(2)
    cameras, poses, _, _ = _text_scene(tmp_path, rng)
    full = {c.name: c for c in load_dataset(tmp_path, max_size=None).cameras}
    small = load_dataset(tmp_path, max_size=32)
    for cam in small.cameras:
        ref = full[cam.name]
        assert max(cam.width, cam.height) == 32
        sx, sy = cam.width / ref.width, cam.height / ref.height
        np.testing.assert_allclose([cam.fx, cam.cx], [ref.fx * sx, ref.cx * sx], rtol=1e-12)
        np.testing.assert_allclose([cam.fy, cam.cy], [ref.fy * sy, ref.cy * sy], rtol=1e-12)
        assert cam.image.shape == (cam.height, cam.width, 3)
        np.testing.assert_array_equal(cam.w2c, ref.w2c)


def test_model_locations(tmp_path):
    rng = np.random.default_rng(3)
    for i, sparse in enumerate(["sparse/0", "sparse", "."]):
        root = tmp_path / f"r{i}"
        _text_scene(root, rng, sparse=sparse)
        folder, notes = find_model(root)
        assert folder == (root / sparse if sparse != "." else root) and notes == []
        assert len(load_dataset(root, max_size=None).cameras) == 3


def test_a_dataset_read_again_logs_its_warning_once(shared_data, caplog):
    """The studio reads a dataset for the review, the split and the training: the terminal
    shows its warning once, while every read scene keeps it for the window's own notes."""
    root = _dataset(shared_data, "mouse")
    with caplog.at_level("WARNING", logger="spirula.engine.ingest"):
        scenes = [read_colmap(root) for _ in range(3)]
    assert all(sum("not registered" in w for w in s.warnings) == 1 for s in scenes)
    assert sum("not registered" in r.getMessage() for r in caplog.records) == 1


def test_several_models_pick_most_registered(tmp_path, caplog):
    rng = np.random.default_rng(4)
    _text_scene(tmp_path, rng, sparse="sparse/0", n_images=2)
    _text_scene(tmp_path, rng, sparse="sparse/1", n_images=4)
    with caplog.at_level("WARNING", logger="spirula.engine.ingest"):
        ds = load_dataset(tmp_path, max_size=None)
    assert len(ds.cameras) == 4
    note = next(w for w in ds.warnings if "COLMAP models" in w)
    assert "sparse/0 (2 images)" in note and "sparse/1 (4 images)" in note and "using sparse/1" in note
    assert any("using sparse/1" in r.getMessage() for r in caplog.records)


def test_missing_and_unregistered_images(tmp_path):
    rng = np.random.default_rng(5)
    _text_scene(tmp_path, rng, n_images=4, on_disk=3)  # img_03 listed but not on disk
    write_image(tmp_path / "images" / "extra.png", 8, 8, rng)  # on disk, not in the model
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["img_01.png", "img_02.png", "sub/img_00.png"]
    assert any("missing" in w and "img_03.png" in w for w in ds.warnings)
    assert any("not registered" in w and "extra.png" in w for w in ds.warnings)


# EQUIRECTANGULAR is read (split into faces): its refusal of a non-2:1 size is in test_faces_load.py
@pytest.mark.parametrize("model, nparams", [("DIVISION", 5), ("EUCM", 6)])
def test_unsupported_model_refused(tmp_path, model, nparams):
    rng = np.random.default_rng(6)
    _text_scene(tmp_path, rng)
    cams = (tmp_path / "sparse/0/cameras.txt").read_text().replace("SIMPLE_PINHOLE 40 60 55.0 20.25 29.5", f"{model} 40 60 " + " ".join(["0.1"] * nparams))
    (tmp_path / "sparse/0/cameras.txt").write_text(cams)
    # camera 2's image is skipped with the reason; camera 1's images still load
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["img_02.png", "sub/img_00.png"]
    assert any(re.search(rf"cameras\.txt:\d+: camera 2: camera model {model} is not supported.*img_01\.png", w)
               for w in ds.warnings), ds.warnings


def test_truncated_binary_names_the_file(tmp_path, shared_data):
    root = tmp_path / "trunc"
    src = _dataset(shared_data, "book")
    shutil.copytree(src / "sparse", root / "sparse")
    (root / "images").mkdir()
    data = (root / "sparse/0/images.bin").read_bytes()
    (root / "sparse/0/images.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match=r"images\.bin.*truncated"):
        read_colmap(root)


def test_bad_text_model_names_the_line(tmp_path):
    bad = tmp_path / "badtxt"
    _text_scene(bad, np.random.default_rng(7))
    (bad / "sparse/0/images.txt").write_text("1 0.5 x 0 0 0 0 0 1 a.png\n\n")
    with pytest.raises(DatasetError, match=r"images\.txt:1"):
        read_colmap(bad)


def test_no_dataset(tmp_path):
    with pytest.raises(DatasetError, match=str(tmp_path)):
        load_dataset(tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "nope")
