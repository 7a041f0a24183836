"""transforms.json reader: the real fox capture and synthetic files written by the tests."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.errors import DatasetError
from spirula.engine.ingest import load_dataset, read_scene
from spirula.engine.ingest.nerfstudio import read_transforms

from .synth import write_image, write_transforms

FOX_MISSING = "0005 0016 0017 0024 0032 0051 0068 0071 0075 0083 0087 0088 0093 0099 0104 0106 0113".split()


def _fox(shared_data: Path) -> Path:
    root = shared_data / "fox"
    if not root.is_dir():
        pytest.skip(f"dataset {root} not found")
    return root


def test_fox_frames_and_missing(shared_data, caplog):
    with caplog.at_level("WARNING", logger="spirula.engine.ingest"):
        scene = read_transforms(_fox(shared_data))
    assert len(scene.views) == 50
    note = next(w for w in scene.warnings if "no image file" in w)
    assert note.startswith("17 of 67 frames")
    assert all(f"images/{m}.jpg" in note for m in FOX_MISSING)
    assert any("17 of 67" in r.getMessage() for r in caplog.records)
    names = {v.name for v in scene.views}
    assert "0001.jpg" in names and not names & {f"{m}.jpg" for m in FOX_MISSING}
    cam = scene.views[0].camera
    assert {v.camera for v in scene.views} == {cam}  # one shared camera
    assert (cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy) == (1080, 1920, 1375.52, 1374.49, 554.558, 965.268)
    assert cam.extra == (0.0578421, -0.0805099, -0.000980296, 0.00015575)


def test_fox_cameras_look_at_the_fox(shared_data):
    """The point closest to all optical axes (the fox) is in front of every camera, near
    the image centre: wrong axis flips put it behind or off-image."""
    scene = read_transforms(_fox(shared_data))
    centres, dirs = [], []
    for v in scene.views:
        r, t = v.w2c[:3, :3], v.w2c[:3, 3]
        centres.append(-r.T @ t)
        dirs.append(r.T @ [0.0, 0.0, 1.0])  # OpenCV +z = viewing direction
    a = sum(np.eye(3) - np.outer(d, d) for d in dirs)
    b = sum((np.eye(3) - np.outer(d, d)) @ c for c, d in zip(centres, dirs))
    target = np.linalg.solve(a, b)
    for v in scene.views:
        pc = v.w2c[:3, :3] @ target + v.w2c[:3, 3]
        assert pc[2] > 0
        u = v.camera.fx * pc[0] / pc[2] + v.camera.cx
        w = v.camera.fy * pc[1] / pc[2] + v.camera.cy
        assert 0 < u < v.camera.width and 0 < w < v.camera.height


def test_opengl_to_opencv(tmp_path):
    """A NeRF camera at (0, 0, 4) with identity rotation looks down -z at the origin,
    world +y is up (image row decreasing), world +x is right."""
    rng = np.random.default_rng(0)
    write_image(tmp_path / "images/a.png", 40, 30, rng)
    c2w = np.eye(4)
    c2w[2, 3] = 4.0
    write_transforms(tmp_path / "transforms.json", {"fl_x": 50.0, "w": 40, "h": 30, "frames": [{"file_path": "images/a.png", "transform_matrix": c2w.tolist()}]})
    ds = load_dataset(tmp_path, max_size=None)
    cam = ds.cameras[0]
    assert (cam.fx, cam.fy, cam.cx, cam.cy) == (50.0, 50.0, 20.0, 15.0)  # fl_y = fl_x, centre default
    np.testing.assert_allclose(cam.center, [0, 0, 4], atol=1e-12)

    def project(p):
        pc = cam.w2c[:3, :3] @ p + cam.w2c[:3, 3]
        return pc[2], cam.fx * pc[0] / pc[2] + cam.cx, cam.fy * pc[1] / pc[2] + cam.cy

    z, u, v = project(np.zeros(3))
    assert z == pytest.approx(4.0) and (u, v) == pytest.approx((20.0, 15.0))
    assert project(np.array([0.0, 1.0, 0.0]))[2] < 15.0  # up is up
    assert project(np.array([1.0, 0.0, 0.0]))[1] > 20.0  # right is right


def test_nerf_synthetic_style(tmp_path):
    """camera_angle_x only, no w/h (taken from the image), paths without extension,
    RGBA images composited over black."""
    rng = np.random.default_rng(1)
    from PIL import Image

    frames = []
    for i in range(3):
        rgba = rng.integers(0, 256, size=(20, 24, 4), dtype=np.uint8)
        (tmp_path / "train").mkdir(exist_ok=True)
        Image.fromarray(rgba, "RGBA").save(tmp_path / f"train/r_{i}.png")
        frames.append({"file_path": f"./train/r_{i}", "transform_matrix": np.eye(4).tolist()})
    frames.append({"file_path": "./train/r_9", "transform_matrix": np.eye(4).tolist()})  # missing
    angle = 0.6911112070083618
    write_transforms(tmp_path / "transforms.json", {"camera_angle_x": angle, "frames": frames})
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["r_0.png", "r_1.png", "r_2.png"]
    cam = ds.cameras[0]
    f = 0.5 * 24 / math.tan(0.5 * angle)
    assert (cam.width, cam.height) == (24, 20)
    assert cam.fx == pytest.approx(f) and cam.fy == pytest.approx(f)
    assert (cam.cx, cam.cy) == (12.0, 10.0)
    assert any("1 of 4 frames" in w and "r_9" in w for w in ds.warnings)
    rgba = np.asarray(Image.open(tmp_path / "train/r_0.png"))
    expect = np.rint(rgba[:, :, :3] * (rgba[:, :, 3:4] / 255.0))
    assert np.abs(cam.image.astype(float) - expect).max() <= 1


def test_per_frame_intrinsics_override(tmp_path):
    rng = np.random.default_rng(2)
    write_image(tmp_path / "a.jpg", 32, 24, rng)
    write_image(tmp_path / "b.jpg", 16, 12, rng)
    pose = np.eye(4).tolist()
    meta = {
        "fl_x": 30.0, "fl_y": 31.0, "cx": 15.0, "cy": 11.0, "w": 32, "h": 24,
        "frames": [
            {"file_path": "a.jpg", "transform_matrix": pose},
            {"file_path": "b.jpg", "transform_matrix": pose, "w": 16, "h": 12, "fl_x": 14.0, "fl_y": 15.0, "cx": 8.5, "cy": 6.5},
        ],
    }
    write_transforms(tmp_path / "transforms.json", meta)
    cams = {v.name: v.camera for v in read_scene(tmp_path).views}
    assert (cams["a.jpg"].fx, cams["a.jpg"].fy, cams["a.jpg"].cx, cams["a.jpg"].cy) == (30.0, 31.0, 15.0, 11.0)
    b = cams["b.jpg"]
    assert (b.width, b.height, b.fx, b.fy, b.cx, b.cy) == (16, 12, 14.0, 15.0, 8.5, 6.5)
    # camera_angle_y gives fl_y when fl_y is absent
    meta["frames"][0]["camera_angle_y"] = 1.0
    del meta["fl_y"]
    write_transforms(tmp_path / "transforms.json", meta)
    a = {v.name: v.camera for v in read_scene(tmp_path).views}["a.jpg"]
    assert a.fy == pytest.approx(12.0 / math.tan(0.5))


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"camera_model": "EQUIRECTANGULAR"}, "an equirectangular image must be 2:1, not 8x8"),
        ({"camera_model": "FISHEYE624"}, "camera model FISHEYE624 is not supported"),
        ({"k4": 0.01}, "k4"),
        ({"fl_x": None}, "no focal length"),
    ],
)
def test_bad_transforms(tmp_path, extra, match):
    write_image(tmp_path / "a.png", 8, 8, np.random.default_rng(3))
    meta = {"fl_x": 10.0, "frames": [{"file_path": "a.png", "transform_matrix": np.eye(4).tolist()}], **extra}
    write_transforms(tmp_path / "transforms.json", meta)
    with pytest.raises(DatasetError, match=match):
        load_dataset(tmp_path, max_size=None)


def test_invalid_json_and_pose(tmp_path):
    (tmp_path / "transforms.json").write_text("{ not json")
    with pytest.raises(DatasetError, match=r"transforms\.json: not valid JSON"):
        load_dataset(tmp_path)
    write_image(tmp_path / "a.png", 8, 8, np.random.default_rng(4))
    scaled = (np.eye(4) * 2).tolist()
    write_transforms(tmp_path / "transforms.json", {"fl_x": 10.0, "frames": [{"file_path": "a.png", "transform_matrix": scaled}]})
    with pytest.raises(DatasetError, match="frame 0.*not a proper rotation"):
        load_dataset(tmp_path)


def test_unreadable_image_without_size_is_skipped(tmp_path):
    write_image(tmp_path / "a.png", 8, 6, np.random.default_rng(5))
    (tmp_path / "b.png").write_bytes(b"garbage")
    pose = np.eye(4).tolist()
    frames = [{"file_path": n, "transform_matrix": pose} for n in ("a.png", "b.png")]
    write_transforms(tmp_path / "transforms.json", {"fl_x": 10.0, "frames": frames})
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == ["a.png"] and (ds.cameras[0].width, ds.cameras[0].height) == (8, 6)
    assert any("b.png" in w and "skipped" in w for w in ds.warnings)


def _nerfstudio_equirect_pixel(c2w_gl: np.ndarray, point: np.ndarray, w: int, h: int) -> tuple[float, float]:
    """Where nerfstudio's EQUIRECTANGULAR camera (its generate_rays: fx = fy = h, cx = w / 2,
    cy = h / 2; c0 = (x - cx) / fx, c1 = -(y - cy) / fy, theta = -pi c0, phi = pi (0.5 - c1),
    d = (-sin theta sin phi, cos phi, -cos theta sin phi) in OpenGL camera axes) sees a world
    point: that formula inverted, written here independently of the reader."""
    d = c2w_gl[:3, :3].T @ (point - c2w_gl[:3, 3])
    d = d / np.linalg.norm(d)
    phi = math.acos(d[1])
    theta = math.atan2(-d[0], -d[2])
    c0, c1 = -theta / math.pi, 0.5 - phi / math.pi
    return w / 2 + c0 * h, h / 2 - c1 * h


def test_equirectangular_frames_follow_nerfstudios_convention(tmp_path):
    """camera_model EQUIRECTANGULAR: a 2:1 panorama read as the full sphere and split into
    faces; a world point drawn where nerfstudio's camera sees it lands, through the face
    that sees it, on the same spot of that face's image."""
    from PIL import Image

    from spirula.engine.ingest.faces import Equirect

    rng = np.random.default_rng(51)
    w, h = 256, 128
    c2w = np.eye(4)
    c2w[:3, :3] = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    if np.linalg.det(c2w[:3, :3]) < 0:
        c2w[:3, 0] *= -1
    c2w[:3, 3] = rng.normal(size=3)
    points = [c2w[:3, 3] + rng.normal(size=3) * 2 for _ in range(4)]
    img = np.full((h, w, 3), 60, np.uint8)
    yy, xx = np.mgrid[0:h, 0:w] + 0.5
    for p in points:
        u, v = _nerfstudio_equirect_pixel(c2w, p, w, h)
        img[np.hypot(np.minimum(np.abs(xx - u), w - np.abs(xx - u)), yy - v) < 2.5] = (250, 20, 20)
    (tmp_path / "images").mkdir()
    Image.fromarray(img).save(tmp_path / "images" / "pano.png")
    write_transforms(tmp_path / "transforms.json", {
        "camera_model": "EQUIRECTANGULAR", "w": w, "h": h, "fl_x": h, "fl_y": h, "cx": w / 2, "cy": h / 2,
        "frames": [{"file_path": "images/pano.png", "transform_matrix": c2w.tolist()}]})
    assert read_scene(tmp_path).views[0].camera == Equirect(w, h)
    ds = load_dataset(tmp_path, max_size=None, face_size=64)
    assert sorted(c.face for c in ds.cameras) == sorted(["front", "right", "back", "left", "up", "down"])
    for p in points:
        seen = 0
        for cam in ds.cameras:
            pc = cam.w2c[:3, :3] @ p + cam.w2c[:3, 3]
            if pc[2] <= 0:
                continue
            x, y = cam.fx * pc[0] / pc[2] + cam.cx, cam.fy * pc[1] / pc[2] + cam.cy
            if 2 <= x < cam.width - 2 and 2 <= y < cam.height - 2:
                seen += 1
                r, g, _ = cam.image[int(y), int(x)].astype(int)
                assert r > 150 and g < 100, (cam.name, x, y, cam.image[int(y), int(x)])
        assert seen >= 1


