"""The window's answer to a camera move while the engine is busy (issue 50 item 2: input
latency on a slow device): the last read-back frame reprojected for the moved camera
(spirula/app/view_warp.py, spirula/app/image_view.py). The homography is checked against an
independent pinhole projection of world points; the widget against a stand-in engine that
is in the middle of a training step (it answers no SetView until the step ends)."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.app.view_warp import free_intrinsics, maps_in_front, plane_homography, same_view
from spirula.engine.studio import protocol as M

from .conftest import spin

W, H, FOV = 160, 100, 50.0


def _project(w2c, k, p):
    """Pixels [N, 2] and depths [N] of world points p [N, 3] (fx X / Z + cx, fy Y / Z + cy)."""
    c = np.asarray(p, float) @ np.asarray(w2c)[:3, :3].T + np.asarray(w2c)[:3, 3]
    fx, fy, cx, cy = k
    return np.stack([fx * c[:, 0] / c[:, 2] + cx, fy * c[:, 1] / c[:, 2] + cy], 1), c[:, 2]


def _apply(h, px):
    q = np.c_[px, np.ones(len(px))] @ np.asarray(h).T
    return q[:, :2] / q[:, 2:]


def _random_w2c(rng, around, distance):
    from spirula.app.camera import OrbitCamera

    cam = OrbitCamera(target=around, distance=distance)
    cam.yaw, cam.pitch = rng.uniform(-np.pi, np.pi), rng.uniform(-1.0, 1.0)
    return cam.w2c(), cam


def test_plane_homography_maps_points_of_the_pivot_plane_as_the_cameras_see_them():
    rng = np.random.default_rng(50)
    for _ in range(20):
        pivot = rng.normal(size=3)
        a, cam_a = _random_w2c(rng, pivot, rng.uniform(1.0, 4.0))
        b, _ = _random_w2c(rng, pivot + 0.3 * rng.normal(size=3), rng.uniform(1.0, 4.0))
        ka, kb = free_intrinsics(FOV, W, H), free_intrinsics(rng.uniform(30, 70), 1.5 * W, 1.5 * H)
        # world points on the plane through the pivot parallel to camera a's image plane
        x, y, _ = cam_a.axes()
        pts = pivot + rng.uniform(-0.5, 0.5, (30, 1)) * x + rng.uniform(-0.5, 0.5, (30, 1)) * y
        pa, _ = _project(a, ka, pts)
        pb, zb = _project(b, kb, pts)
        hm = plane_homography(a, ka, b, kb, pivot)
        keep = zb > 0.05
        np.testing.assert_allclose(_apply(hm, pa[keep]), pb[keep], atol=1e-6 * W)


def test_a_pure_rotation_maps_every_depth_and_an_off_plane_point_shows_parallax():
    rng = np.random.default_rng(7)
    pivot = np.zeros(3)
    a, cam = _random_w2c(rng, pivot, 3.0)
    eye = cam.eye
    turn = np.eye(4)
    t = 0.2
    turn[:3, :3] = [[np.cos(t), 0, np.sin(t)], [0, 1, 0], [-np.sin(t), 0, np.cos(t)]]
    b = turn @ a  # turned about camera a's eye: the same eye
    np.testing.assert_allclose(np.linalg.inv(b)[:3, 3], eye, atol=1e-9)
    k = free_intrinsics(FOV, W, H)
    pts = eye + (pivot - eye) * rng.uniform(0.3, 3.0, (10, 1)) + 0.2 * rng.normal(size=(10, 3))
    pa, _ = _project(a, k, pts)
    pb, _ = _project(b, k, pts)
    np.testing.assert_allclose(_apply(plane_homography(a, k, b, k, pivot), pa), pb, atol=1e-6 * W)
    # a translation: a point off the plane lands elsewhere (the preview is approximate there)
    c = a.copy()
    c[0, 3] += 0.3
    far = eye + 3.0 * (pivot - eye)
    pa, _ = _project(a, k, far[None])
    pc, _ = _project(c, k, far[None])
    assert np.linalg.norm(_apply(plane_homography(a, k, c, k, pivot), pa) - pc) > 1.0


def test_no_reprojection_when_the_pivot_is_behind_the_frame_or_the_plane_folds():
    k = free_intrinsics(FOV, W, H)
    a = np.eye(4)
    assert plane_homography(a, k, a, k, (0.0, 0.0, -1.0)) is None
    hm = plane_homography(a, k, a, k, (0.0, 0.0, 2.0))
    np.testing.assert_allclose(hm, np.eye(3), atol=1e-12)
    assert maps_in_front(hm, W, H) and same_view(a, k, a, k)
    past = np.eye(4)
    past[2, 3] = -3.0  # moved forward past the plane: it is behind the eye
    assert not maps_in_front(plane_homography(a, k, past, k, (0.0, 0.0, 2.0)), W, H)
    mirror = np.diag([-1.0, 1.0, -1.0, 1.0])  # turned half round beyond it: the plane seen from behind
    mirror[2, 3] = 4.0
    hm = plane_homography(a, k, mirror, k, (0.0, 0.0, 2.0))
    assert maps_in_front(hm, W, H)
    np.testing.assert_allclose(_apply(hm, [[10.0, 20.0]]), [[W - 10.0, 20.0]], atol=1e-9)  # mirrored


# --- the widget, with a stand-in engine busy in a training step --------------------------------

DOTS_XY = np.array([[-0.3, -0.2], [0.25, -0.15], [0.0, 0.0], [-0.2, 0.25], [0.3, 0.2]])  # in the pivot's plane
COLORS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255)]
BG = (40, 40, 40)


class BusyEngine:
    """Takes commands while a training step runs and answers none: ``finish_step()`` ends the
    step and renders the last SetView (a NumPy stand-in: a 3 x 3 dot per world point of
    ``dots``) as a read-back PreviewFrame."""

    def __init__(self, size, dots):
        self.commands: list = []
        self.w, self.h = size
        self.dots = dots

    def send(self, cmd) -> None:
        self.commands.append(cmd)

    def render(self, w2c, fov) -> M.PreviewFrame:
        k = free_intrinsics(fov, self.w, self.h)
        img = np.zeros((self.h, self.w, 4), np.uint8)
        img[..., :3] = BG[::-1]
        img[..., 3] = 255
        px, z = _project(w2c, k, self.dots)
        for (u, v), d, (r, g, b) in zip(px, z, COLORS):
            i, j = int(np.floor(v)), int(np.floor(u))
            if d > 0 and 1 <= i < self.h - 1 and 1 <= j < self.w - 1:
                img[i - 1:i + 2, j - 1:j + 2, :3] = (b, g, r)
        flat = tuple(float(x) for x in np.asarray(w2c, np.float64).reshape(-1))
        return M.PreviewFrame(1, self.w, self.h, img.tobytes(), 0, flat, k)

    def finish_step(self) -> M.PreviewFrame:
        last = next(c for c in reversed(self.commands) if isinstance(c, M.SetView))
        return self.render(np.asarray(last.w2c).reshape(4, 4), last.fov_y_deg)


def _pixels(widget) -> np.ndarray:
    img = widget.grab().toImage().convertToFormat(widget.grab().toImage().Format.Format_RGB32)
    w, h = img.width(), img.height()
    a = np.frombuffer(img.constBits(), np.uint8, count=img.bytesPerLine() * h).reshape(h, img.bytesPerLine() // 4, 4)
    return a[:, :w, 2::-1].copy()  # RGB


def _dot_at(rgb, color) -> np.ndarray | None:
    """Centre (x, y) of the pixels of ``color`` (within 60 per channel), or None."""
    m = np.all(np.abs(rgb.astype(int) - color) < 60, axis=2)
    if not m.any():
        return None
    ys, xs = np.nonzero(m)
    return np.array([xs.mean() + 0.5, ys.mean() + 0.5])


def _drag(widget, dx, steps=4, pan=False):
    """A left drag by ``dx`` pixels (with Shift: a pan) in ``steps`` moves."""
    from PySide6 import QtCore, QtGui, QtWidgets

    left, none = QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.MouseButton.NoButton
    mods = QtCore.Qt.KeyboardModifier.ShiftModifier if pan else QtCore.Qt.KeyboardModifier.NoModifier
    p = QtCore.QPointF(W / 2, H / 2)

    def ev(kind, pos, button, buttons):
        return QtGui.QMouseEvent(kind, pos, widget.mapToGlobal(pos), button, buttons, mods)

    QtWidgets.QApplication.sendEvent(widget, ev(QtCore.QEvent.Type.MouseButtonPress, p, left, left))
    for i in range(1, steps + 1):
        QtWidgets.QApplication.sendEvent(widget, ev(QtCore.QEvent.Type.MouseMove, p + QtCore.QPointF(dx * i / steps, 0),
                                                    none, left))
    QtWidgets.QApplication.sendEvent(widget, ev(QtCore.QEvent.Type.MouseButtonRelease,
                                                p + QtCore.QPointF(dx, 0), left, none))


@pytest.fixture
def busy_view(qapp):
    from PySide6 import QtCore

    from spirula.app.image_view import ImageView
    from spirula.app.viewport_widget import ViewController

    from spirula.app.camera import OrbitCamera

    cam = OrbitCamera(target=np.zeros(3), distance=2.0, fov_y_deg=FOV)
    cam.yaw, cam.pitch = 0.4, 0.1
    x, y, _ = cam.axes()  # the dots lie in the plane through the target facing the first view
    engine = BusyEngine((W, H), DOTS_XY[:, :1] * x + DOTS_XY[:, 1:] * y)
    c = ViewController(engine.send)
    c.timer.stop()  # SetViews are pushed by hand: the test owns the clock
    c.camera = cam
    v = ImageView(c)
    v.resize(W, H)
    c.size = QtCore.QSize(W, H)
    v.show()
    qapp.processEvents()
    if abs(v.devicePixelRatioF() - 1.0) > 1e-6:
        pytest.skip("the pixel checks assume a device pixel ratio of 1")
    c.push()
    v.set_frame(engine.finish_step())  # the first frame: the engine was idle then
    yield qapp, engine, c, v
    v.close()


@pytest.mark.parametrize("pan", [False, True], ids=["orbit", "pan"])
def test_a_drag_shows_the_moved_camera_before_the_busy_engine_answers(busy_view, pan):
    app, engine, c, v = busy_view
    before = c.camera.w2c()
    shown0 = _pixels(v)
    plain = engine.render(before, FOV)
    np.testing.assert_array_equal(shown0, np.frombuffer(plain.data, np.uint8).reshape(H, W, 4)[..., 2::-1])
    _drag(v, 40, pan=pan)
    c.push()  # the camera timer's tick: the SetView goes to the engine, which is busy
    after = c.camera.w2c()
    assert not np.allclose(after, before)
    assert any(isinstance(m, M.SetView) for m in engine.commands)  # the engine got it, and answers nothing
    # the widget paints the new camera itself (the last frame reprojected), unprompted
    assert spin(app, 30, lambda: v.shown[1] and np.allclose(v.shown[0], after))
    rgb = _pixels(v)
    want, z = _project(after, free_intrinsics(FOV, W, H), engine.dots)
    old, _ = _project(before, free_intrinsics(FOV, W, H), engine.dots)
    moved = 0
    for (u, w_), d, col, o in zip(want, z, COLORS, old):
        got = _dot_at(rgb, col)
        if d > 0 and 3 <= u < W - 3 and 3 <= w_ < H - 3:
            assert got is not None, f"dot {col} not shown"
            assert np.linalg.norm(got - (u, w_)) < 1.5, (col, got, (u, w_))  # where the new camera sees it
            moved += np.linalg.norm(got - o) > 3
    if pan:  # the dots did move (the frame was not simply shown again; an orbit keeps them near)
        assert moved >= 3
    # the step ends: the engine's render of the new camera replaces the preview, pixel for pixel
    frame = engine.finish_step()
    v.set_frame(frame)
    app.processEvents()
    assert v.shown[1] is False and np.allclose(v.shown[0], after)
    np.testing.assert_array_equal(_pixels(v), np.frombuffer(frame.data, np.uint8).reshape(H, W, 4)[..., 2::-1])


def test_the_reprojection_can_be_turned_off(busy_view, monkeypatch):
    app, engine, c, v = busy_view
    v.warp = False
    before = _pixels(v)
    painted = []
    v.painted.connect(lambda: painted.append(v.shown))
    _drag(v, 40)
    assert spin(app, 30, lambda: painted)
    assert v.shown[1] is False
    np.testing.assert_array_equal(_pixels(v), before)  # the old frame until the engine answers


def test_a_slow_device_shows_read_back_frames_unless_told_otherwise(monkeypatch):
    from spirula.app.image_view import SLOW_DEVICE, readback_reason

    monkeypatch.delenv("SPIRULA_VIEWER", raising=False)
    assert readback_reason(True) == SLOW_DEVICE and readback_reason(False) is None
    monkeypatch.setenv("SPIRULA_VIEWER", "swapchain")
    assert readback_reason(True) is None
    monkeypatch.setenv("SPIRULA_VIEWER", "readback")
    assert readback_reason(False) == "SPIRULA_VIEWER=readback"
