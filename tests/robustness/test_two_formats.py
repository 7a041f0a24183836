"""Input class: a folder with both transforms.json and sparse/0 (nerfstudio's
ns-process-data leaves both). transforms.json is read, a warning says so and why, and the
COLMAP model's points are used -- mapped into the transforms.json frame -- only when the
two files agree on the shared images' poses; otherwise a warning says they are not."""

from __future__ import annotations

import json

import numpy as np

from spirula.engine.ingest import load_dataset

from ..ingest.synth import random_rotation
from .fixtures import ring_dataset

GL = np.diag([1.0, -1.0, -1.0, 1.0])


def _write_transforms(root, scene, s, r, t, width=48, height=36, ply=None, perturb=None):
    frames = []
    for k, (name, w2c) in enumerate(zip(scene["names"], scene["w2c"])):
        rc, tc = w2c[:3, :3], w2c[:3, 3]
        w2c_t = np.eye(4)
        w2c_t[:3, :3] = rc @ r.T                    # X_t = s R X_c + T  =>  R_t = R_c R^T
        w2c_t[:3, 3] = s * tc - rc @ r.T @ t        # camera coordinates scale with the world
        if perturb is not None and k == perturb:
            w2c_t[:3, :3] = w2c_t[:3, :3] @ random_rotation(np.random.default_rng(9))
        frames.append({"file_path": f"images/{name}", "transform_matrix": (np.linalg.inv(w2c_t) @ GL).tolist()})
    meta = {"fl_x": 0.9 * width, "fl_y": 0.9 * width, "cx": width / 2, "cy": height / 2, "w": width, "h": height,
            "frames": frames}
    if ply:
        meta["ply_file_path"] = ply
    (root / "transforms.json").write_text(json.dumps(meta))


def _similarity(seed):
    rng = np.random.default_rng(seed)
    return float(rng.uniform(0.3, 3.0)), random_rotation(rng), rng.normal(size=3) * 5


def test_points_of_the_model_beside_transforms_are_mapped_when_poses_agree(tmp_path):
    scene = ring_dataset(tmp_path, 6, points=40)
    s, r, t = _similarity(1)
    _write_transforms(tmp_path, scene, s, r, t)
    ds = load_dataset(tmp_path, max_size=None)
    note = next(w for w in ds.warnings if "holds both transforms.json and a COLMAP model (sparse/0)" in w)
    assert "transforms.json is read" in note and "its 40 points3D are the initial points" in note
    expect = (s * scene["points"] @ r.T + t).astype(np.float32)
    np.testing.assert_allclose(ds.points, expect, rtol=0, atol=2e-5 * np.abs(expect).max())
    # the poses read are transforms.json's (the frame the points were mapped into)
    c = ds.cameras[0]
    np.testing.assert_allclose(c.center, s * r @ scene["centers"][0] + t, atol=1e-9 * (1 + abs(t).max()))


def test_disagreeing_poses_leave_the_points_out_with_a_warning(tmp_path):
    scene = ring_dataset(tmp_path, 6, points=40)
    _write_transforms(tmp_path, scene, *_similarity(2), perturb=3)
    ds = load_dataset(tmp_path, max_size=None)
    note = next(w for w in ds.warnings if "holds both" in w)
    assert "its 40 points3D are not used: the poses of the 6 images in both disagree" in note
    assert ds.points is None


def test_transforms_points_win_and_it_is_said(tmp_path):
    from .fixtures import ply_bytes

    scene = ring_dataset(tmp_path, 4, points=10)
    pts = np.zeros(2, [(n, "f8") for n in ("x", "y", "z")])
    pts["x"] = [1.0, 2.0]
    (tmp_path / "pc.ply").write_bytes(ply_bytes("ascii", [("vertex", pts, [("float", "x"), ("float", "y"),
                                                                           ("float", "z")])]))
    _write_transforms(tmp_path, scene, 1.0, np.eye(3), np.zeros(3), ply="pc.ply")
    ds = load_dataset(tmp_path, max_size=None)
    assert len(ds.points) == 2
    assert any("its own points (ply_file_path) are used, not the model's points3D" in w for w in ds.warnings)
