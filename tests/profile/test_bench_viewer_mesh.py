"""`spirula bench viewer` and `spirula bench mesh` at tiny sizes on software Vulkan (seconds):
the command runs (as a process, `python -m spirula.engine.cli`), its JSON has what the GPU-machine
driver (benchmarks/gpu.sh) collects, and bench mesh leaves the project's own files alone."""

import json
import subprocess
import sys

import numpy as np

from spirula.engine.fileio import write_json_atomic
from spirula.engine.io.ply import write_ply
from spirula.engine.cli.bench.viewer_fps import ball_scene, orbit_w2c
from tests.mesh import synthetic as S
from tests.mesh.analytic import orbit_cameras

SIZE, VIEWS = 48, 8
MESH_STEPS = {"load", "depth", "consistency", "bounds", "fuse", "extract", "clean", "decimate", "repair", "atlas", "bake", "export"}


def spirula(*argv):
    return subprocess.run([sys.executable, "-m", "spirula.engine.cli", *argv], capture_output=True, text=True)


def test_bench_viewer_json(tmp_path):
    out = tmp_path / "viewer.json"
    r = spirula("bench", "viewer", "--gaussians", "3000", "--width", "80", "--height", "48", "--sh-degree", "1",
                "--frames", "4", "--warmup", "1", "--readback", "--json", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert json.loads(r.stdout.strip().splitlines()[-1]) == res
    assert "bench viewer on " in r.stderr and " fps)" in r.stderr
    assert res["bench"] == "viewer" and res["gaussians"] == 3000 and res["frames"] == 4 and res["readback"]
    assert res["intersections"] > 3000  # the ball fills the view: most splats touch a tile or more
    assert len(res["frame_ms_each"]) == 4 and 0 < res["min_ms"] <= res["median_ms"] <= res["p90_ms"]
    assert abs(res["fps_median"] - 1000 / res["median_ms"]) < 1e-6


def test_viewer_scene_and_path_are_fixed():
    a, b = ball_scene(500, 2, seed=3), ball_scene(500, 2, seed=3)
    assert np.array_equal(a, b) and not np.array_equal(a, ball_scene(500, 2, seed=4))
    assert np.linalg.norm(a[:, :3], axis=1).max() <= 2.0 + 1e-5  # inside the ball of radius 2
    for k in range(6):
        w2c = orbit_w2c(k, 6)
        eye = -w2c[:3, :3].T @ w2c[:3, 3]
        assert abs(np.linalg.norm(eye) - 5.0) < 1e-9 and abs(eye[2]) < 1e-9
        assert w2c[2, :3] @ -eye > 4.999  # looking at the origin
    assert np.allclose(orbit_w2c(0, 6), orbit_w2c(6, 6))  # one full turn


def _tiny_project(root):
    """A torus dataset (tests/mesh/synthetic.py) and, as the trained splats, opaque small
    Gaussians on the exact surface: no training needed for the mesh stage to find it."""
    rng = np.random.default_rng(2)
    verts, faces = S.torus_mesh(64, 24)
    S.write_dataset(root / "data", orbit_cameras(VIEWS, 3.2, SIZE, SIZE * 1.1), verts, faces)
    n = 6000
    means = S.torus_samples(n, rng).astype(np.float32)
    q = rng.normal(size=(n, 4)).astype(np.float32)
    write_ply(root / "project" / "splat.ply", {
        "means": means, "scales": np.full((n, 3), np.log(0.03), np.float32),
        "quats": q / np.linalg.norm(q, axis=1, keepdims=True), "opacities": np.full(n, 4.0, np.float32),
        "sh0": ((S.solid_texture(means) - 0.5) / 0.28209479).astype(np.float32),
        "shN": np.zeros((n, 0, 3), np.float32)})
    write_json_atomic(root / "project" / "train.json", {"dataset": str(root / "data"),
                                                        "config": {"dataset": {"max_size": SIZE}}})
    return root / "project"


def test_bench_mesh_json_and_project_untouched(tmp_path):
    (tmp_path / "project").mkdir()
    project = _tiny_project(tmp_path)
    before = sorted(p.name for p in project.iterdir())
    out = tmp_path / "mesh.json"
    r = spirula("bench", "mesh", str(project), "--faces", "2000", "--texture-size", "64", "--resolution", "48",
                "--repeats", "2", "--json", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["bench"] == "mesh" and res["repeats"] == 2 and len(res["seconds_each"]) == 2
    assert set(res["seconds"]) == {*MESH_STEPS, "total"}
    assert all(v >= 0 for v in res["seconds"].values())
    assert res["seconds"]["total"] >= res["seconds"]["depth"] + res["seconds"]["bake"]
    assert res["views"] == VIEWS and res["gaussians"] == 6000 and 0 < res["faces"] <= 2000
    assert res["config"]["faces"] == 2000 and res["config"]["texture_size"] == 64
    assert sorted(p.name for p in project.iterdir()) == before  # no exports/, no mesh.json


def test_bench_mesh_of_missing_project_is_a_clear_error(tmp_path):
    r = spirula("bench", "mesh", str(tmp_path / "nothing"))
    assert r.returncode == 1 and "splat.ply" in r.stderr and "Traceback" not in r.stderr


def test_device_cpu_is_refused_by_both(tmp_path):
    for argv in (["bench", "viewer"], ["bench", "mesh", str(tmp_path)]):
        r = spirula(*argv, "--device", "cpu")
        assert r.returncode == 2 and "cpu backend is not supported" in r.stderr
