"""The mesh stage's box shown before meshing (issue 47 item 3, the studio's part): with "Ask
before meshing" (on by default) Mesh stops the stage at its bounds step; the proposed box
and why it was chosen show in the Export panel and in the viewport, nothing is meshed until
Confirm, an edited box is the one meshed (mesh.json records it), and Cancel there writes
nothing. Under Xvfb on software Vulkan, at tiny sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.settings import STUDIO
from engine.studio import messages as M

from .conftest import spin
from .studio_helpers import last, sent

pytestmark = pytest.mark.timeout(500)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_dataset):
    from engine.config import DatasetConfig, RunConfig, TrainConfig
    from engine.jobs.train import run_training

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
    assert win.export.bounds() == pytest.approx(msg.bounds, abs=1e-3)   # in the fields ...
    assert sent(win, M.SetBounds)[-1].bounds == win.export.bounds()     # ... and drawn in the viewport
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
    # the user lowers the top of the box by a fifth of its height, typing (a drag sets the same
    # fields: test_studio_bounds_box.py)
    lo, hi = np.asarray(msg.bounds[:3]), np.asarray(msg.bounds[3:])
    axis = int(np.argmax(hi - lo))
    win.export.bound_spins[3 + axis].setValue(hi[axis] - 0.2 * (hi[axis] - lo[axis]))
    edited = win.export.bounds()
    assert sent(win, M.SetBounds)[-1].bounds == edited
    win.export.confirm_btn.click()
    assert sent(win, M.ConfirmBounds)[-1].bounds == edited
    assert spin(app, 300, lambda: last(win, M.MeshExported) is not None or win.errors), "no mesh"
    assert not win.errors, win.errors
    rec = json.loads((trained / "mesh.json").read_text())
    assert rec["bounds"]["mode"] == "explicit" and "confirmed in the studio" in rec["bounds"]["reason"]
    assert np.allclose(rec["bounds"]["aabb"], edited, atol=1e-6)
    assert not win.export.proposal_group.isVisible()
