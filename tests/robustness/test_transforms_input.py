"""Input class 3, transforms.json as nerfstudio, instant-ngp, NeRF-synthetic, NeuS2 and
friends write it: intrinsics in each of the usual ways, shared or per frame; distortion
and fisheye models; paths as those tools write them; frames whose image is missing."""

from __future__ import annotations

import json
import math
import unicodedata

import numpy as np
import pytest

from spirula.engine.errors import DatasetError
from spirula.engine.ingest import load_dataset, read_scene

from .fixtures import ply_bytes, save_png

POSE = np.eye(4).tolist()


def _write(folder, meta, name="transforms.json"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(meta), encoding="utf-8")


def _image(path, w=40, h=30):
    return save_png(path, np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8))


@pytest.mark.parametrize("top, frame, expect", [
    # nerfstudio: fl_x fl_y cx cy w h at the top
    ({"fl_x": 33.0, "fl_y": 34.0, "cx": 19.0, "cy": 14.5, "w": 40, "h": 30}, {}, (33.0, 34.0, 19.0, 14.5)),
    # instant-ngp / NeRF: camera_angle_x only (fl_y = fl_x, centre = image centre, size from the image)
    ({"camera_angle_x": 1.2}, {}, (20 / math.tan(0.6), 20 / math.tan(0.6), 20.0, 15.0)),
    # both angles
    ({"camera_angle_x": 1.2, "camera_angle_y": 0.9}, {}, (20 / math.tan(0.6), 15 / math.tan(0.45), 20.0, 15.0)),
    # per-frame intrinsics (Polycam, Record3D exports), overriding nothing at the top
    ({}, {"fl_x": 31.0, "fl_y": 32.0, "cx": 20.5, "cy": 15.5, "w": 40, "h": 30}, (31.0, 32.0, 20.5, 15.5)),
    # a frame's keys win over the top's
    ({"fl_x": 10.0, "cx": 1.0}, {"fl_x": 30.0}, (30.0, 30.0, 1.0, 15.0)),
    # only fl_y
    ({"fl_y": 36.0}, {}, (36.0, 36.0, 20.0, 15.0)),
    # numbers written as strings
    ({"fl_x": "33.5", "cy": "14", "w": "40", "h": "30.0"}, {}, (33.5, 33.5, 20.0, 14.0)),
    # NeuS2: a 4x4 intrinsic_matrix per frame
    ({}, {"intrinsic_matrix": [[35.0, 0.0, 19.5, 0.0], [0.0, 36.0, 14.0, 0.0], [0, 0, 1, 0], [0, 0, 0, 1]]},
     (35.0, 36.0, 19.5, 14.0)),
    # a 3x3 one at the top
    ({"intrinsic_matrix": [[35.0, 0.0, 19.5], [0.0, 36.0, 14.0], [0, 0, 1]]}, {}, (35.0, 36.0, 19.5, 14.0)),
])
def test_intrinsics_every_usual_way(tmp_path, top, frame, expect):
    _image(tmp_path / "images/a.png")
    _write(tmp_path, {**top, "frames": [{"file_path": "images/a.png", "transform_matrix": POSE, **frame}]})
    cam = read_scene(tmp_path).views[0].camera
    assert (cam.model, cam.width, cam.height) == ("PINHOLE", 40, 30)
    np.testing.assert_allclose((cam.fx, cam.fy, cam.cx, cam.cy), expect, rtol=1e-15)


@pytest.mark.parametrize("meta, model, extra", [
    ({"k1": 0.1, "k2": -0.02, "p1": 0.001, "p2": -0.002}, "OPENCV", (0.1, -0.02, 0.001, -0.002)),
    ({"camera_model": "OPENCV", "k1": 0.1, "k3": 0.003}, "FULL_OPENCV", (0.1, 0, 0, 0, 0.003, 0, 0, 0)),
    ({"camera_model": "OPENCV_FISHEYE", "k1": 0.03, "k2": 0.006, "k3": 0.0004, "k4": 0.0001},
     "OPENCV_FISHEYE", (0.03, 0.006, 0.0004, 0.0001)),
    ({"is_fisheye": True, "k1": 0.03}, "OPENCV_FISHEYE", (0.03, 0, 0, 0)),
    ({"camera_model": "PINHOLE"}, "PINHOLE", ()),
])
def test_distortion_models(tmp_path, meta, model, extra):
    _image(tmp_path / "a.png")
    _write(tmp_path, {"fl_x": 30.0, **meta, "frames": [{"file_path": "a.png", "transform_matrix": POSE}]})
    cam = read_scene(tmp_path).views[0].camera
    assert cam.model == model and cam.extra == extra
    assert len(load_dataset(tmp_path, max_size=None).cameras) == 1  # and it undistorts


@pytest.mark.parametrize("meta, message", [
    # nerfstudio's EQUIRECTANGULAR is read (issue 51), and a frame that is not 2:1 refused
    ({"camera_model": "EQUIRECTANGULAR"}, "an equirectangular image must be 2:1, not 40x30"),
    ({"camera_model": "FISHEYE624"}, "camera model FISHEYE624 is not supported"),
    ({"k4": 0.01}, "distortion coefficient k4 of camera model OPENCV is not supported (an r^8 radial term; "
                   "only k1 k2 k3 p1 p2)"),
    ({"camera_model": "OPENCV_FISHEYE", "p1": 0.01}, "camera model OPENCV_FISHEYE has no tangential distortion"),
    ({"fl_x": None}, "no focal length (fl_x/fl_y, camera_angle_x/camera_angle_y or intrinsic_matrix)"),
    ({"fl_x": "wide"}, "fl_x is not a number ('wide')"),
    ({"fl_x": None, "camera_angle_x": 3.5}, "camera_angle_x=3.5 is not in (0, pi)"),
])
def test_refusals_name_the_file_and_the_problem(tmp_path, meta, message):
    _image(tmp_path / "a.png")
    _write(tmp_path, {"fl_x": 30.0, **meta, "frames": [{"file_path": "a.png", "transform_matrix": POSE}]})
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path, max_size=None)
    assert str(e.value).startswith(f"{tmp_path / 'transforms.json'} (a.png): {message}")


