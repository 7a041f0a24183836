"""Wide lenses split into pinhole faces (spirula/engine/ingest/faces.py) against an independent
float64 NumPy reference of the projections.

The reference (:func:`ref_project`) is written here from COLMAP's model formulas
(``src/colmap/sensor/models.h``: the fisheye models take theta = atan2(r, z) and distort
in the equidistant plane; EQUIRECTANGULAR: u = W (0.5 + atan2(x, z) / 2 pi), v = H (0.5 +
atan2(y, hypot(x, z)) / pi)), not from the engine's camera code; it is itself checked
against pycolmap's img_from_cam where pycolmap projects (in front of the camera).

The property tested: a world point seen at a face pixel centre (the face's own pinhole
camera and its w2c) maps, through the wide camera's reference model and its source w2c,
to exactly the source position the face's bilinear map samples at that pixel (the
weighted mean of its four source pixel centres). A face's every pixel lies inside the
source image's pixel centres, and faces are dropped only when empty.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from spirula.engine.errors import DatasetError
from spirula.engine.ingest.camera_model import CameraModel
from spirula.engine.ingest.faces import FACE_NAMES, Equirect, face_side, split_faces
from tests.ingest.synth import random_pose


def ref_project(model: str, params: tuple, d: np.ndarray) -> np.ndarray:
    """[N, 2] float64 pixel coordinates (pixel centres at + 0.5) of source-camera
    directions d [N, 3] through COLMAP's ``model`` with COLMAP's parameter list."""
    x, y, z = d[:, 0], d[:, 1], d[:, 2]
    if model == "EQUIRECTANGULAR":
        w, h = params
        lon = np.arctan2(x, z)
        lat = np.arctan2(y, np.sqrt(x * x + z * z))
        return np.stack([w * (0.5 + lon / (2 * np.pi)), h * (0.5 + lat / np.pi)], 1)
    single = model in ("SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE", "SIMPLE_FISHEYE")
    if single:
        f, cx, cy, *k = params
        fx = fy = f
    else:
        fx, fy, cx, cy, *k = params
    r = np.sqrt(x * x + y * y)
    if model == "FOV":
        assert np.all(z > 0)
        xn, yn = x / z, y / z
        rn = np.sqrt(xn * xn + yn * yn)
        w = k[0]
        factor = np.arctan(2 * rn * np.tan(w / 2)) / (rn * w)
        return np.stack([fx * xn * factor + cx, fy * yn * factor + cy], 1)
    theta = np.arctan2(r, z)
    a, b = x * theta / r, y * theta / r   # the equidistant plane: |(a, b)| = theta
    t2 = theta * theta
    if model in ("SIMPLE_FISHEYE", "FISHEYE"):
        ad, bd = a, b
    elif model == "SIMPLE_RADIAL_FISHEYE":
        ad, bd = a * (1 + k[0] * t2), b * (1 + k[0] * t2)
    elif model == "RADIAL_FISHEYE":
        s = 1 + k[0] * t2 + k[1] * t2 ** 2
        ad, bd = a * s, b * s
    elif model == "OPENCV_FISHEYE":
        s = 1 + k[0] * t2 + k[1] * t2 ** 2 + k[2] * t2 ** 3 + k[3] * t2 ** 4
        ad, bd = a * s, b * s
    elif model == "THIN_PRISM_FISHEYE":
        k1, k2, p1, p2, k3, k4, sx1, sy1 = k
        s = 1 + k1 * t2 + k2 * t2 ** 2 + k3 * t2 ** 3 + k4 * t2 ** 4
        ad = a * s + 2 * p1 * a * b + p2 * (t2 + 2 * a * a) + sx1 * t2
        bd = b * s + 2 * p2 * a * b + p1 * (t2 + 2 * b * b) + sy1 * t2
    else:
        raise AssertionError(model)
    return np.stack([fx * ad + cx, fy * bd + cy], 1)


# (model, width, height, COLMAP params): wide lenses of 150-200 degrees, some with a frame
# that cuts the image circle
WIDE = [
    ("SIMPLE_RADIAL_FISHEYE", 160, 160, (52.0, 80.3, 79.6, 0.012)),
    ("RADIAL_FISHEYE", 200, 150, (60.0, 99.0, 75.5, -0.01, 0.002)),
    ("OPENCV_FISHEYE", 180, 180, (55.0, 56.0, 90.4, 89.1, 0.03, -0.004, 0.001, -0.0002)),
    ("THIN_PRISM_FISHEYE", 170, 160, (54.0, 53.0, 85.0, 80.2, 0.02, -0.003, 0.0008, -0.0005, 0.0004, 0.0,
                                      0.0006, -0.0004)),
    ("FISHEYE", 150, 150, (45.0, 46.0, 75.0, 75.0)),
    ("FOV", 200, 160, (70.0, 71.0, 100.0, 80.0, 1.1)),
]


def _camera(model, w, h, params):
    if model == "EQUIRECTANGULAR":
        return Equirect(w, h)
    return CameraModel.from_colmap(model, w, h, params, "test")


def test_reference_matches_pycolmap_in_front():
    pycolmap = pytest.importorskip("pycolmap")
    rng = np.random.default_rng(3)
    d = rng.normal(size=(200, 3))
    d[:, 2] = np.abs(d[:, 2]) + 0.2   # pycolmap projects only in front of the camera
    for model, w, h, params in WIDE + [("EQUIRECTANGULAR", 200, 100, (200, 100))]:
        cam = pycolmap.Camera(model=model, width=w, height=h, params=list(params))
        got = np.asarray(cam.img_from_cam(d), np.float64)
        np.testing.assert_allclose(ref_project(model, params, d), got, atol=1e-6, err_msg=model)


def _sample_positions(face) -> np.ndarray:
    """[M, 2] source positions (u, v) each face pixel samples: the bilinear weights' mean
    of the four source pixel centres (exact, since bilinear interpolation reproduces the
    coordinates); equirect columns unwrapped next to the first corner."""
    w = face.source.width
    cols = (face.index % w).astype(np.float64)
    rows = (face.index // w).astype(np.float64)
    cols = np.where(cols - cols[0] < -w / 2, cols + w, cols)
    cols = np.where(cols - cols[0] > w / 2, cols - w, cols)
    wt = face.weights.astype(np.float64)
    return np.stack([(wt * (cols + 0.5)).sum(0), (wt * (rows + 0.5)).sum(0)], 1)


@pytest.mark.parametrize("spec", WIDE + [("EQUIRECTANGULAR", 240, 120, (240, 120))], ids=lambda s: s[0])
@pytest.mark.parametrize("face_size", [0, 40])
def test_face_pixels_map_through_the_wide_model(spec, face_size):
    model, w, h, params = spec
    rng = np.random.default_rng(11)
    cam = _camera(model, w, h, params)
    src_w2c = random_pose(rng)
    faces = split_faces(cam, face_size)
    assert [f.name for f in faces] == [n for n in FACE_NAMES if n in {f.name for f in faces}]
    for face in faces:
        k = face.camera
        assert face_size == 0 or face.side == face_size
        assert k.model == "PINHOLE" and k.fx == k.fy == face.side / 2
        # world points at random depths along each face pixel centre's ray (the face's w2c)
        row, col = np.mgrid[0:k.height, 0:k.width]
        ray = np.stack([(col.ravel() + 0.5 - k.cx) / k.fx, (row.ravel() + 0.5 - k.cy) / k.fy,
                        np.ones(row.size)], 1)
        w2c = face.w2c(src_w2c)
        r, t = w2c[:3, :3], w2c[:3, 3]
        world = (ray * rng.uniform(0.5, 4.0, (len(ray), 1)) - t) @ r  # R^T (p - t)
        src = world @ src_w2c[:3, :3].T + src_w2c[:3, 3]
        uv = ref_project(model, params, src)
        got = _sample_positions(face)
        if model == "EQUIRECTANGULAR":  # same longitude, possibly a turn apart; the top and bottom
            # half rows sample the outermost row (clamped); a pole's longitude is any
            uv[:, 0] = got[:, 0] + ((uv[:, 0] - got[:, 0] + w / 2) % w - w / 2)
            uv[:, 1] = np.clip(uv[:, 1], 0.5, h - 0.5)
            pole = np.hypot(src[:, 0], src[:, 2]) < 1e-9 * np.abs(src[:, 1])
            uv[pole, 0] = got[pole, 0]
        else:  # every pixel of a face lies between the source's pixel centres
            assert uv[:, 0].min() >= 0.5 - 1e-6 and uv[:, 0].max() <= w - 0.5 + 1e-6, face.name
            assert uv[:, 1].min() >= 0.5 - 1e-6 and uv[:, 1].max() <= h - 0.5 + 1e-6, face.name
        np.testing.assert_allclose(got, uv, atol=2e-3, err_msg=f"{model} {face.name}")


def test_face_images_resample_a_linear_ramp():
    # bilinear sampling reproduces a linear image exactly: each face pixel is the ramp at the
    # reference position (to the uint8 rounding)
    model, w, h, params = WIDE[0]
    cam = _camera(model, w, h, params)
    v, u = np.mgrid[0:h, 0:w] + 0.5
    image = np.stack([u, v, 0.5 * (u + v)], -1).astype(np.uint8)  # 0..160 fits 8 bits
    for face in split_faces(cam, 32):
        out = face(image).astype(np.float64)
        pos = _sample_positions(face).reshape(face.camera.height, face.camera.width, 2)
        assert np.abs(out[..., 0] - (pos[..., 0] - 0.5)).max() <= 0.5 + 1e-6
        assert np.abs(out[..., 1] - (pos[..., 1] - 0.5)).max() <= 0.5 + 1e-6


def test_front_facing_fisheye_has_no_back_and_full_equirect_has_six():
    f = 80 / (math.pi / 2)  # 180 degrees across a 160 px circle
    fish = CameraModel("SIMPLE_RADIAL_FISHEYE", 160, 160, f, f, 80.0, 80.0, (0.0,))
    names = [fc.name for fc in split_faces(fish, 64)]
    assert names == ["front", "right", "left", "up", "down"]
    sides = {fc.name: fc.camera for fc in split_faces(fish, 64)}
    assert (sides["front"].width, sides["front"].height) == (64, 64)
    # a 180-degree lens fills half of each side face (the half towards the front)
    assert sides["right"].height == 64 and 29 <= sides["right"].width <= 32
    assert [fc.name for fc in split_faces(Equirect(128, 64), 32)] == list(FACE_NAMES)


def test_per_face_size_follows_the_source_resolution():
    # equirect: the front face's median pixel covers about one source pixel, and doubling
    # the panorama doubles the face
    a = face_side(Equirect(400, 200), np.eye(3), 0)
    b = face_side(Equirect(800, 400), np.eye(3), 0)
    assert abs(b - 2 * a) <= 2
    assert 400 / (2 * math.pi) * 1.2 <= a <= 400 / math.pi * 1.05  # between half-res and the centre's


def test_equirect_must_be_two_to_one():
    with pytest.raises(DatasetError, match=r"cams\.txt: an equirectangular image must be 2:1, not 300x100"):
        Equirect(300, 100).check("cams.txt")


def test_a_circular_fisheye_keeps_no_black_outside_its_image_circle():
    # a 220-degree lens whose image circle (radius 70 px) the 200x150 frame holds whole: the
    # frame's corners are black. The model maps them (to directions past 110 degrees), so
    # without the circle the side faces take black pixels; with it none, and the circle's
    # angle is found within the 1.5 % margin
    from spirula.engine.ingest.faces import image_circle_angle

    w, h, radius, lens = 200, 150, 70.0, math.radians(110)
    f = radius / lens
    cam = CameraModel("SIMPLE_RADIAL_FISHEYE", w, h, f, f, 100.0, 75.0, (0.0,))
    rng = np.random.default_rng(12)
    image = rng.integers(40, 256, (h, w, 3), dtype=np.uint8)
    v, u = np.mgrid[0:h, 0:w] + 0.5
    image[np.hypot(u - 100, v - 75) > radius] = 0
    angle = image_circle_angle(cam, image)
    assert angle == pytest.approx(0.985 * lens, abs=math.radians(1.0))
    black = lambda faces: sum(int((fc(image).max(2) < 12).sum()) for fc in faces)  # noqa: E731
    assert black(split_faces(cam, 48)) > 0
    assert black(split_faces(cam, 48, max_angle=angle)) == 0
    # a full frame (no black outside a circle) and a dark scene corner are no circle
    full = rng.integers(40, 256, (h, w, 3), dtype=np.uint8)
    assert image_circle_angle(cam, full) is None
    full[:20, :20] = 0
    assert image_circle_angle(cam, full) is None
