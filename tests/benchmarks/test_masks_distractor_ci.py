"""Issue 51's masks bar at CI size (software Vulkan): the toy with a distractor in half of
the views (benchmarks/masks_distractor.py, rendered by benchmarks/mesh_gt's ray caster)
trained with ``--masks ignore`` and with ``--masks off`` at the same settings.

What is guarded: with the masks the distractor is absent from the held-out renders (no
distractor-coloured pixel where it stood, and there the render matches the view rendered
without it) and the kept pixels score no worse than without masks. The bar's "beats training
without masks" is not a gate: at this size (and at the benchmark's CI size, BENCHMARKS.md)
the run without masks does not learn the distractor either (a transient seen by a quarter of
the views is averaged away in 300-500 steps), so the two score within a few hundredths of a
dB; the scene keeps that ``quarters`` layout. With the benchmark's default ``half`` layout (the
ball at one place in half of the views) and 1500 steps the run without masks does learn it
(benchmarks/results/masks-2026-12-08-lavapipe/: ~15 minutes a pair, too long for a test).
The mesh half of the bar is measured by the benchmark, not here (minutes more)."""

from __future__ import annotations

import pytest

from benchmarks.masks_distractor import generate, train
from benchmarks.mesh_gt.scenes import Size

pytestmark = pytest.mark.timeout(1200)

SMALL = Size("ci-test", 120, 90, 16, 1, 3000, 300)


def test_masked_distractor_is_gone_and_the_kept_pixels_score_higher(tmp_path):
    data = tmp_path / "data"
    generate(data, SMALL, log=lambda *_: None, layout="quarters")  # as measured (module docstring)
    runs = {m: train(data, tmp_path / f"train_{m}", m, SMALL.steps, "vulkan", False, log=lambda *_: None)
            for m in ("ignore", "off")}
    for m, r in runs.items():
        assert r["returncode"] == 0, (m, (tmp_path / f"train_{m}.log").read_text()[-2000:])
    ign, off = runs["ignore"], runs["off"]
    assert ign["masks_in_force"] == "ignore" and off["masks_in_force"] == "off"
    print({m: {k: r[k] for k in ("psnr_kept", "psnr_distractor_region", "magenta")} for m, r in runs.items()})
    assert ign["magenta"] < 0.01 and ign["ghost"] < 0.001
    assert ign["psnr_distractor_region"] > 18.0
    assert ign["psnr_kept"] >= off["psnr_kept"] - 0.3
