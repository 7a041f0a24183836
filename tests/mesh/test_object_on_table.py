"""Issue 21's bar on a capture with a known object: a textured box on a textureless table
top inside a textured room (tests/mesh/room_scene.py: an analytic NumPy ray caster, not our
splats or renderer), 32 cameras orbiting the box at two heights at 256 px -> `spirula
train`'s training (run_training, 1,200 steps from SfM-like points) -> `spirula mesh` -> the
mesh against the exact box.

The numbers, printed: object Chamfer as % of the box diagonal, F-score at 0.5% of it, the
share of faces whose centre lies outside the box grown by TOL x the diagonal, and whether
the mesh is watertight (the box's bottom stands on the table and is never seen). The bars:
Chamfer <= 1%, F@0.5% >= 0.85, <= 1% of the faces outside, watertight. The mesh stage runs
with its defaults except the sizes a CI run can afford (faces, texture, resolution).

Issue 47's stage (no support plane, no orbit detection, no hole filling; a flat cap at the
floor cut), measured at 160 px / 600 steps (software Vulkan, the same splats for both,
`--resolution 256`): without the geometry phase Chamfer 0.29% (dfa6aa5: 0.37%), F@0.5% 0.865
(0.775), 1.6% of the faces outside (2.7%), not watertight (watertight). At this file's size
(256 px, 1,200 steps, 2026-12-07, wip-meshx cdf360a): default bounds Chamfer 0.20%, F@0.5%
0.971, F@1% 0.999, 0.1% outside, not watertight (xfail below), mesh stage 23.9 s; the true
box as bounds Chamfer 0.90%, F@1% 0.916, 0.0% outside.

Why 256 px and 1,200 steps (about 3 min of training on 2 cores): at 128 px 0.5% of the
diagonal is 0.55 px of a view, and after 300 steps the fused surface's noise alone (the
true box as bounds) gave F@0.5% 0.45. Measured on lavapipe (2026-12-04), default bounds:
- before: Chamfer 0.86%, F@0.5% 0.883, 2.3% of the faces outside, not watertight (no
  support plane: the textureless table holds almost no opaque splats);
- with the base plane under the subject's lowest splats (spirula/engine/mesh/subject.py) and every
  hole of the subject closed (spirula/engine/mesh/repair.close_mesh, also after decimation):
  Chamfer 0.24%, F@0.5% 0.940, 0.1% outside, watertight. At 128 px / 300 steps the same
  code gives Chamfer 0.77%, F@0.5% 0.34, 18.9% outside, watertight.
"""

import json

import numpy as np
import pytest
import trimesh

from spirula.engine.cli.main import main
from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
from spirula.engine.jobs.train import run_training
from tests.mesh import room_scene as R
from tests.mesh import synthetic as S

SIZE, PER_RING, HEIGHTS, RADIUS, STEPS = 256, 16, (0.5, 1.25), 1.3, 1200
MESH_ARGS = ["--faces", "30000", "--texture-size", "256", "--resolution", "256"]
TOL = 0.01   # x the box diagonal: how far outside the box a face may lie and still count as on it


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("table")
    R.write_room_dataset(root / "data", R.orbit(PER_RING, RADIUS, HEIGHTS, SIZE, SIZE * 1.1),
                         np.random.default_rng(11))
    cfg = RunConfig(dataset=DatasetConfig(max_size=SIZE, eval_every=0),
                    train=TrainConfig(steps=STEPS, sh_degree=0, strategy="adc", densify_from=400,
                                      densify_until=960, densify_interval=100, opacity_reset_interval=0,
                                      checkpoint_every=0, seed=1))
    run_training(root / "data", root / "project", cfg)
    return root / "project"


def object_numbers(project) -> dict:
    """The bars' numbers of <project>/exports/mesh.ply against the exact box."""
    mesh = trimesh.load(project / "exports" / "mesh.ply", process=False)
    v, f = np.asarray(mesh.vertices, np.float64), np.asarray(mesh.faces)
    diag = R.box_diagonal()
    m = S.surface_metrics(v, f, np.random.default_rng(0), samples=R.box_samples, distance=R.box_distance)
    seen = S.surface_metrics(v, f, np.random.default_rng(0), distance=R.box_distance,
                             samples=lambda n, rng: R.box_samples(n, rng, bottom=False))
    centre = v[f].mean(1)
    out = ((centre < R.BOX_LO - TOL * diag) | (centre > R.BOX_HI + TOL * diag)).any(1)
    return {"chamfer_pct": 100 * m["chamfer"] / diag, "fscore": m["fscore@0.5%"],
            "precision": m["precision@0.5%"], "recall": m["recall@0.5%"], "recall_seen": seen["recall@0.5%"],
            "fscore_1pct": m["fscore@1.0%"], "outside_pct": 100 * float(out.mean()), "faces": len(f),
            "watertight": bool(trimesh.Trimesh(v, f).is_watertight)}  # vertices merged for the edge check


def report(label: str, project, n: dict) -> str:
    secs = json.loads((project / "mesh.json").read_text())["seconds"]["total"]
    return (f"\nobject on a table, {label} ({2 * PER_RING} views, {SIZE} px, {STEPS} steps): Chamfer "
            f"{n['chamfer_pct']:.2f}% of the diagonal; F@0.5% {n['fscore']:.3f} (P {n['precision']:.3f}, "
            f"R {n['recall']:.3f}; R of the seen faces {n['recall_seen']:.3f}); F@1% {n['fscore_1pct']:.3f}; "
            f"{n['outside_pct']:.1f}% of {n['faces']} faces outside the box; watertight {n['watertight']}; "
            f"mesh stage {secs:.1f} s")


def test_object_on_table_meets_the_bars_with_default_bounds(project, capsys):
    assert main(["mesh", str(project), *MESH_ARGS]) == 0
    n = object_numbers(project)
    with capsys.disabled():
        print(report("default bounds", project, n))
    assert n["chamfer_pct"] <= 1.0
    assert n["fscore"] >= 0.85
    assert n["outside_pct"] <= 1.0
    # the floor cut is capped flat, the holes the fusion leaves where fewer than --min-support
    # views saw a cell (4,821 open edges at 160 px / 600 steps before the repair step) are closed
    # in their planes and the pinches of decimation removed (spirula/engine/mesh/clean.py close_holes)
    assert n["watertight"]
    mesh_json = json.loads((project / "mesh.json").read_text())
    assert mesh_json["watertight"] and mesh_json["repair"]["holes_left"] == 0


def test_object_on_table_with_the_true_box_as_bounds(project, capsys):
    g = 0.01 * R.box_diagonal()  # a margin, so the box's faces are inside the grid, not on its edge
    bounds = [f"{x:.6f}" for x in (*(R.BOX_LO - g), *(R.BOX_HI + g))]
    assert main(["mesh", str(project), *MESH_ARGS, "--bounds", *bounds]) == 0
    n = object_numbers(project)
    with capsys.disabled():
        print(report("the true box as --bounds", project, n))
    # what the fusion alone reaches here (the bars themselves are the test above's); measured
    # at 3e9093b: Chamfer 0.85%, F@1% 0.913, 0.0% outside, not watertight (explicit bounds: no closing)
    assert n["chamfer_pct"] <= 1.5
    assert n["fscore_1pct"] >= 0.85
    assert n["outside_pct"] <= 2.0
