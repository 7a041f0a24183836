"""The box the studio's user confirms (spirula/engine/studio/meshing.py confirmed_region): the proposal
as it is, unless edited; an edited box is meshed as `--bounds` numbers are."""

import numpy as np
import pytest

from spirula.engine.errors import SpirulaError
from spirula.engine.mesh.bounds import Bounds
from spirula.engine.studio.meshing import confirmed_region


def _proposal():
    a = np.radians(30)
    frame = np.array([[np.cos(a), np.sin(a), 0], [-np.sin(a), np.cos(a), 0], [0, 0, 1.0]])  # turned about z
    return Bounds("object", frame, np.array([-1.0, -0.5, 0.0]), np.array([1.0, 0.5, 2.0]), "the orbit's subject",
                  floor=0.0)


def test_the_proposal_as_it_is_when_unedited():
    p = _proposal()
    assert confirmed_region(p, ()) is p
    assert confirmed_region(p, p.aabb()) is p                    # the fields as proposed
    assert confirmed_region(p, tuple(np.asarray(p.aabb()) + 1e-9)) is p


def test_an_edited_box_is_meshed_as_given():
    p = _proposal()
    box = np.asarray(p.aabb())
    box[5] -= 0.5                                                 # the top lowered
    r = confirmed_region(p, tuple(box))
    assert r.mode == "explicit" and np.allclose(r.aabb(), box) and np.allclose(r.frame, np.eye(3))
    assert "confirmed in the studio" in r.reason and p.reason in r.reason
    box[3] = box[0] - 1                                           # a max below its min
    with pytest.raises(SpirulaError, match="max must be above its min"):
        confirmed_region(p, tuple(box))


def test_an_edited_object_box_keeps_its_frame_floor_cut_and_cap():
    """Along the proposal's own axes (the studio's fields while it waits) an edited object box
    stays an object box: its frame, its bottom cut and capped; the floor kept while the bottom
    is the proposal's, else the cut is the bottom the user chose."""
    p = _proposal()
    frame = tuple(p.frame.reshape(-1))
    assert confirmed_region(p, (*p.lo, *p.hi), frame) is p      # unedited, along its axes
    top = (*p.lo, p.hi[0], p.hi[1], 1.5)                          # the top lowered
    r = confirmed_region(p, top, frame)
    assert r.mode == "object" and np.array_equal(r.frame, p.frame) and r.floor == p.floor
    assert np.allclose(r.lo, p.lo) and np.allclose(r.hi, (1.0, 0.5, 1.5))
    assert np.allclose(r.corners()[:, 2].max(), 1.5) and not np.allclose(r.frame, np.eye(3))
    j = r.to_json()
    assert j["edited_by_user"] is True and "edited by the user" in j["reason"] and p.reason in j["reason"]
    assert j["proposed"]["hi"] == [1.0, 0.5, 2.0] and j["mode"] == "object"
    raised = confirmed_region(p, (-1.0, -0.5, 0.3, 1.0, 0.5, 2.0), frame)   # the bottom raised: cut there
    assert raised.mode == "object" and raised.floor is None and raised.lo[2] == 0.3
    # a scene proposal edited along its axes is a clipped box along them (no cap)
    s = Bounds("scene", p.frame.copy(), p.lo.copy(), p.hi.copy(), "everything")
    e = confirmed_region(s, top, frame)
    assert e.mode == "explicit" and np.array_equal(e.frame, p.frame) and e.to_json()["edited_by_user"] is True
    with pytest.raises(SpirulaError, match="not a rotation"):
        confirmed_region(p, top, tuple(2 * p.frame.reshape(-1)))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny trained project: coloured discs seen by a ring of cameras (tests/app/scene.py)."""
    from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
    from spirula.engine.jobs.train import run_training
    from tests.app.scene import write_scene

    root = tmp_path_factory.mktemp("confirm_job")
    out = root / "ring"
    cfg = RunConfig(dataset=DatasetConfig(max_size=64), train=TrainConfig(steps=150, init_random_points=2000,
                                                                         checkpoint_every=0))
    run_training(write_scene(root / "data"), out, cfg, on_message=lambda s: None)
    return out


def test_an_edited_oriented_box_reaches_the_mesh_job_intact(trained):
    """spirula/engine/jobs/mesh.py run_mesh's confirm path: the box the studio confirms (the proposed
    object box with its top lowered and a side pushed out, along its own axes) is the box the
    stage fuses, cuts, caps and records: mesh.json has its frame, its faces, the cut at its
    bottom, "edited by the user", and the mesh lies inside it. The tiny scene (plain discs,
    150 steps) is too weak for the auto box's rules (tested in test_bounds.py) to find an
    object: a scene proposal is turned into an object box of the same frame and extent first,
    as the stage would have proposed for a real object."""
    import json

    from spirula.engine.mesh.bounds import Bounds

    import trimesh

    from spirula.engine.jobs.mesh import run_mesh
    from spirula.engine.mesh.mesh_config import MeshConfig

    seen = {}

    def confirm(proposed):
        if proposed.mode != "object":
            proposed = Bounds("object", proposed.frame.copy(), proposed.lo.copy(), proposed.hi.copy(),
                              "the test's object box", up=proposed.up)
        lo, hi = proposed.lo.copy(), proposed.hi.copy()
        size = hi - lo
        hi[2] -= 0.2 * size[2]
        lo[0] -= 0.2 * size[0]
        seen.update(frame=proposed.frame.copy(), lo=lo, hi=hi, floor=proposed.floor)
        return confirmed_region(proposed, (*lo, *hi), tuple(proposed.frame.reshape(-1)))

    cfg = MeshConfig(faces=4000, texture_size=256, resolution=48, formats=("ply",))
    rep = run_mesh(trained, cfg, confirm_bounds=confirm)
    rec = json.loads((trained / "mesh.json").read_text())["bounds"]
    assert rec == json.loads(json.dumps(rep["bounds"]))
    assert rec["mode"] == "object" and rec["edited_by_user"] is True and "edited by the user" in rec["reason"]
    assert np.allclose(rec["frame"], seen["frame"], atol=1e-12)
    assert np.allclose(rec["hi"], seen["hi"]) and np.allclose(rec["lo"][:2], seen["lo"][:2])
    voxel = rep["grid"]["voxel"]
    cut = seen["lo"][2] + (cfg.cut_voxels * voxel if seen["floor"] is not None else 0.0)
    assert np.isclose(rec["cut_height"], cut) and rep["grid"]["cap_layer"] is not None
    mesh = trimesh.load(rep["files"]["ply"], process=False)
    q = np.asarray(mesh.vertices) @ np.asarray(rec["frame"]).T
    assert len(q) and (q >= np.array([*seen["lo"][:2], cut]) - 1.5 * voxel).all()
    assert (q <= seen["hi"] + 1.5 * voxel).all()
