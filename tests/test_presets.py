"""Training presets (spirula/engine/config.py PRESETS, issue 25's time to quality): what `--preset fast`
resolves to in `spirula train`, `spirula run`, the studio and the quality protocol, and a
tiny real run with it on book."""

from __future__ import annotations

import argparse
import json

import pytest
from spirula.engine.cli.main import main
from spirula.engine.config import PRESETS, TrainConfig, preset_settings
from spirula.engine.io.ply import read_ply
from spirula.engine.splat.mcmc import McmcSettings, refine_stop_for

# the documented settings (spirula/engine/config.py PRESETS' comments say why each)
FAST = {"steps": 10_000, "mcmc_refine_until": 0.8}


def test_presets_resolve_to_the_documented_settings():
    assert set(PRESETS) == {"default", "fast", "software"}
    assert preset_settings("default") == {}
    assert preset_settings("fast") == FAST
    preset_settings("fast")["steps"] = 1          # a copy: the table is not changed through it
    assert PRESETS["fast"]["steps"] == 10_000
    assert set(FAST) <= {f for f in TrainConfig.__dataclass_fields__}
    assert set(preset_settings("software")) <= set(TrainConfig.__dataclass_fields__) | {"max_size"}
    with pytest.raises(ValueError, match="fast"):
        preset_settings("fastest")
    # MCMC's refine window: 0.8 of the run with the preset, gsplat's fixed 25,000 without
    assert refine_stop_for(0.8, 10_000) == 8_000 and refine_stop_for(0.8, 500) == 400
    assert refine_stop_for(TrainConfig.mcmc_refine_until, 10_000) == McmcSettings.stop == 25_000


def _cli_configs(tmp_path, monkeypatch, flags):
    """(TrainConfig of `spirula train`, of `spirula run`) for ``flags``, nothing trained."""
    import spirula.engine.jobs.train
    from spirula.engine.cli.run_command import add_parser, config_from_args

    seen = []
    monkeypatch.setattr(spirula.engine.jobs.train, "run_training",
                        lambda data, out, cfg, **kw: seen.append(cfg) or {"stopped_early": False, "step": 0})
    assert main(["train", str(tmp_path), "-o", str(tmp_path / "out"), *flags]) == 0
    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    add_parser(sub)
    args = sub._name_parser_map["run"].parse_args([str(tmp_path), "-o", str(tmp_path / "run"), "--appearance", "off",
                                                   *flags])
    return seen[0].train, config_from_args(args).run.train


def test_preset_flag_reaches_train_and_run(tmp_path, monkeypatch):
    for train in _cli_configs(tmp_path, monkeypatch, ["--preset", "fast"]):
        assert (train.steps, train.mcmc_refine_until) == (10_000, 0.8)
        assert train.strategy == "auto" and train.mcmc_budget == TrainConfig.mcmc_budget  # else the defaults
        assert train.lr_means == TrainConfig.lr_means and train.densify_from == TrainConfig.densify_from
    for train in _cli_configs(tmp_path, monkeypatch, ["--preset", "fast", "--steps", "12000"]):
        assert (train.steps, train.mcmc_refine_until) == (12_000, 0.8)   # an option beside the preset wins
    for train in _cli_configs(tmp_path, monkeypatch, []):
        assert (train.steps, train.mcmc_refine_until) == (TrainConfig.steps, 0.0)


def test_studio_start_training_carries_the_preset_schedule():
    from spirula.engine.studio import protocol as M
    from spirula.engine.settings import from_saved
    from spirula.engine.studio.scenes import run_config

    cfg = run_config(M.StartTraining("d", steps=10_000, mcmc_refine_until=0.8), "vulkan")
    assert (cfg.train.steps, cfg.train.mcmc_refine_until) == (10_000, 0.8)
    assert run_config(M.StartTraining("d"), "vulkan").train.mcmc_refine_until == 0.0
    # a restart of a saved run keeps it
    assert from_saved({"train": {"steps": 10_000, "mcmc_refine_until": 0.8}})["mcmc_refine_until"] == 0.8


def test_fast_preset_trains_book_and_writes_a_ply(shared_data, tmp_path):
    """A real `spirula train --preset fast` (its steps cut to 60, 64 px: seconds on software
    Vulkan): it finishes, writes a PLY that reads back, and records the preset's schedule."""
    out = tmp_path / "fast"
    rc = main(["train", str(shared_data / "book"), "-o", str(out), "--preset", "fast", "--steps", "60",
               "--max-size", "64", "--checkpoint-every", "0"])
    assert rc == 0
    g = read_ply(out / "splat.ply")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["step"] == 60 and len(g.means) == metrics["num_gaussians"] > 600
    config = json.loads((out / "train.json").read_text())["config"]["train"]
    assert (config["steps"], config["mcmc_refine_until"]) == (60, 0.8)


def test_mcmc_refine_stops_at_the_presets_fraction(gpu, shared_data):
    """The trainer hands MCMC the preset's window: 0.8 x the steps (not gsplat's fixed 25,000)."""
    from spirula.engine.ingest import load_dataset
    from spirula.engine.splat.trainer import Trainer

    ds = load_dataset(shared_data / "book", 64)
    for until, stop in ((0.8, 8_000), (0.0, 25_000)):
        tr = Trainer(gpu, ds, [0, 1, 2], TrainConfig(steps=10_000, strategy="mcmc", mcmc_budget=2_000,
                                                     max_gaussians=2_000, mcmc_refine_until=until))
        assert tr.strategy == "mcmc" and tr.densifier.s.stop == stop


def test_time_to_target_reads_the_first_scored_step_at_the_target():
    """benchmarks/quality_trajectory.py (gpu.sh's fast protocol): the first scored step, or the
    end, at or above the target, with its training seconds."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from quality_trajectory import time_to_target

    r = {"steps": 10_000, "psnr": 31.0, "train_s": 18.0, "num_gaussians": 200_000,
         "trajectory": [{"step": 2000, "psnr": 25.0, "train_s": 3.0, "num_gaussians": 50_000, "views": []},
                        {"step": 8000, "psnr": 30.2, "train_s": 14.0, "num_gaussians": 200_000, "views": []}]}
    points, first = time_to_target(r, 30.15)
    assert [p["step"] for p in points] == [2000, 8000, 10_000] and (first["step"], first["train_s"]) == (8000, 14.0)
    assert time_to_target(r, 30.9)[1]["step"] == 10_000 and time_to_target(r, 32.0)[1] is None