def test_paths_as_tools_write_them(tmp_path):
    """'./x', Windows back-slashes, no extension (NeRF-synthetic), an absolute path from
    another machine, a name in the other Unicode normal form, a file:// URL; missing
    frames are skipped with a warning naming them."""
    root = tmp_path / "scene"
    for name in ("a.png", "b.png", "c.png", "d.png", "e\u0301t\u00e9.png", "f.png"):
        _image(root / "images" / unicodedata.normalize("NFC", name))
    frames = [
        {"file_path": "./images/a.png"},
        {"file_path": "images\\b.png"},
        {"file_path": "images/c"},
        {"file_path": "/home/someone/captures/scene/images/d.png"},
        {"file_path": unicodedata.normalize("NFD", "images/\u00e9t\u00e9.png")},
        {"file_path": f"file://{root}/images/f.png"},
        {"file_path": "images/gone.png"},
        {"file_path": "C:\\Users\\someone\\gone too.jpg"},
    ]
    _write(root, {"fl_x": 30.0, "frames": [{**f, "transform_matrix": POSE} for f in frames]})
    ds = load_dataset(root, max_size=None)
    assert [c.name for c in ds.cameras] == ["a.png", "b.png", "c.png", "d.png", "f.png",
                                            unicodedata.normalize("NFC", "\u00e9t\u00e9.png")]
    assert ds.warnings == [
        f"2 of 8 frames in {root / 'transforms.json'} have no image file, skipped: "
        "C:\\Users\\someone\\gone too.jpg, images/gone.png",
        f"1 image paths in {root / 'transforms.json'} do not exist as written; found by another letter case "
        "or their trailing components: /home/someone/captures/scene/images/d.png -> images/d.png (trailing "
        "components)",
    ]


def test_nerf_synthetic_split_files(tmp_path):
    """No transforms.json but transforms_{train,val,test}.json: read together, RGBA
    composited over black, an image listed twice used once."""
    rng = np.random.default_rng(2)
    for split in ("train", "val", "test"):
        for i in range(2):
            rgba = rng.integers(0, 256, (20, 20, 4), dtype=np.uint8)
            save_png(tmp_path / split / f"r_{i}.png", rgba)
    angle = 0.6911112070083618
    for split in ("train", "val", "test"):
        frames = [{"file_path": f"./{split}/r_{i}", "transform_matrix": POSE} for i in range(2)]
        if split == "test":
            frames.append({"file_path": "./train/r_0", "transform_matrix": POSE})
        _write(tmp_path, {"camera_angle_x": angle, "frames": frames}, f"transforms_{split}.json")
    ds = load_dataset(tmp_path, max_size=None)
    assert [c.name for c in ds.cameras] == [f"{s}/r_{i}.png" for s in ("test", "train", "val") for i in range(2)]
    assert ds.warnings == []
    assert ds.cameras[0].fx == pytest.approx(10 / math.tan(angle / 2), rel=1e-14)


def test_nerfstudio_points_from_ply_file_path(tmp_path):
    """nerfstudio's sparse_pc.ply (Open3D: double x y z, uchar colours) gives the points."""
    _image(tmp_path / "images/a.png")
    pts = np.zeros(3, [("x", "f8"), ("y", "f8"), ("z", "f8"), ("red", "f8"), ("green", "f8"), ("blue", "f8")])
    pts["x"], pts["y"], pts["z"] = [0.5, -1.25, 2.0], [1.0, 2.0, 3.0], [-4.0, 0.0, 1e-3]
    pts["red"], pts["green"], pts["blue"] = [255, 0, 7], [1, 2, 3], [9, 8, 7]
    props = [("double", "x"), ("double", "y"), ("double", "z"), ("uchar", "red"), ("uchar", "green"), ("uchar", "blue")]
    (tmp_path / "sparse_pc.ply").write_bytes(ply_bytes("binary_little_endian", [("vertex", pts, props)]))
    _write(tmp_path, {"fl_x": 30.0, "ply_file_path": "sparse_pc.ply",
                      "frames": [{"file_path": "images/a.png", "transform_matrix": POSE}]})
    ds = load_dataset(tmp_path, max_size=None)
    np.testing.assert_array_equal(ds.points, np.array([[0.5, 1.0, -4.0], [-1.25, 2.0, 0.0], [2.0, 3.0, 1e-3]],
                                                      np.float32))
    np.testing.assert_array_equal(ds.colors, [[255, 1, 9], [0, 2, 8], [7, 3, 7]])


def test_all_frames_missing_is_an_error(tmp_path):
    _write(tmp_path, {"fl_x": 30.0, "frames": [{"file_path": "x.png", "transform_matrix": POSE}]})
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path)
    assert str(e.value) == (f"{tmp_path / 'transforms.json'}: none of the 1 listed images exists: expected x.png; "
                            "the folder holds no image file")
