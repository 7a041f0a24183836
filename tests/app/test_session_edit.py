"""The engine thread's splat edit without Qt (spirula/engine/studio/editing.py): a finished training
becomes editable, the viewer renders the edited model (a crop leaving no splat shows the
background alone; undone, the splats are back), and the mesh stage's input and the export
are the edited splats."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spirula.engine.io.ply import read_ply
from spirula.engine.studio import protocol as M
from spirula.engine.studio.session import Session

from .test_session import Driver, _background

pytestmark = pytest.mark.timeout(400)


def test_a_finished_training_is_edited_and_the_view_hides_what_is_cut(tiny_dataset, tmp_path):
    s = Session(projects=tmp_path / "projects").start()
    d = Driver(s)
    try:
        d.wait(lambda m: isinstance(m, M.EngineReady), 300, "EngineReady")
        s.send(M.ResizeViewport(96, 72))
        s.send(M.StartTraining(str(tiny_dataset), project=str(tmp_path / "proj"), steps=20, max_size=64,
                               init_random_points=400, max_gaussians=450))
        scene = d.wait(lambda m: isinstance(m, M.SceneLoaded), 120, "SceneLoaded")
        done = d.wait(lambda m: isinstance(m, M.Done), 300, "Done")
        g = read_ply(done.result["ply"], warn=False)
        c2w = np.array(scene.cameras[1].c2w).reshape(4, 4)
        s.send(M.SetView(tuple(np.linalg.inv(c2w).reshape(-1)), 60.0, None))
        s.send(M.SetViewMode("splats", frustums=False))
        bg = _background(72)[:, None, :].astype(int)
        assert np.abs(d.frame().astype(int) - bg).max() > 30          # splats drawn

        # the first edit command opens the finished training's splat.ply for editing
        far = (1e5, 1e5, 1e5, 1e5 + 1, 1e5 + 1, 1e5 + 1)              # a box no splat is in
        s.send(M.EditSplats("crop", crop=far))
        st = d.wait(lambda m: isinstance(m, M.EditState) and m.label == "crop", 120, "crop")
        assert st.available and st.total == len(g) and st.kept == 0
        assert np.abs(d.frame().astype(int) - bg).max() <= 2          # the background alone: all cut
        s.send(M.EditSplats("undo"))
        st = d.wait(lambda m: isinstance(m, M.EditState) and m.label == "undo crop", 60, "undo")
        assert st.kept == len(g) and np.abs(d.frame().astype(int) - bg).max() > 30

        lo, hi = np.percentile(g.means, 30, axis=0), np.percentile(g.means, 80, axis=0)
        s.send(M.EditSplats("crop", crop=(*lo, *hi)))
        st = d.wait(lambda m: isinstance(m, M.EditState) and m.label == "crop", 60, "crop 2")
        keep = np.all((g.means >= lo) & (g.means <= hi), axis=1)
        assert st.kept == keep.sum() > 0
        saved = json.loads((tmp_path / "proj" / "edit.json").read_text())
        assert saved["ply"]["count"] == len(g)
        out = tmp_path / "cut.ply"
        s.send(M.ExportPly(str(out)))
        d.wait(lambda m: isinstance(m, M.Saved) and m.path == str(out), 60, "export")
        assert np.array_equal(read_ply(out, warn=False).means, g.means[keep])
        # the mesh stage's input (spirula/engine/jobs/mesh.py load_project) is the edited splats
        from spirula.engine.jobs.mesh import load_project
        from spirula.engine.mesh.mesh_config import MeshConfig

        _, splats, _ = load_project(tmp_path / "proj", MeshConfig(max_size=32))
        assert np.array_equal(splats.means, g.means[keep])
    finally:
        assert s.close(save=False, timeout=120)
