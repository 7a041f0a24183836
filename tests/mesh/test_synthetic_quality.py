"""End to end on a scene with known geometry, CI-sized: a solid-textured torus rendered by
the NumPy z-buffer rasteriser of tests/mesh/synthetic.py (not our splat code) from 24
cameras at 128 px -> 250 training steps of our Trainer -> `spirula mesh` -> Chamfer
distance and F-score against the exact torus.

The issue's bar: Chamfer <= 1% of the bounding-box diagonal and F-score at 0.5% of the
diagonal >= 0.8. Observed here on lavapipe: Chamfer ~0.3%, F@0.5% ~0.85, F@1% ~0.97
(with --depth expected instead of the default median depth: F@0.5% ~0.2, see
spirula/engine/mesh/depth.py). The dataset carries a sparse point cloud as COLMAP would triangulate
it (8,000 noisy surface samples + 5% outliers, no colours from our renderer), the usual
3DGS initialisation; training from random points in the box needs far more steps than a
CI run has.
"""

import json
import re

import numpy as np
import pytest
import trimesh

from spirula.engine.cli.main import main
from spirula.engine.config import TrainConfig
from spirula.engine.fileio import write_json_atomic
from spirula.engine.ingest import load_dataset
from spirula.engine.splat.trainer import Trainer
from spirula.engine.jobs.train import export_ply
from tests.mesh import synthetic as S
from tests.mesh.analytic import orbit_cameras

SIZE, VIEWS, STEPS, POINTS = 128, 24, 250, 8000


@pytest.fixture(scope="module")
def project(tmp_path_factory, gpu):
    root = tmp_path_factory.mktemp("torus")
    rng = np.random.default_rng(5)
    verts, faces = S.torus_mesh()
    S.write_dataset(root / "data", orbit_cameras(VIEWS, 3.2, SIZE, SIZE * 1.1), verts, faces,
                    S.sfm_like_points(POINTS, rng))
    ds = load_dataset(root / "data", SIZE)
    cfg = TrainConfig(steps=STEPS, sh_degree=0, densify_from=100, densify_until=200, densify_interval=50,
                      opacity_reset_interval=0, log_interval=50, seed=1)
    trainer = Trainer(gpu, ds, list(range(len(ds.cameras))), cfg)
    trainer.train()
    proj = root / "project"
    proj.mkdir()
    export_ply(trainer, proj / "splat.ply")
    write_json_atomic(proj / "train.json", {"dataset": str(root / "data"),
                                            "config": {"dataset": {"max_size": SIZE}}})
    return proj


def test_torus_mesh_quality(project, capsys):
    rc = main(["mesh", str(project), "--faces", "20000", "--texture-size", "256", "--resolution", "128"])
    assert rc == 0
    out = capsys.readouterr()
    assert re.search(r"\[mesh (\d+)/\1\] export", out.err) and "mesh.glb" in out.out   # the last step
    report = json.loads((project / "mesh.json").read_text())
    mesh = trimesh.load(project / "exports" / "mesh.ply", process=False)
    assert len(mesh.faces) == report["faces"] <= 20000
    m = S.surface_metrics(np.asarray(mesh.vertices), np.asarray(mesh.faces), np.random.default_rng(0))
    with capsys.disabled():
        print(f"\ntorus ({VIEWS} views, {SIZE} px, {STEPS} steps): Chamfer {m['chamfer']:.4f} = "
              f"{100 * m['chamfer_rel']:.2f}% of the diagonal {m['diag']:.3f}; F@0.5% {m['fscore@0.5%']:.3f} "
              f"(P {m['precision@0.5%']:.3f}, R {m['recall@0.5%']:.3f}); F@1% {m['fscore@1.0%']:.3f}; "
              f"{report['faces']} faces, texel coverage {report['texel_coverage']:.2f}; "
              f"mesh stage {report['seconds']['total']:.1f} s, host peak {report['memory']['host_peak_mb']:.0f} MB")
    assert m["chamfer_rel"] <= 0.01
    assert m["fscore@0.5%"] >= 0.8
    # every step was timed and memory recorded
    assert set(report["seconds"]) >= {"depth", "fuse", "extract", "clean", "decimate", "atlas", "bake", "export"}
    assert report["memory"]["host_peak_mb"] > 0 and report["memory"]["gpu_peak_mb"] > 0
    # the texture came from the images: the checker's two colours dominate the chart texels
    glb = trimesh.load(project / "exports" / "mesh.glb", force="mesh")
    tex = np.asarray(glb.visual.material.baseColorTexture.convert("RGB"), float)
    orange = (tex[..., 0] > tex[..., 2] + 60).mean()
    blue = (tex[..., 2] > tex[..., 0] + 60).mean()
    assert orange > 0.2 and blue > 0.2, (orange, blue)


def test_mesh_of_missing_project_is_a_clear_error(tmp_path, capsys):
    rc = main(["mesh", str(tmp_path / "nothing")])
    assert rc == 1
    assert "splat.ply" in capsys.readouterr().err
