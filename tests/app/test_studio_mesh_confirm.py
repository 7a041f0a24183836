"""The mesh stage's box shown before meshing (issue 47 item 3, the studio's part): with "Ask
before meshing" (on by default) Mesh stops the stage at its bounds step; the proposed box
and why it was chosen show in the Export panel and in the viewport, nothing is meshed until
Confirm, the viewport draws the proposed box itself (oriented: its third axis up) and a face
dragged there moves that face of it, the edited box is the one meshed (along the proposal's
axes, an object's bottom still cut and capped; mesh.json records it as edited by the user),
and Cancel there writes nothing. Under Xvfb on software Vulkan, at tiny sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spirula.engine.settings import STUDIO
from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import last, sent

pytestmark = pytest.mark.timeout(500)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_dataset):
    from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
    from spirula.engine.jobs.train import run_training

    out = tmp_path_factory.mktemp("confirm") / "ring"
    cfg = RunConfig(dataset=DatasetConfig(max_size=64), train=TrainConfig(steps=150, init_random_points=2000,
                                                                         checkpoint_every=0))
    run_training(tiny_dataset, out, cfg, on_message=lambda s: None)
    return out


def _open_small(app, win, trained) -> None:
    if win.scene is None or win.scene.kind != "ply":
        win.open_paths([str(trained / "splat.ply")])
        assert spin(app, 60, lambda: win.scene is not None and win.scene.kind == "ply")
    win.export.faces.setValue(4000)
    win.export.texture.setCurrentIndex(0)  # 256
    win.export.resolution.setValue(48)


def _proposed(app, win, n_before):
    assert spin(app, 200, lambda: len([m for m in win.messages if isinstance(m, M.BoundsProposed)]) > n_before
                or win.errors), "no box proposed"
    assert not win.errors, win.errors
    return [m for m in win.messages if isinstance(m, M.BoundsProposed)][-1]


def test_cancel_at_the_proposed_box_writes_nothing(studio, trained):
    app, win = studio
    _open_small(app, win, trained)
    assert STUDIO["ask_before_meshing"].default is True and win.export.ask_box.isChecked()
    assert not win.export.bounds_group.isChecked()
    n = len([m for m in win.messages if isinstance(m, M.BoundsProposed)])
    win.export.mesh_btn.click()
    assert sent(win, M.ExportMesh)[-1].confirm is True
    msg = _proposed(app, win, n)
    assert win.export.proposal_group.isVisible() and msg.reason in win.export.proposal_text.text()
    assert len(msg.frame) == 9 and win.export.box_frame() == msg.frame  # along the proposal's axes:
    assert win.export.bounds() == pytest.approx(msg.box, abs=1e-3)      # in the fields ...
    drawn = sent(win, M.SetBounds)[-1]                                   # ... and drawn in the viewport
    assert drawn.bounds == win.export.bounds() and drawn.frame == msg.frame
    win.export.proposal_cancel.click()
    assert spin(app, 60, lambda: not win.export.meshing), "the held stage did not end"
    assert any("cancelled at its box" in t for t in win.notes[-3:]), win.notes[-3:]
    assert not (trained / "mesh.json").exists() and not (trained / "exports" / "mesh.glb").exists()
    assert not win.export.proposal_group.isVisible() and not win.export.bounds_group.isChecked()
    assert sent(win, M.SetBounds)[-1].bounds == ()
    assert not win.errors, win.errors


def test_nothing_is_meshed_before_confirm_and_the_edited_box_is_meshed(studio, trained):
    app, win = studio
    _open_small(app, win, trained)
    n = len([m for m in win.messages if isinstance(m, M.BoundsProposed)])
    win.export.mesh_btn.click()
    msg = _proposed(app, win, n)
    assert len(msg.bounds) == 6 and msg.mode in ("object", "scene") and msg.reason
    # held: no mesh while the user looks (the engine keeps drawing frames meanwhile)
    frames = win.viewer_stats.frames if win.viewer_stats else 0
    win.controller.camera.orbit(30, 0)
    win.controller.push()
    assert spin(app, 30, lambda: win.viewer_stats is not None and win.viewer_stats.frames > frames)
    assert last(win, M.MeshExported) is None and not (trained / "mesh.json").exists()
    assert not any(isinstance(m, M.StageProgress) and m.stage == "mesh" and m.detail.startswith("fuse")
                   for m in win.messages)
    # the viewport draws the proposed oriented box: its corners are the proposal's
    from spirula.engine.mesh.bounds import Bounds
    from spirula.engine.studio.bounds_box import box_corners, face_centers

    from .test_studio_bounds_box import _drag

    drawn = sent(win, M.SetBounds)[-1]
    assert drawn.frame == msg.frame and drawn.bounds == pytest.approx(msg.box, abs=1e-3)
    frame = np.reshape(msg.frame, (3, 3))
    proposal = Bounds(msg.mode, frame, np.asarray(msg.box[:3]), np.asarray(msg.box[3:]), msg.reason)
    assert np.allclose(box_corners(drawn.bounds, drawn.frame), proposal.corners(), atol=2e-3)
    assert np.allclose(proposal.aabb(), msg.bounds, atol=1e-6)
    # the user drags a face of it outwards in the viewport (real mouse events)
    cam, size = win.controller.camera, win.controller.size
    w, h = size.width(), size.height()
    box = drawn.bounds
    centres = face_centers(box, frame)
    c = centres.mean(axis=0)
    cam.look_at(c - cam.forward * 3 * float(np.max(np.ptp(proposal.corners(), axis=0))), c)
    win.controller.push()
    uv, front = cam.project(centres, w, h)
    tips, _ = cam.project(centres + 0.05 * float(np.max(np.subtract(box[3:], box[:3]))) * frame[np.arange(6) % 3],
                          w, h)
    length = [np.linalg.norm(tips[k] - uv[k]) if front[k] and 0 < uv[k][0] < w and 0 < uv[k][1] < h else 0
              for k in range(3, 6)]
    face = 3 + int(np.argmax(length))
    outwards = (tips[face] - uv[face]) / np.linalg.norm(tips[face] - uv[face])
    end = uv[face] + 30 * outwards
    _drag(app, win, uv[face], end)
    edited = win.export.bounds()
    assert sent(win, M.SetBounds)[-1].bounds == edited and sent(win, M.SetBounds)[-1].frame == msg.frame
    assert [k for k in range(6) if abs(edited[k] - msg.box[k]) > 2e-3] == [face] and edited[face] > msg.box[face]
    uv_new, _ = cam.project(face_centers(edited, frame), w, h)
    assert np.linalg.norm(uv_new[face] - end) < 2.0          # that face of the oriented box followed the cursor
    win.export.confirm_btn.click()
    confirmed = sent(win, M.ConfirmBounds)[-1]
    assert confirmed.bounds == pytest.approx(edited, abs=1e-3) and confirmed.frame == msg.frame
    assert spin(app, 300, lambda: last(win, M.MeshExported) is not None or win.errors), "no mesh"
    assert not win.errors, win.errors
    rec = json.loads((trained / "mesh.json").read_text())["bounds"]
    assert rec["edited_by_user"] is True and "edited by the user" in rec["reason"]
    assert rec["mode"] == ("object" if msg.mode == "object" else "explicit")   # an object keeps its cut and cap
    assert np.allclose(rec["frame"], frame, atol=1e-9)
    # the proposal the engine held is the one drawn; the box meshed is the one dragged
    assert np.allclose(rec["proposed"]["lo"] + rec["proposed"]["hi"], msg.box, atol=1e-9)
    assert np.allclose(rec["hi"], confirmed.bounds[3:], atol=1e-9)
    assert np.allclose(rec["lo"][:2], confirmed.bounds[:2], atol=1e-9)
    assert not win.export.proposal_group.isVisible()
