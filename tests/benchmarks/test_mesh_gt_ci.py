"""Issue 47's bars on the ground-truth mesh benchmark at CI size (software Vulkan): each
scene generated, `spirula run` at its defaults (500 steps; the CI size's face budget and
texture size), its mesh scored (benchmarks/mesh_gt).

Bars: object scenes (a-d) F-score at 1% >= 0.90, area outside the object's box <= 2% of
the mesh, every thin part (legs, slats) in the largest component, the mesh watertight (the
scorer's trimesh check on the vertex-welded PLY: the repair step closes an object's mesh,
spirula/engine/mesh/clean.py close_holes); the room (e, meshed with ``--mesh-bounds scene``) F-score
at 1% >= 0.80.

The room (e) meets its bar with issue 47's mesh stage (F@1% 0.886) and guards it; the chair
(a) meets its bars too (F@1% 0.92-0.95, 0.8-1.35% of its area outside the box; watertight and
one component since the repair step), but one nondeterministic software-device run is too
thin a margin for a gate. Since the bounds step measures the support's band and boxes the
photo-textured points (spirula/engine/mesh/bounds.py), the can (b) keeps 0.2% outside its box (5%
before) but misses F@1% (0.82-0.87: the far side of a 200-degree orbit, recall 0.5-0.7 there,
closed flat by the repair); the small object on a large floor (c: 7% outside, 64% before) is a
blob at 200 px (10 px wide: F@1% 0.16); the object on a textureless table (d: F@1% 0.85-0.88,
12% outside, 43% before) keeps sheets the plain table grew against its walls in training.
xfail (not strict) until they pass (benchmarks/mesh_gt/README.md has dfa6aa5's numbers).
Each scene takes 2-5 minutes on 2 shared cores.
"""

from __future__ import annotations

import pytest

from benchmarks.mesh_gt.run import run_scene

F1_OBJECT, OUTSIDE_PCT, F1_ROOM = 0.90, 2.0, 0.80


def _missing(scene: str, why: str):
    return pytest.param(scene, marks=pytest.mark.xfail(strict=False, reason=f"issue 47: {why}"))


@pytest.mark.parametrize("scene", [_missing("a", "met today (F@1% 0.920, 1.35% outside, watertight): too thin a margin "
                                            "for a gate on a nondeterministic software device"),
                                   _missing("b", "F@1% 0.82-0.87: the far side of the 200-degree orbit is not "
                                            "recovered (closed flat)"),
                                   _missing("c", "at 200 px the object is 10 px wide: a blob (F@1% 0.16), 7% outside"),
                                   _missing("d", "sheets the plain table grew against the toy's walls: 12% outside"),
                                   "e"])
def test_mesh_bars_at_ci_size(scene, tmp_path):
    r = run_scene(scene, "ci", tmp_path, device="vulkan", log=lambda *_: None)
    assert "score" in r, r.get("error")
    s = r["score"]
    if scene == "e":
        assert s["fscore@1%"] >= F1_ROOM, s
        return
    assert s["fscore@1%"] >= F1_OBJECT, s
    assert s["outside_area_pct"] <= OUTSIDE_PCT, s
    assert s["thin_in_largest"] in (True, None), s["thin_parts"]
    assert s["watertight"], s
