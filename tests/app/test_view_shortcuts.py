"""The window's view keys and toolbar (issue 50 item 2): F / Shift+F / Home work wherever the
focus is in the window (a panel's button, the thumbnail list), not only in the viewport; a
text field keeps its letters; the toolbar's Mesh and Frustums are lit only when there is a
mesh shown / there are cameras. Under Xvfb on software Vulkan."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin

pytestmark = pytest.mark.timeout(200)


def _open(app, win, tiny_dataset):
    if win.scene is None or win.scene.kind != "review":
        win.open_paths([str(tiny_dataset)])
        assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "review"), win.notes[-2:]


def _activate(app, win):
    from PySide6.QtTest import QTest

    win.activateWindow()
    win.raise_()
    QTest.qWaitForWindowActive(win, 3000)
    spin(app, 0.1)


def _looks_at_subject(win) -> bool:
    c = win.controller
    box = np.asarray(win.scene.subject).reshape(2, 3)
    uv, front = c.camera.project(box.mean(0), c.size.width(), c.size.height())
    return bool(front[0]) and np.allclose(uv[0], [c.size.width() / 2, c.size.height() / 2], atol=1e-3)


def test_f_frames_the_subject_with_the_focus_on_a_panel(studio, tiny_dataset):
    from PySide6 import QtCore, QtWidgets
    from PySide6.QtTest import QTest

    app, win = studio
    _open(app, win, tiny_dataset)
    _activate(app, win)
    assert len(win.scene.subject) == 6
    pushed = []
    win.controller.view_changed.connect(lambda: pushed.append(1))   # a SetView sent
    for widget in (win.export.shot_btn, win.dataset.list):
        win.docks["Export" if widget is win.export.shot_btn else "Dataset"].raise_()
        spin(app, 0.05)
        widget.setFocus()
        spin(app, 0.05)
        assert QtWidgets.QApplication.focusWidget() is widget
        win.controller.camera.orbit(150, 60)   # away from the subject
        win.controller.camera.pan(200, 90, win.controller.size.height())
        win.controller.camera.zoom(-3)
        assert not _looks_at_subject(win)
        n = len(pushed)
        QTest.keyClick(widget, QtCore.Qt.Key.Key_F)
        spin(app, 0.05)
        assert _looks_at_subject(win), type(widget).__name__
        assert len(pushed) > n
    # Shift+F: everything, the cameras too, from further away; Home: the start view
    d = win.controller.camera.distance
    QTest.keyClick(win.dataset.list, QtCore.Qt.Key.Key_F, QtCore.Qt.KeyboardModifier.ShiftModifier)
    assert win.controller.camera.distance > d
    QTest.keyClick(win.dataset.list, QtCore.Qt.Key.Key_Home)
    first = next(c for c in win.scene.cameras if c.split == "train")
    assert np.allclose(win.controller.camera.eye, np.asarray(first.c2w).reshape(4, 4)[:3, 3], atol=1e-6)
    # a text field keeps its F
    edit = QtWidgets.QLineEdit(win.export)
    edit.show()
    edit.setFocus()
    spin(app, 0.05)
    eye = win.controller.camera.eye.copy()
    QTest.keyClick(edit, QtCore.Qt.Key.Key_F)
    assert edit.text() == "f" and np.allclose(win.controller.camera.eye, eye)
    edit.deleteLater()


def test_toolbar_mesh_and_frustums_are_lit_only_when_they_mean_something(studio, tiny_dataset):
    app, win = studio
    _open(app, win, tiny_dataset)
    mesh, fr = win.mesh_action, win.frustum_action
    # a dataset: cameras, no mesh
    assert fr.isEnabled() and fr.isChecked() and not mesh.isEnabled() and not mesh.isChecked()
    assert win.view_actions["frame"] in win.findChild(type(win.addToolBar("x")), "toolbar-view").actions()
    fr.setChecked(False)                       # the user's choice ...
    assert win.sent[-1] == M.SetViewMode("splats", False, win.frustum_scale, mesh=False, mesh_shading="texture")
    base = dict(center=(0.0, 0.0, 0.0), radius=1.0, up=(0.0, -1.0, 0.0))
    win.handle(M.SceneLoaded("ply", "p", "/nowhere/p.ply", 10, **base))      # splats, no cameras, no mesh
    assert not fr.isEnabled() and not fr.isChecked() and not mesh.isEnabled() and not mesh.isChecked()
    win.handle(M.SceneLoaded("mesh", "m", "/nowhere/m.glb", 0, **base, faces=12))   # a mesh alone
    assert mesh.isChecked() and not mesh.isEnabled() and not fr.isChecked()
    win.handle(M.SceneLoaded("mesh", "m", "/nowhere/m.glb", 10, **base, faces=12))  # a mesh and its splats
    assert mesh.isChecked() and mesh.isEnabled()
    win.open_paths([str(tiny_dataset)])        # ... kept for the next scene with cameras
    assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "review")
    assert fr.isEnabled() and not fr.isChecked() and not mesh.isChecked()
    fr.setChecked(True)
    assert fr.isChecked() and win.frustums_wanted
