"""The outline of a selection being dragged (spirula/engine/studio/editing.py outline_segments):
world segments that project back onto the dragged screen points (a K matrix reference)."""

from __future__ import annotations

import math

import numpy as np

from spirula.engine.studio import protocol as M
from spirula.engine.studio.editing import outline_segments


def test_the_outline_projects_onto_the_dragged_points():
    rng = np.random.default_rng(3)
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    w2c = np.eye(4)
    w2c[:3, :3], w2c[:3, 3] = q * np.sign(np.diag(r)), rng.normal(size=3)
    w, h, fov = 300.0, 200.0, 45.0
    cmd = M.EditSplats("outline", rect=(20.0, 30.0, 250.0, 170.0), w2c=tuple(w2c.reshape(-1)), fov_y_deg=fov,
                       width=w, height=h)
    segs, cols = outline_segments(cmd)
    assert segs.shape == (4, 6) and len(cols) == 4
    f = 0.5 * h / math.tan(math.radians(fov) / 2)
    k = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]])
    ends = segs.reshape(-1, 3).astype(np.float64)
    cam = (np.c_[ends, np.ones(len(ends))] @ w2c.T)[:, :3]
    uv = (cam @ k.T)[:, :2] / cam[:, 2:3]
    assert np.allclose(cam[:, 2], 1.0, atol=1e-5)
    corners = {(20, 30), (250, 30), (250, 170), (20, 170)}
    assert {tuple(np.round(p).astype(int)) for p in uv} == corners
    brush = M.EditSplats("outline", brush=(10.0, 10.0, 50.0, 60.0, 90.0, 20.0), w2c=tuple(w2c.reshape(-1)),
                         fov_y_deg=fov, width=w, height=h)
    assert outline_segments(brush)[0].shape == (2, 6)
    assert outline_segments(M.EditSplats("outline")) is None
