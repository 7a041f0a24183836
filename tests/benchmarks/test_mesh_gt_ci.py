"""Issue 47's bars on the ground-truth mesh benchmark at CI size (software Vulkan): each
scene generated, `spirula run` at its defaults (500 steps; the CI size's face budget and
texture size), its mesh scored (benchmarks/mesh_gt).

Bars: object scenes (a-d) F-score at 1% >= 0.90, area outside the object's box <= 2% of
the mesh, every thin part (legs, slats) in the largest component, the mesh watertight (the
scorer's trimesh check on the vertex-welded PLY: the repair step closes an object's mesh,
engine/mesh/clean.py close_holes); the room (e, meshed with ``--mesh-bounds scene``) F-score
at 1% >= 0.80.

The room (e) meets its bar with issue 47's mesh stage (F@1% 0.886) and guards it; the chair
(a) meets its bars too, watertight since the repair step (one component, F@1% 0.920, 1.35% of
its area outside; the mesh stage alone re-run on one trained project), but with margins too
thin for a gate on a nondeterministic software device. The can (b: closed, but F@1% about
0.82: its unseen back is closed flat, and 2-3.5% of the area outside its box), the small object
on a large floor (c: F@1% 0.17, 54% outside) and the object on a textureless table (d: closed,
F@1% 0.854, 42% outside, the table kept) still miss them: xfail (not strict) until they pass
(benchmarks/mesh_gt/README.md has dfa6aa5's numbers, the issue's note today's). Each scene
takes 1-2 minutes on 2 cores.
"""

from __future__ import annotations

import pytest

from benchmarks.mesh_gt.run import run_scene

F1_OBJECT, OUTSIDE_PCT, F1_ROOM = 0.90, 2.0, 0.80


def _missing(scene: str, why: str):
    return pytest.param(scene, marks=pytest.mark.xfail(strict=False, reason=f"issue 47: {why}"))


@pytest.mark.parametrize("scene", [_missing("a", "met today (F@1% 0.920, 1.35% outside, watertight): too thin a margin "
                                            "for a gate on a nondeterministic software device"),
                                   _missing("b", "F@1% about 0.82 (the unseen back closed flat); 2-3.5% of the can's "
                                            "mesh outside its box"),
                                   _missing("c", "the small object is not found on the large floor"),
                                   _missing("d", "the textureless table stays in the object's mesh (42% outside)"), "e"])
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
