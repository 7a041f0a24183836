"""Issue 51's masks bar at CI size (software Vulkan): the toy with a moving distractor in
half of the views (benchmarks/masks_distractor.py, rendered by benchmarks/mesh_gt's ray
caster) trained with ``--masks ignore`` and with ``--masks off`` at the same settings. With
the masks the distractor is absent from the held-out renders (their masked-out pixels match
the view rendered without it better, and are not distractor-coloured) and the held-out PSNR
over the kept pixels beats training without masks. The mesh half of the bar (nothing of the
distractor in the mesh) is measured by the benchmark itself at its CI size (BENCHMARKS.md),
not here: the mesh stage would add minutes."""

from __future__ import annotations

import pytest

from benchmarks.masks_distractor import generate, train
from benchmarks.mesh_gt.scenes import Size

pytestmark = pytest.mark.timeout(1200)

SMALL = Size("ci-test", 120, 90, 16, 1, 3000, 300)


def test_masked_distractor_is_gone_and_the_kept_pixels_score_higher(tmp_path):
    data = tmp_path / "data"
    generate(data, SMALL, log=lambda *_: None)
    runs = {m: train(data, tmp_path / f"train_{m}", m, SMALL.steps, "vulkan", False, log=lambda *_: None)
            for m in ("ignore", "off")}
    for m, r in runs.items():
        assert r["returncode"] == 0, (m, (tmp_path / f"train_{m}.log").read_text()[-2000:])
    ign, off = runs["ignore"], runs["off"]
    assert ign["masks_in_force"] == "ignore" and off["masks_in_force"] == "off"
    print({m: {k: r[k] for k in ("psnr_kept", "psnr_distractor_region", "magenta")} for m, r in runs.items()})
    assert ign["psnr_kept"] > off["psnr_kept"]
    assert ign["psnr_distractor_region"] > off["psnr_distractor_region"] + 3.0
    assert ign["magenta"] < 0.05 < off["magenta"]
