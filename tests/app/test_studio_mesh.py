"""The textured mesh from the window (issue 27, item 4): the Export panel runs the mesh
stage on the engine thread with progress, writes the GLB (and OBJ, PLY) into the
project's exports/, and the viewport then shows that GLB; Cancel leaves nothing half
written. Under Xvfb on software Vulkan, at tiny sizes."""

from __future__ import annotations

import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import drag_and_drop, last, sent

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_dataset):
    from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
    from spirula.engine.jobs.train import run_training

    out = tmp_path_factory.mktemp("mesh") / "ring"
    cfg = RunConfig(dataset=DatasetConfig(max_size=64), train=TrainConfig(steps=150, init_random_points=2000,
                                                                         checkpoint_every=0))
    run_training(tiny_dataset, out, cfg, on_message=lambda s: None)
    return out


def _small(win) -> None:
    win.export.ask_box.setChecked(False)  # meshes at once (the box shown first: test_studio_mesh_confirm.py)
    win.export.faces.setValue(4000)
    win.export.texture.setCurrentIndex(0)  # 256
    win.export.resolution.setValue(48)


def test_cancel_during_the_mesh_writes_nothing(studio, trained):
    app, win = studio
    win.open_paths([str(trained / "splat.ply")])
    assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "ply")
    assert win.export.mesh_btn.isEnabled(), win.export.mesh_status.text()
    _small(win)
    win.export.bounds_group.setChecked(True)  # the box around the scene, drawn in the viewport
    box = sent(win, M.SetBounds)[-1].bounds
    assert len(box) == 6 and all(box[k] < box[k + 3] for k in range(3))
    win.export.mesh_btn.click()
    assert sent(win, M.ExportMesh)[-1].bounds == box
    assert spin(app, 60, lambda: any(isinstance(m, M.StageProgress) and m.stage == "mesh" for m in win.messages))
    win.export.mesh_cancel.click()
    assert spin(app, 120, lambda: not win.export.meshing), "the mesh stage did not stop"
    assert "cancelled" in win.notes[-1] and not (trained / "exports" / "mesh.glb").exists()
    assert not win.errors, win.errors
    win.export.bounds_group.setChecked(False)
    assert sent(win, M.SetBounds)[-1].bounds == ()


def test_the_export_panel_makes_the_textured_mesh_and_shows_it(studio, trained):
    app, win = studio
    _small(win)
    win.export.mesh_btn.click()
    assert spin(app, 300, lambda: last(win, M.MeshExported) is not None or win.errors), "no mesh"
    assert not win.errors, win.errors
    glb = trained / "exports" / "mesh.glb"
    assert glb.is_file() and glb.read_bytes()[:4] == b"glTF"
    assert (trained / "exports" / "mesh.obj").is_file() and (trained / "mesh.json").is_file()
    assert win.export.mesh_progress.value() == win.export.mesh_progress.maximum()
    assert any(str(glb) in win.export.saved.item(k).text() for k in range(win.export.saved.count()))
    # the finished GLB opens in the viewport, its textured triangles drawn, the project's splats beside it
    assert spin(app, 60, lambda: win.scene.kind == "mesh"), win.notes[-2:]
    faces = last(win, M.MeshExported).faces
    assert win.scene.path == str(glb) and win.scene.faces == faces and win.scene.num_gaussians > 0
    assert not win.export.ply_btn.isEnabled()
    frames = win.viewer_stats.frames if win.viewer_stats else 0
    assert spin(app, 30, lambda: win.viewer_stats is not None and win.viewer_stats.frames > frames)
    # the toolbar's Mesh toggle and shading reach the engine
    assert win.mesh_action.isEnabled() and win.mesh_action.isChecked() and win.shading_combo.isEnabled()
    win.mesh_action.trigger()
    assert sent(win, M.SetViewMode)[-1].mesh is False
    win.shading_combo.setCurrentIndex(win.shading_combo.findData("clay"))
    assert sent(win, M.SetViewMode)[-1].mesh_shading == "clay"
    win.mesh_action.trigger()
    assert sent(win, M.SetViewMode)[-1].mesh is True
    assert [c.project for c in sent(win, M.ExportMesh)] == [str(trained)] * 2
    # and a mesh file dropped on the viewport opens the same way
    n = len(sent(win, M.OpenMesh))
    drag_and_drop(win.viewport.container, [trained / "exports" / "mesh.obj"])
    assert spin(app, 10, lambda: len(sent(win, M.OpenMesh)) > n) and sent(win, M.OpenMesh)[-1].path.endswith("mesh.obj")
    assert spin(app, 60, lambda: win.scene.path.endswith("mesh.obj") and win.scene.kind == "mesh"), win.errors
    assert win.scene.faces == faces
