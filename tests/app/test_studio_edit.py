"""Splat editing in the studio (issue 50, item 3): a project's splats opened, cropped from
the Edit menu's crop dialog, a box selection dragged in the viewport (real mouse events on
its native render window), deleted, undone and redone with Ctrl+Z / Ctrl+Shift+Z; the edit
saved in the project's edit.json and applied by the export; reopening shows it again. Under
Xvfb on software Vulkan."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from spirula.engine.io import formats
from spirula.engine.io.ply import read_ply, write_ply
from spirula.engine.studio import protocol as M
from tests.io.splat_cases import random_gaussians

from .conftest import spin

pytestmark = pytest.mark.timeout(300)


def _mouse(win, kind, pos, buttons):
    from PySide6 import QtCore, QtGui, QtWidgets

    t = {"press": QtCore.QEvent.Type.MouseButtonPress, "move": QtCore.QEvent.Type.MouseMove,
         "release": QtCore.QEvent.Type.MouseButtonRelease}[kind]
    p = QtCore.QPointF(float(pos[0]), float(pos[1]))
    window = win.viewport.window_
    ev = QtGui.QMouseEvent(t, p, window.mapToGlobal(p),
                           QtCore.Qt.MouseButton.NoButton if kind == "move" else QtCore.Qt.MouseButton.LeftButton,
                           buttons, QtCore.Qt.KeyboardModifier.NoModifier)
    QtWidgets.QApplication.sendEvent(window, ev)


def _edit_state(app, win, n_before, what=""):
    ok = spin(app, 60, lambda: len([m for m in win.messages if isinstance(m, M.EditState)]) > n_before)
    assert ok, f"no EditState after {what}: {win.notes[-3:]}"
    return [m for m in win.messages if isinstance(m, M.EditState)][-1]


def _count(win):
    return len([m for m in win.messages if isinstance(m, M.EditState)])


def _key(app, win, seq: str):
    """The key sequence typed into the active window (its shortcuts are window-wide)."""
    from PySide6 import QtGui, QtTest, QtWidgets

    win.activateWindow()
    spin(app, 1.0, lambda: win.isActiveWindow())
    ks = QtGui.QKeySequence(seq)[0]
    QtTest.QTest.keyClick(QtWidgets.QApplication.focusWidget() or win, ks.key(), ks.keyboardModifiers())


def _projected(means, cmd: M.EditSplats):
    """Pixel positions of ``means`` seen by the command's camera (a K matrix, homogeneous)."""
    w2c = np.asarray(cmd.w2c).reshape(4, 4)
    f = 0.5 * cmd.height / math.tan(math.radians(cmd.fov_y_deg) / 2)
    k = np.array([[f, 0, cmd.width / 2], [0, f, cmd.height / 2], [0, 0, 1]])
    cam = (np.c_[means, np.ones(len(means))] @ w2c.T)[:, :3]
    uvw = cam @ k.T
    return uvw[:, :2] / uvw[:, 2:3], cam[:, 2] > 0


