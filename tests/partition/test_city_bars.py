"""The issue's bars on a synthetic city (tests/partition/city.py: textured blocks on a
ground plane, cameras walking the streets, an independent ray caster), at CI size: 4 parts
against the unpartitioned run at the same steps per Gaussian (tests/partition/bars.py).

Measured here (lavapipe, 2026-12-02): parts' peak VRAM 0.38x the whole run's (the VRAM
pool's accounting: lavapipe has no VRAM of its own), merged held-out PSNR -0.26 dB, PSNR
near the borders 0.12 dB under the rest. The PSNR difference of two runs at this size
moves by about +-0.3 dB from run to run (the GPU's atomic sums are not ordered), so the
gate here is -0.5 dB; the issue's -0.3 dB is read from benchmarks/partition_quality.py at a
larger size (benchmarks/results/README.md)."""

import pytest

from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
from spirula.engine.partition.split import SplitSettings
from tests.partition.bars import seam_psnr, train_partitioned, train_whole
from tests.partition.city import make_city, write_city

POINTS, STEPS, WIDTH = 12000, 800, 64


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bars")
    hits = write_city(root / "city", make_city(width=WIDTH, height=WIDTH * 3 // 4), points=POINTS)
    cfg = RunConfig(dataset=DatasetConfig(max_size=WIDTH, eval_every=8),
                    train=TrainConfig(steps=STEPS, strategy="mcmc", mcmc_budget=POINTS, max_gaussians=POINTS,
                                      checkpoint_every=0, mcmc_init_scale=1.0))
    whole = train_whole(root / "city", root / "whole", cfg)
    settings = SplitSettings(parts=4, overlap=0.12, visibility=0.35, total_gaussians=POINTS, max_size=WIDTH,
                             min_cameras=4)
    merged = train_partitioned(root / "city", root / "parts", root / "merged", cfg, settings)
    return root, hits, whole, merged


def test_each_part_needs_at_most_0_4_of_the_whole_runs_vram(runs):
    _, _, whole, merged = runs
    assert len(merged["part_peak_vram_mib"]) == 4
    for name, peak in merged["part_peak_vram_mib"].items():
        assert 0 < peak <= 0.4 * whole["peak_vram_mib"], (name, peak, whole["peak_vram_mib"])


def test_merged_psnr_is_close_to_the_unpartitioned(runs):
    _, _, whole, merged = runs
    assert whole["psnr"] > 14.0  # both learned the city (the first render is ~10 dB)
    assert merged["psnr"] >= whole["psnr"] - 0.5, (merged["psnr"], whole["psnr"])
    assert abs(merged["num_gaussians"] - POINTS) <= 0.02 * POINTS  # the overlap is not counted twice


def test_no_seams_at_the_cell_borders(runs):
    root, hits, _, _ = runs
    s = seam_psnr(root / "merged" / "eval", hits, root / "parts", band=0.5)
    assert s["border_pixels"] > 1000 and s["rest_pixels"] > 1000
    assert s["border"] >= s["rest"] - 0.5, s