def test_mask_path_per_frame(tmp_path):
    """nerfstudio's per-frame mask_path is that image's mask (white = keep, made binary);
    a listed file that does not exist, one of another size, and a frame without one (no
    masks folder either) are each named in a warning and used unmasked."""
    from PIL import Image

    rng = np.random.default_rng(52)
    w, h = 24, 16
    frames = []
    for name in ("a", "b", "c", "d"):
        write_image(tmp_path / "images" / f"{name}.png", w, h, rng)
        frames.append({"file_path": f"images/{name}.png", "transform_matrix": np.eye(4).tolist()})
    grey = rng.integers(0, 256, (h, w), dtype=np.uint8)
    (tmp_path / "segm").mkdir()
    Image.fromarray(grey).save(tmp_path / "segm" / "a_mask.png")
    Image.fromarray(np.zeros((8, 12), np.uint8)).save(tmp_path / "segm" / "d_mask.png")
    frames[0]["mask_path"] = "segm/a_mask.png"
    frames[1]["mask_path"] = "segm/b_mask.png"   # does not exist
    frames[3]["mask_path"] = "segm/d_mask.png"   # another size; c: none listed
    write_transforms(tmp_path / "transforms.json", {"fl_x": 20.0, "w": w, "h": h, "frames": frames})
    ds = load_dataset(tmp_path, max_size=None)
    by = {c.name: c for c in ds.cameras}
    assert ds.masks == "ignore"   # auto: mask files mean "leave these pixels out"
    np.testing.assert_array_equal(by["a.png"].mask, np.where(grey >= 128, 255, 0))
    assert all(c.mask is None for n, c in by.items() if not n.endswith("a.png"))
    listed = [x for x in ds.warnings if "mask_path" in x and "not exist" in x]
    assert len(listed) == 1 and "b_mask.png" in listed[0] and "every pixel kept" in listed[0], ds.warnings
    none = [x for x in ds.warnings if "no mask" in x]
    assert len(none) == 1 and "c.png" in none[0] and "no masks folder" in none[0], ds.warnings
    size = [x for x in ds.warnings if "differ" in x and "size" in x]
    assert len(size) == 1 and "d_mask.png" in size[0] and "12x8" in size[0]
    assert "1 of 4 images masked" in ds.masks_note and "mask_path" in ds.masks_note
    off = load_dataset(tmp_path, max_size=None, masks="off")
    assert all(c.mask is None for c in off.cameras) and not any("mask" in x for x in off.warnings)
