"""The viewport camera math (no Qt, no GPU)."""

import math

import numpy as np

from spirula.app.camera import OrbitCamera, pick


def _check_rigid(m):
    r = m[:3, :3]
    assert np.allclose(r @ r.T, np.eye(3), atol=1e-9) and np.isclose(np.linalg.det(r), 1.0)


def test_look_at_puts_target_on_the_optical_axis():
    rng = np.random.default_rng(1)
    for _ in range(20):
        up = rng.normal(size=3)
        cam = OrbitCamera(up=up)
        eye, target = rng.normal(size=3) * 3, rng.normal(size=3)
        cam.look_at(eye, target)
        m = cam.w2c()
        _check_rigid(m)
        t = m[:3, :3] @ target + m[:3, 3]
        e = m[:3, :3] @ cam.eye + m[:3, 3]
        assert np.allclose(e, 0, atol=1e-9)
        assert np.allclose(t[:2], 0, atol=1e-6) and t[2] > 0  # straight ahead (OpenCV +z)
        # image "up" (-y) leans towards world up unless looking straight along it
        f = cam.forward
        if abs(f @ cam.up) < 0.95:
            assert (-m[1, :3]) @ cam.up > 0


def test_orbit_keeps_distance_and_target_zoom_pan_fly():
    cam = OrbitCamera(target=(1, 2, 3), distance=4.0, up=(0, 0, 1), scale=2.0)
    t0 = cam.target.copy()
    e0 = cam.eye.copy()
    cam.orbit(120, -40)
    assert np.allclose(cam.target, t0)
    assert math.isclose(np.linalg.norm(cam.eye - cam.target), 4.0, rel_tol=1e-9)
    assert not np.allclose(cam.eye, e0)
    cam.orbit(0, 1e6)  # pitch is clamped short of the pole
    assert abs(cam.pitch) < math.radians(89.01)
    d = cam.distance
    cam.zoom(2)
    assert cam.distance < d
    x, y, _ = cam.axes()
    before = cam.target.copy()
    cam.pan(10, 0, 500)
    moved = cam.target - before
    assert np.allclose(np.cross(moved, x), 0, atol=1e-9) and moved @ x < 0  # the scene follows the cursor
    eye = cam.eye.copy()
    cam.fly(1, 0, 0, dt=0.5)
    assert (cam.eye - eye) @ cam.forward > 0 and math.isclose(cam.distance, np.linalg.norm(cam.eye - cam.target))


def test_pick_finds_the_camera_under_the_cursor():
    cam = OrbitCamera(up=(0, 0, 1))
    cam.look_at((0, -5, 0), (0, 0, 0))
    centers = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.5], [0.0, -10.0, 0.0]])  # the last is behind
    uv, front = cam.project(centers, 640, 480)
    assert front.tolist() == [True, True, False]
    assert np.allclose(uv[0], (320, 240))
    assert pick(cam, centers, 640, 480, *uv[1]) == 1
    assert pick(cam, centers, 640, 480, uv[1][0] + 40, uv[1][1]) is None


def test_start_view_fits_every_camera(rng):
    """fit_points moves the eye back until every camera centre is inside the narrower field
    of view (checked by the angle from the line of sight, not by the formula it uses)."""
    from PySide6 import QtCore

    from spirula.app.viewport_widget import fit_points

    center = rng.normal(size=3)
    points = center + rng.normal(scale=3.0, size=(40, 3))
    eye = center + np.array([0.5, 0.3, 1.0])          # too close: most points outside
    size = QtCore.QSize(800, 450)
    fov_y = 50.0
    new_eye = fit_points(eye, center, points, fov_y, size)
    d = (center - new_eye) / np.linalg.norm(center - new_eye)
    assert np.allclose(d, (center - eye) / np.linalg.norm(center - eye))   # same line of sight
    rays = points - new_eye
    ang = np.arccos(np.clip((rays @ d) / np.linalg.norm(rays, axis=1), -1, 1))
    assert ang.max() <= np.radians(fov_y / 2) + 1e-9                     # 16:9: the vertical is narrower
    assert ang.max() > np.radians(fov_y / 2) * 0.8                        # and not much farther than needed
    far = center + (eye - center) * 100
    assert np.allclose(fit_points(far, center, points, fov_y, size), far)  # already fits: unchanged
