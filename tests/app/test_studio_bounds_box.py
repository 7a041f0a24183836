"""The mesh bounds box in the window (issue 27): the Export panel's spin boxes and the box
drawn in the viewport follow each other; a left drag on a face handle in the viewport
(real mouse events on its native render window) moves that face, not the camera, and the
mesh command carries the dragged box. Under Xvfb on software Vulkan."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.studio import protocol as M
from spirula.engine.studio.bounds_box import face_centers

from .conftest import spin
from .studio_helpers import sent

pytestmark = pytest.mark.timeout(200)


def _mouse(win, kind, pos, buttons):
    from PySide6 import QtCore, QtGui, QtWidgets

    left = QtCore.Qt.MouseButton.LeftButton
    t = {"press": QtCore.QEvent.Type.MouseButtonPress, "move": QtCore.QEvent.Type.MouseMove,
         "release": QtCore.QEvent.Type.MouseButtonRelease}[kind]
    p = QtCore.QPointF(float(pos[0]), float(pos[1]))
    window = win.viewport.window_
    ev = QtGui.QMouseEvent(t, p, window.mapToGlobal(p), QtCore.Qt.MouseButton.NoButton if kind == "move" else left,
                           buttons, QtCore.Qt.KeyboardModifier.NoModifier)
    QtWidgets.QApplication.sendEvent(window, ev)


def _drag(app, win, start, end, steps=8):
    from PySide6 import QtCore

    left, none = QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.MouseButton.NoButton
    _mouse(win, "press", start, left)
    for k in range(1, steps + 1):
        _mouse(win, "move", np.asarray(start) + (np.asarray(end) - start) * k / steps, left)
        spin(app, 0.02)
    _mouse(win, "release", end, none)
    spin(app, 0.1)


def test_dragging_a_face_handle_moves_that_face_and_the_spin_boxes(studio, tiny_dataset):
    app, win = studio
    win.open_paths([str(tiny_dataset)])
    assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "review"), win.notes[-2:]
    win.export.bounds_group.setChecked(True)
    box = sent(win, M.SetBounds)[-1].bounds
    assert len(box) == 6 and win.controller.bounds == box
    # the spin boxes drive the box: one edit, one SetBounds with it
    win.export.bound_spins[4].setValue(box[4] + 0.1)
    box = sent(win, M.SetBounds)[-1].bounds
    assert win.controller.bounds == box and abs(box[4] - win.export.bound_spins[4].value()) < 1e-9

    cam, size = win.controller.camera, win.controller.size
    lo, hi = np.asarray(box[:3]), np.asarray(box[3:])
    cam.look_at((lo + hi) / 2 - cam.forward * 3 * np.max(hi - lo), (lo + hi) / 2)  # the whole box in view
    win.controller.push()
    w, h = size.width(), size.height()
    uv, front = cam.project(face_centers(box), w, h)
    # the face whose axis looks longest on screen: the xmax or the ymax or the zmax one
    axis_px = [np.linalg.norm(cam.project(face_centers(box)[f] + np.eye(3)[f % 3] * 0.1, w, h)[0][0] - uv[f])
               for f in range(3, 6)]
    face = 3 + int(np.argmax(axis_px))
    assert front[face] and 0 < uv[face][0] < w and 0 < uv[face][1] < h, (uv[face], w, h)
    tip, _ = cam.project(face_centers(box)[face] + np.eye(3)[face % 3] * 0.1, w, h)
    direction = (tip[0] - uv[face]) / np.linalg.norm(tip[0] - uv[face])
    w2c = cam.w2c().copy()
    n = len(sent(win, M.SetBounds))
    _drag(app, win, uv[face], uv[face] + 40 * direction)
    assert np.allclose(cam.w2c(), w2c), "the drag turned the camera instead of moving the face"
    new = sent(win, M.SetBounds)[-1].bounds
    assert len(sent(win, M.SetBounds)) > n and new[face] > box[face] + 1e-3, (box, new)
    assert [k for k in range(6) if abs(new[k] - box[k]) > 1e-6] == [face]
    assert abs(win.export.bound_spins[face].value() - new[face]) < 1e-3
    # the dragged face's handle is under the cursor where the drag ended (spin box rounding: 3 decimals)
    uv_new, _ = cam.project(face_centers(new), w, h)
    assert np.linalg.norm(uv_new[face] - (uv[face] + 40 * direction)) < 2.0
    assert win.export.mesh_command().bounds == new

    # while a mesh is being made the box cannot change: a drag snaps back to the box sent
    win.export.mesh_started()
    uv, _ = cam.project(face_centers(new), w, h)
    _drag(app, win, uv[face], uv[face] + 30 * direction)
    assert sent(win, M.SetBounds)[-1].bounds == new and win.controller.bounds == new
    win.export.mesh_ended("test", ok=False)

    # a drag away from the handles orbits as before and leaves the box
    corner = np.array([8.0, 8.0])
    n = len(sent(win, M.SetBounds))
    _drag(app, win, corner, corner + [60, 0])
    assert not np.allclose(cam.w2c(), w2c) and len(sent(win, M.SetBounds)) == n


def test_the_handle_under_the_mouse_is_highlighted_and_the_cursor_changes(studio, tiny_dataset):
    """Real mouse moves without a button over the render window: over a handle it is drawn
    highlighted (SetBounds.highlight) and the cursor is an open hand, closed while dragging;
    away from the handles (or leaving the window) both go back."""
    from PySide6 import QtCore, QtWidgets

    app, win = studio
    if win.scene is None or win.scene.kind != "review":
        win.open_paths([str(tiny_dataset)])
        assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "review"), win.notes[-2:]
    win.export.bounds_group.setChecked(True)
    box = sent(win, M.SetBounds)[-1].bounds
    cam, size = win.controller.camera, win.controller.size
    lo, hi = np.asarray(box[:3]), np.asarray(box[3:])
    cam.look_at((lo + hi) / 2 - cam.forward * 3 * np.max(hi - lo), (lo + hi) / 2)
    win.controller.push()
    w, h = size.width(), size.height()
    uv, front = cam.project(face_centers(box), w, h)
    inside = [f for f in range(6) if front[f] and 0 < uv[f][0] < w and 0 < uv[f][1] < h]
    assert inside
    shape = lambda: win.viewport.window_.cursor().shape()  # noqa: E731
    none = QtCore.Qt.MouseButton.NoButton
    hand, closed, arrow = (QtCore.Qt.CursorShape.OpenHandCursor, QtCore.Qt.CursorShape.ClosedHandCursor,
                           QtCore.Qt.CursorShape.ArrowCursor)
    for face in inside:
        n = len(sent(win, M.SetBounds))
        _mouse(win, "move", uv[face] + [2, -1], none)
        spin(app, 0.05)
        assert win.controller.active_face == face
        assert len(sent(win, M.SetBounds)) == n + 1 and sent(win, M.SetBounds)[-1].highlight == face
        assert sent(win, M.SetBounds)[-1].bounds == box and shape() == hand
        _mouse(win, "move", uv[face] + [3, -1], none)  # still over it: nothing new to draw
        assert len(sent(win, M.SetBounds)) == n + 1
    face = inside[0]
    _mouse(win, "press", uv[face], QtCore.Qt.MouseButton.LeftButton)
    assert shape() == closed and win.controller.active_face == face
    _mouse(win, "release", uv[face], none)
    spin(app, 0.05)
    assert shape() == hand and sent(win, M.SetBounds)[-1].highlight == face
    far = uv.min(axis=0) - 40 if (uv.min(axis=0) > 45).all() else np.array([5.0, 5.0])
    assert win.controller.camera is cam
    _mouse(win, "move", far, none)
    spin(app, 0.05)
    assert win.controller.active_face == -1 and shape() == arrow and sent(win, M.SetBounds)[-1].highlight == -1
    # leaving the window while over a handle clears it too
    _mouse(win, "move", uv[face], none)
    assert sent(win, M.SetBounds)[-1].highlight == face
    QtWidgets.QApplication.sendEvent(win.viewport.window_, QtCore.QEvent(QtCore.QEvent.Type.Leave))
    assert win.controller.active_face == -1 and sent(win, M.SetBounds)[-1].highlight == -1
    # the box switched off: no highlight is left behind
    _mouse(win, "move", uv[face], none)
    win.export.bounds_group.setChecked(False)
    assert sent(win, M.SetBounds)[-1] == M.SetBounds((), -1) and shape() == arrow
