"""Steering the viewport (issue 50 item 2), on the view controller alone (no engine): F frames
the subject's box, Shift+F the whole scene, the start view is the first training camera's,
the wheel zooms towards the point under the cursor and Alt+drag orbits about it. Every
check is against the pinhole projection of spirula/app/camera.py, written out here again."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.studio import protocol as M
from spirula.engine.studio.framing import framing, view_boxes


def _project(w2c, fov_y_deg, w, h, p):
    """Pixel (u, v) and depth of world points p [N, 3]: an independent pinhole projection."""
    c = np.asarray(p, float) @ w2c[:3, :3].T + w2c[:3, 3]
    f = 0.5 * h / np.tan(np.radians(fov_y_deg) / 2)
    return np.stack([f * c[:, 0] / c[:, 2] + w / 2, f * c[:, 1] / c[:, 2] + h / 2], 1), c[:, 2]


def _look_at_c2w(eye, target, up=(0.0, -1.0, 0.0)):
    f = np.asarray(target, float) - eye
    f /= np.linalg.norm(f)
    x = np.cross(-np.asarray(up, float), f)
    x /= np.linalg.norm(x)
    y = np.cross(f, x)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = x, y, f, eye
    return m


@pytest.fixture
def view(qapp):
    from PySide6 import QtCore

    from spirula.app.viewport_widget import ViewController

    sent = []
    c = ViewController(sent.append)
    c.timer.stop()
    c.size = QtCore.QSize(640, 400)
    rng = np.random.default_rng(7)
    subject = rng.normal(0, 1, (400, 3)) * [0.3, 0.5, 0.2] + [1.0, -0.5, 2.0]   # an elongated subject
    floaters = rng.uniform(-20, 20, (40, 3))                                     # far floaters
    points = np.concatenate([subject, floaters])
    eyes = [np.array([1.0, -0.5, 2.0]) + 4.0 * np.array([np.cos(a), -0.3, np.sin(a)]) for a in np.linspace(0, 5, 8)]
    cams = tuple(M.CameraInfo(f"c{i}", tuple(_look_at_c2w(e, [1.0, -0.5, 2.0]).reshape(-1)), 300.0, 300.0, 160.0,
                              120.0, 320, 240, "test" if i == 0 else "train") for i, e in enumerate(eyes))
    msg = M.SceneLoaded("review", "s", "/s", len(points), (1.0, -0.5, 2.0), 3.0, (0.0, -1.0, 0.0), cams,
                        **framing(points, (1.0, -0.5, 2.0), 3.0, np.array(eyes)))
    c.set_scene(msg)
    return c, sent, msg, subject


def test_the_subject_box_leaves_out_far_floaters():
    rng = np.random.default_rng(3)
    subject = rng.uniform(-1, 1, (500, 3))
    floaters = rng.uniform(30, 40, (30, 3))
    box, scene = view_boxes(np.concatenate([subject, floaters]), (0, 0, 0), 5.0, np.array([[0.0, 0.0, -6.0]]))
    assert np.all(np.abs(np.asarray(box)) < 1.0) and np.all(np.abs(np.asarray(box)) > 0.8)
    assert scene[2] <= -6.0 and scene[3] > 30.0     # the whole scene: the cameras and the floaters
    # no points: the centre +- half the radius
    box, _ = view_boxes(None, (1, 2, 3), 2.0)
    assert np.allclose(box, (0, 1, 2, 2, 3, 4))


def test_the_start_view_is_the_first_training_cameras(view):
    c, sent, msg, _ = view
    first = np.asarray(msg.cameras[1].c2w).reshape(4, 4)     # camera 0 is held out
    w2c = np.asarray(sent[-1].w2c).reshape(4, 4)
    assert np.allclose(np.linalg.inv(w2c), first, atol=1e-6)
    assert np.isclose(sent[-1].fov_y_deg, np.degrees(2 * np.arctan(120 / 300)))


@pytest.mark.parametrize("which", ["subject", "all"])
def test_f_frames_the_subject_and_shift_f_everything(view, which):
    c, sent, msg, _ = view
    c.camera.orbit(130, -40)                          # somewhere else first
    c.frame_subject() if which == "subject" else c.frame_all()
    box = np.asarray(msg.subject if which == "subject" else msg.extent).reshape(2, 3)
    w2c, fov = np.asarray(sent[-1].w2c).reshape(4, 4), sent[-1].fov_y_deg
    w, h = c.size.width(), c.size.height()
    centre = box.mean(0)
    uv, z = _project(w2c, fov, w, h, centre[None])
    assert np.allclose(uv[0], [w / 2, h / 2], atol=1e-6) and z[0] > 0     # looks at the box centre
    corners = np.array([[box[(k >> a) & 1, a] for a in range(3)] for k in range(8)])
    uv, z = _project(w2c, fov, w, h, corners)
    assert (z > 0).all() and (uv >= 0).all() and (uv[:, 0] <= w).all() and (uv[:, 1] <= h).all()
    # and fills it: a corner reaches the margin (0.9 of the half size) on one axis
    reach = np.max(np.abs(uv - [w / 2, h / 2]) / [w / 2, h / 2])
    assert 0.85 <= reach <= 0.9 + 1e-6, reach


def test_the_wheel_zooms_towards_the_point_under_the_cursor(view):
    c, sent, msg, subject = view
    w, h = c.size.width(), c.size.height()
    c.frame_subject()
    w2c0 = np.asarray(sent[-1].w2c).reshape(4, 4)
    pts = np.asarray(msg.pick_points).reshape(-1, 3)
    uv, z = _project(w2c0, c.camera.fov_y_deg, w, h, pts)
    inside = (z > 0) & (np.abs(uv[:, 0] - w / 2) > 60) & (uv[:, 0] > 20) & (uv[:, 0] < w - 20) & (uv[:, 1] > 20) \
        & (uv[:, 1] < h - 20)
    k = np.flatnonzero(inside)[np.argmin(z[inside])]      # an off-centre point, the nearest where it shows
    target = c.point_under(*uv[k])
    _, zt = _project(w2c0, c.camera.fov_y_deg, w, h, target[None])
    seen = (np.hypot(*(uv - uv[k]).T) <= 12) & (z > 0)
    assert np.isclose(zt[0], z[seen].min())               # at the depth of the nearest point there
    eye0 = np.linalg.inv(w2c0)[:3, 3]
    c.zoom_at(*uv[k], 1.0)
    c.push()
    w2c1 = np.asarray(sent[-1].w2c).reshape(4, 4)
    eye1 = np.linalg.inv(w2c1)[:3, 3]
    uv1, _ = _project(w2c1, c.camera.fov_y_deg, w, h, target[None])
    assert np.allclose(uv1[0], uv[k], atol=0.5)           # the point stays under the cursor
    d0, d1 = np.linalg.norm(target - eye0), np.linalg.norm(target - eye1)
    assert d1 < 0.9 * d0                                   # and the eye moved towards it
    assert np.allclose(np.cross(eye1 - eye0, target - eye0), 0, atol=1e-6 * d0 * d0)   # along the line to it


def test_the_wheel_without_points_zooms_towards_the_cursor_at_the_targets_depth(view):
    c, sent, _, _ = view
    c.pick_points = None
    w, h = c.size.width(), c.size.height()
    w2c0 = c.camera.w2c()
    x, y = 500.0, 90.0
    p = c.point_under(x, y)
    uv, z = _project(w2c0, c.camera.fov_y_deg, w, h, p[None])
    assert np.allclose(uv[0], [x, y], atol=1e-6) and np.isclose(z[0], c.camera.distance)
    c.zoom_at(x, y, 2.0)
    uv1, z1 = _project(c.camera.w2c(), c.camera.fov_y_deg, w, h, p[None])
    assert np.allclose(uv1[0], [x, y], atol=1e-6) and np.isclose(z1[0], z[0] * 0.85 ** 2)


def test_alt_drag_orbits_about_the_point_under_the_cursor(view):
    from PySide6 import QtCore, QtGui

    c, sent, msg, _ = view
    c.frame_subject()
    w, h = c.size.width(), c.size.height()
    pts = np.asarray(msg.pick_points).reshape(-1, 3)
    uv, z = _project(c.camera.w2c(), c.camera.fov_y_deg, w, h, pts)
    ok = np.flatnonzero((z > 0) & (np.abs(uv[:, 0] - w / 2) > 50) & (uv[:, 0] > 10) & (uv[:, 0] < w - 10)
                        & (uv[:, 1] > 10) & (uv[:, 1] < h - 10))
    start = uv[ok[0]]
    pivot = c.point_under(*start)
    left, alt = QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.AltModifier

    def ev(kind, pos, buttons):
        return QtGui.QMouseEvent(kind, QtCore.QPointF(*pos), QtCore.QPointF(*pos), left, buttons, alt)

    w2c0 = c.camera.w2c()
    c.mouse_press(ev(QtCore.QEvent.Type.MouseButtonPress, start, left))
    for k in range(1, 6):
        c.mouse_move(ev(QtCore.QEvent.Type.MouseMove, start + [12 * k, 5 * k], left))
    c.mouse_release(ev(QtCore.QEvent.Type.MouseButtonRelease, start + [60, 25], QtCore.Qt.MouseButton.NoButton))
    w2c1 = c.camera.w2c()
    assert not np.allclose(w2c0, w2c1)                    # it turned
    before, _ = _project(w2c0, c.camera.fov_y_deg, w, h, pivot[None])
    after, _ = _project(w2c1, c.camera.fov_y_deg, w, h, pivot[None])
    assert np.allclose(before, after, atol=1e-4)          # about the pivot: it stays where it was
    # a plain drag turns about the target instead: the pivot moves on screen
    c.orbit_pivot = "subject"
    c.camera.orbit(60, 25)
    moved, _ = _project(c.camera.w2c(), c.camera.fov_y_deg, w, h, pivot[None])
    assert np.linalg.norm(moved - after) > 5
