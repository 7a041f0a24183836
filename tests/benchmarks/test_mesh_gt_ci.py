"""Issue 47's bars on the ground-truth mesh benchmark at CI size (software Vulkan): each
scene generated, `spirula run` at its defaults (500 steps; the CI size's face budget and
texture size), its mesh scored (benchmarks/mesh_gt).

Bars: object scenes (a-d) F-score at 1% >= 0.90, area outside the object's box <= 2% of
the mesh, every thin part (legs, slats) in the largest component; the room (e, meshed with
``--mesh-bounds scene``) F-score at 1% >= 0.80.

Marked xfail (not strict): today's mesh stage (dfa6aa5) misses them on several scenes
(benchmarks/mesh_gt/README.md has its numbers); the mesh redesign of issue 47 turns them
into passes, and the mark goes then. Each scene takes a few minutes on 2 cores.
"""

from __future__ import annotations

import pytest

from benchmarks.mesh_gt.run import run_scene

F1_OBJECT, OUTSIDE_PCT, F1_ROOM = 0.90, 2.0, 0.80


@pytest.mark.xfail(strict=False, reason="issue 47: today's mesh stage misses the bars (benchmarks/mesh_gt/README.md)")
@pytest.mark.parametrize("scene", ["a", "b", "c", "d", "e"])
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