def test_crop_select_delete_undo_redo_saved_and_exported(studio, tmp_path):
    app, win = studio
    project = tmp_path / "proj"
    project.mkdir()
    g0 = random_gaussians(np.random.default_rng(21), 3000, 1)
    g0.means[:] = np.random.default_rng(22).uniform(-1, 1, size=g0.means.shape)
    g0.scales[:] = np.log(0.01)
    write_ply(project / "splat.ply", g0)
    (project / "train.json").write_text("{}")
    g = read_ply(project / "splat.ply", warn=False)
    n0 = _count(win)
    win.open_paths([str(project / "splat.ply")])
    st = _edit_state(app, win, n0, "opening")
    assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "ply")
    assert st.available and st.total == 3000 and st.kept == 3000 and not st.undo
    assert win.edit_tools.crop.isEnabled() and not win.edit_tools.undo.isEnabled()

    # the crop dialog: x <= 0.5 kept
    dlg = win.edit_tools.show_crop()
    for s, v in zip(dlg.spins, (-2, -2, -2, 0.5, 2, 2)):
        s.setValue(v)
    n = _count(win)
    dlg.apply_button.click()
    st = _edit_state(app, win, n, "crop")
    in_crop = g.means[:, 0] <= 0.5
    assert st.label == "crop" and st.kept == in_crop.sum() and st.undo == "crop"
    saved = json.loads((project / "edit.json").read_text())
    assert saved["crop"] is not None and saved["ply"]["count"] == 3000
    dlg.hide()

    # a box selection dragged in the viewport with the box tool
    win.edit_tools.box.trigger()
    picked, send = [], win.controller.send
    win.controller.send = lambda c: (picked.append(c), send(c))   # the viewport's own commands
    assert win.controller.tool == "box"
    w, h = win.controller.size.width(), win.controller.size.height()
    a, b = (0.3 * w, 0.3 * h), (0.6 * w, 0.7 * h)
    from PySide6 import QtCore

    left, none = QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.MouseButton.NoButton
    w2c = win.controller.camera.w2c().copy()
    n = _count(win)
    _mouse(win, "press", a, left)
    for k in range(1, 6):
        _mouse(win, "move", np.asarray(a) + (np.asarray(b) - a) * k / 5, left)
        spin(app, 0.02)
    _mouse(win, "release", b, none)
    st = _edit_state(app, win, n, "box selection")
    assert np.allclose(win.controller.camera.w2c(), w2c), "the selection drag turned the camera"
    cmd = [c for c in picked if isinstance(c, M.EditSplats)][-1]
    assert cmd.op == "select" and any(c.op == "outline" for c in picked if isinstance(c, M.EditSplats))
    win.controller.send = send
    uv, front = _projected(g.means, cmd)
    inside = front & (uv[:, 0] >= a[0]) & (uv[:, 0] <= b[0]) & (uv[:, 1] >= a[1]) & (uv[:, 1] <= b[1])
    selected = inside & in_crop
    assert st.selected == selected.sum() > 10, (st, selected.sum())

    # Delete, then Undo / Redo with the window's shortcuts
    n = _count(win)
    win.edit_tools.delete.trigger()
    st = _edit_state(app, win, n, "delete")
    kept = in_crop & ~selected
    assert st.kept == kept.sum() and st.selected == 0 and st.undo.startswith("delete")
    out = tmp_path / "cleaned.spz"
    win.session.send(M.ExportPly(str(out), "spz"))
    assert spin(app, 60, lambda: out.is_file())
    got = formats.read_any(out, warn=False)
    assert len(got) == kept.sum()
    assert np.allclose(np.sort(got.means[:, 0]), np.sort(g.means[kept, 0]), atol=0.02)
    n = _count(win)
    _key(app, win, "Ctrl+Z")
    st = _edit_state(app, win, n, "Ctrl+Z")
    assert st.kept == in_crop.sum() and st.selected == selected.sum() and st.redo.startswith("delete")
    n = _count(win)
    _key(app, win, "Ctrl+Z")   # the selection
    _key(app, win, "Ctrl+Z")   # the crop
    assert spin(app, 60, lambda: _count(win) >= n + 2)
    st = [m for m in win.messages if isinstance(m, M.EditState)][-1]
    assert st.kept == 3000 and st.crop == () and not st.undo
    assert json.loads((project / "edit.json").read_text())["crop"] is None
    n = _count(win)
    for _ in range(3):
        _key(app, win, "Ctrl+Shift+Z")
    assert spin(app, 60, lambda: _count(win) >= n + 3)
    st = [m for m in win.messages if isinstance(m, M.EditState)][-1]
    assert st.kept == kept.sum() and not st.redo
    full = tmp_path / "full.ply"
    win.session.send(M.ExportPly(str(full), "ply"))
    assert spin(app, 60, lambda: full.is_file())
    assert np.array_equal(read_ply(full, warn=False).means, g.means[kept])

    # reopened: the saved edit is shown and exported again; the tool is back to orbit off editable scenes
    n = _count(win)
    win.open_paths([str(project / "splat.ply")])
    st = _edit_state(app, win, n, "reopening")
    assert st.kept == kept.sum() and st.crop != ()

    # a brush stroke, then Invert: the kept splats it did not paint
    from spirula.engine.io.splat_edit import select_screen

    win.edit_tools.brush.trigger()
    assert win.controller.tool == "brush" and not win.edit_tools.box.isChecked()
    picked = []
    win.controller.send = lambda c: (picked.append(c), send(c))
    n = _count(win)
    stroke = [(0.2 * w, 0.5 * h), (0.4 * w, 0.45 * h), (0.7 * w, 0.55 * h)]
    _mouse(win, "press", stroke[0], left)
    for p in stroke[1:]:
        _mouse(win, "move", p, left)
        spin(app, 0.02)
    _mouse(win, "release", stroke[-1], none)
    st = _edit_state(app, win, n, "brush")
    win.controller.send = send
    cmd = [c for c in picked if isinstance(c, M.EditSplats)][-1]
    assert cmd.op == "select" and len(cmd.brush) == 6 and cmd.radius > 0
    painted = select_screen(g.means, cmd.w2c, cmd.fov_y_deg, cmd.width, cmd.height,
                            brush=np.reshape(cmd.brush, (-1, 2)), radius=cmd.radius) & kept
    assert st.selected == painted.sum() > 0
    n = _count(win)
    win.edit_tools.invert.trigger()
    st = _edit_state(app, win, n, "invert")
    assert st.selected == (kept & ~painted).sum() and st.label == "invert selection"
    win.edit_tools.set_tool("orbit")

    # an oriented crop: the box turned 30 degrees about the scene's up axis
    dlg = win.edit_tools.show_crop()
    for s, v in zip(dlg.spins, (-0.6, -0.7, -0.8, 0.6, 0.7, 0.8)):
        s.setValue(v)
    dlg.turn.setValue(30.0)
    n = _count(win)
    dlg.apply_button.click()
    st = _edit_state(app, win, n, "oriented crop")
    u = np.asarray(win.scene.up, np.float64)
    u /= np.linalg.norm(u)
    a = -math.radians(30.0)                                   # into the box's frame: turn back
    v = g.means.astype(np.float64)
    local = v * math.cos(a) + np.cross(u, v) * math.sin(a) + np.outer(v @ u, u) * (1 - math.cos(a))
    inside = np.all(np.abs(local) <= np.array([0.6, 0.7, 0.8]) + 1e-6, axis=1)
    assert st.kept == (~selected & inside).sum() > 0       # the box replaces the first crop; the deleted stay out
    dlg.hide()
    assert abs(win.edit_tools.show_crop().turn.value() - 30.0) < 0.05      # the dialog shows it again
    win.edit_tools.crop_dialog.hide()


def test_dragging_a_face_of_the_crop_box_moves_it_in_the_saved_edit_and_undo_restores_it(studio, tmp_path):
    """The crop box has face handles in the viewport, as the mesh box does: one lights up
    under the mouse (a "handles" command with it highlighted); a left drag on it moves that
    face of the (turned) crop box along the box's own axis, the handle under the cursor, the
    camera still; the release is one "crop" command: one undoable step, saved in edit.json,
    the kept splats those in the new box; Ctrl+Z restores the box before the drag."""
    from PySide6 import QtCore

    from spirula.app.bounds_drag import FaceDrag
    from spirula.engine.io.splat_edit import CropBox
    from spirula.engine.studio.bounds_box import crop_to_box, face_centers

    app, win = studio
    project = tmp_path / "dragged"
    project.mkdir()
    g0 = random_gaussians(np.random.default_rng(31), 2000, 1)
    g0.means[:] = np.random.default_rng(32).uniform(-1, 1, size=g0.means.shape)
    g0.scales[:] = np.log(0.01)
    write_ply(project / "splat.ply", g0)
    (project / "train.json").write_text("{}")
    means = read_ply(project / "splat.ply", warn=False).means.astype(np.float64)
    n = _count(win)
    win.open_paths([str(project / "splat.ply")])
    assert _edit_state(app, win, n, "opening").total == 2000
    win.edit_tools.set_tool("orbit")
    dlg = win.edit_tools.show_crop()
    for s, v in zip(dlg.spins, (-0.5, -0.6, -0.4, 0.5, 0.6, 0.4)):
        s.setValue(v)
    dlg.turn.setValue(25.0)
    n = _count(win)
    dlg.apply_button.click()
    st = _edit_state(app, win, n, "turned crop")
    dlg.hide()
    before = json.loads((project / "edit.json").read_text())["crop"]
    assert np.allclose(win.controller.crop, st.crop_box)
    bounds, frame = crop_to_box(st.crop_box)
    f = np.reshape(frame, (3, 3))
    assert not np.allclose(f, np.eye(3), atol=0.1)          # turned: no world axis

    cam, size = win.controller.camera, win.controller.size
    w, h = size.width(), size.height()
    c = face_centers(bounds, frame).mean(axis=0)
    cam.look_at(c - cam.forward * 4.0, c)
    win.controller.push()
    centres = face_centers(bounds, frame)
    uv, front = cam.project(centres, w, h)
    tips, _ = cam.project(centres + 0.1 * f[np.arange(6) % 3], w, h)
    length = [np.linalg.norm(tips[k] - uv[k]) if front[k] and 0 < uv[k][0] < w and 0 < uv[k][1] < h else 0
              for k in range(3, 6)]
    face = 3 + int(np.argmax(length))
    direction = (tips[face] - uv[face]) / np.linalg.norm(tips[face] - uv[face])
    picked, send = [], win.controller.send
    win.controller.send = lambda cmd: (picked.append(cmd), send(cmd))
    sent_before = len(win.sent)
    left, none = QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.MouseButton.NoButton
    _mouse(win, "move", uv[face] + [2, -1], none)            # the handle lights up
    spin(app, 0.05)
    assert win.controller.crop_face == face and win.controller.active_face == -1
    lit = [m for m in win.sent[sent_before:] if isinstance(m, M.EditSplats)]
    assert lit and lit[-1].op == "handles" and lit[-1].highlight == face
    w2c = cam.w2c().copy()
    end = uv[face] + 40 * direction
    expected = FaceDrag(cam, bounds, face, w, h, uv[face], frame).at(end)
    n = _count(win)
    _mouse(win, "press", uv[face], left)
    for k in range(1, 9):
        _mouse(win, "move", uv[face] + (end - uv[face]) * k / 8, left)
        spin(app, 0.02)
    _mouse(win, "release", end, none)
    st = _edit_state(app, win, n, "crop drag")
    win.controller.send = send
    assert np.allclose(cam.w2c(), w2c), "the drag turned the camera instead of moving the face"
    cmds = [m for m in win.sent[sent_before:] if isinstance(m, M.EditSplats)]
    assert [m.op for m in cmds].count("crop") == 1 and [m.op for m in cmds if m.op != "handles"] == ["crop"]
    assert st.label == "crop" and st.undo == "crop"
    # the saved edit: that face moved by the dragged amount, the others and the turn as they were
    saved = CropBox.from_json(json.loads((project / "edit.json").read_text())["crop"], "edit.json")
    new, new_frame = crop_to_box((*saved.center, *saved.half, *np.ravel(saved.rotation)))
    assert np.allclose(new_frame, frame, atol=1e-9)
    assert [k for k in range(6) if abs(new[k] - bounds[k]) > 1e-6] == [face]
    assert abs(new[face] - expected[face]) < 1e-6 and new[face] - bounds[face] > 0.02
    uv_new, _ = cam.project(face_centers(new, new_frame), w, h)
    assert np.linalg.norm(uv_new[face] - end) < 1.0             # the handle under the cursor where it ended
    local = (means - np.asarray(saved.center)) @ np.asarray(saved.rotation)
    assert st.kept == np.all(np.abs(local) <= np.asarray(saved.half) + 1e-6, axis=1).sum()
    # one undo: the box before the drag, in the view's state and in edit.json
    n = _count(win)
    _key(app, win, "Ctrl+Z")
    st = _edit_state(app, win, n, "Ctrl+Z")
    assert st.label == "undo crop" and json.loads((project / "edit.json").read_text())["crop"] == before
    assert np.allclose(crop_to_box(st.crop_box)[0], bounds) and np.allclose(win.controller.crop, st.crop_box)
