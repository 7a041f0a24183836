"""The settings table (spirula/engine/settings.py): what is derived from it, and two of issue 48's
user-visible bugs, both failing on dfa6aa5: Restart of a finished run rebuilt its settings
from 13 keys (the MCMC budget went from 200,000 to 6,000,000; seed, SH degree, resolution
levels and the geometry phase's start fell back to their defaults), and the CLI had no preset
for a machine without a GPU (30,000 steps at 1600 px on software Vulkan, without a word)."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from types import SimpleNamespace

import pytest

from spirula.engine.config import TrainConfig


def test_the_configs_are_the_tables():
    """DatasetConfig and TrainConfig have one field per setting of their section, with the
    table's default, in the table's order; every setting has a help text and a known group."""
    from spirula.engine import settings as table
    from spirula.engine.config import DatasetConfig

    for cls, section in ((DatasetConfig, "dataset"), (TrainConfig, "train")):
        assert [(f.name, f.default) for f in fields(cls)] == [(s.name, s.default) for s in table.named(section)]
    for s in table.SETTINGS:
        assert s.help and s.group in table.GROUPS and s.stages
        assert s.check(s.default) == s.default  # every default passes its own range
    assert len({s.option for s in table.SETTINGS}) == len(table.SETTINGS)


def test_every_setting_has_an_option_in_train_run_and_partition():
    from spirula.engine import settings as table

    from spirula.engine.cli.main import build_parser
    from spirula.engine.cli.partition_command import PARTITION_FIXED

    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices
    part = sub["partition"]._subparsers._group_actions[0].choices["train"]
    recon = table.RECONSTRUCTION_ONLY  # `spirula run`'s alone
    for name, p, skip in (("train", sub["train"], recon), ("run", sub["run"], ()),
                          ("partition", part, (*PARTITION_FIXED, *recon))):
        flags = {f for a in p._actions for f in a.option_strings}
        missing = [s.option for s in table.SETTINGS if s.name not in skip and s.option not in flags]
        assert not missing, (name, missing)
        text = p.format_help()
        assert "--lr-means" in text and "advanced training settings" in text and "--preset" in text


def test_max_gaussians_is_a_cap_or_a_budget_in_one_place():
    """--max-gaussians: ADC's cap; MCMC's exact budget (the cap raised to it); both for auto;
    an explicitly set budget stays; a preset's budget does not override the user's count."""
    from spirula.engine import settings as table

    d = {s.name: s.default for s in table.SETTINGS}
    assert table.density({**d, "strategy": "adc", "max_gaussians": 5}, {"max_gaussians"})["mcmc_budget"] == 200_000
    mcmc = table.density({**d, "strategy": "mcmc"}, set())
    assert (mcmc["mcmc_budget"], mcmc["max_gaussians"]) == (200_000, 200_000)
    auto = table.density({**d, "max_gaussians": 300_000}, {"max_gaussians"})
    assert (auto["mcmc_budget"], auto["max_gaussians"]) == (300_000, 300_000)
    both = table.density({**d, "max_gaussians": 400_000, "mcmc_budget": 100_000}, {"max_gaussians", "mcmc_budget"})
    assert (both["mcmc_budget"], both["max_gaussians"]) == (100_000, 400_000)
    _, tr = table.resolve({"max_gaussians": 50_000}, "software")
    assert (tr["mcmc_budget"], tr["max_gaussians"], tr["steps"]) == (50_000, 50_000, 2_000)


def test_a_preset_never_overrides_what_was_set():
    from spirula.engine import settings as table

    ds, tr = table.resolve({"steps": 77, "max_size": 0, "appearance": "affine"}, "software", input_kind="video")
    assert (tr["steps"], ds["max_size"], tr["appearance"]) == (77, 0, "affine")
    assert tr["init_random_points"] == 10_000 and tr["densify_from"] == 100  # the rest: the preset's
    assert table.resolve({}, input_kind="video")[1]["appearance"] == "exposure"
    assert table.resolve({}, mesh_follows=True)[1]["geometry"] is True
    with pytest.raises(ValueError, match="steps"):
        table.resolve({"steps": 0})
    with pytest.raises(ValueError, match="unknown setting"):
        table.resolve({"stepz": 1})


def _saved_project(tmp_path, train: dict) -> "Path":  # noqa: F821
    """A finished `spirula train` project whose train.json saved ``train`` (over the defaults)."""
    from spirula.engine.config import RunConfig

    data = tmp_path / "data"
    data.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "splat.ply").write_bytes(b"ply\n")
    cfg = RunConfig(train=TrainConfig(**train))
    (project / "train.json").write_text(json.dumps({"dataset": str(data), "config": asdict(cfg)}))
    return project


def test_restart_of_a_finished_run_keeps_every_setting(tmp_path):
    """Restart (spirula/engine/studio/projects.py describe_project, then StartTraining as the window
    sends it) trains with exactly the settings the run saved. On dfa6aa5: the MCMC budget
    became 6,000,000 (the cap), seed / SH degree / resolution levels / geometry start the
    defaults."""
    from spirula.engine.studio import protocol as M
    from spirula.engine.studio.projects import describe_project
    from spirula.engine.studio.scenes import run_config

    ran = dict(steps=3_000, seed=7, sh_degree=2, res_levels=3, geometry=True, geometry_from=0.3,
               strategy="auto", mcmc_budget=200_000, max_gaussians=6_000_000, lambda_dssim=0.3)
    project = _saved_project(tmp_path, ran)
    info = describe_project(project)
    assert "restart" in info.choices
    cfg = run_config(M.StartTraining(info.dataset, **info.settings), "vulkan")
    saved = json.loads((project / "train.json").read_text())["config"]
    assert asdict(cfg.train) == {**saved["train"], "background": tuple(saved["train"]["background"])}
    assert asdict(cfg.dataset) == saved["dataset"]
    assert (cfg.train.mcmc_budget, cfg.train.seed, cfg.train.sh_degree, cfg.train.res_levels,
            cfg.train.geometry_from) == (200_000, 7, 2, 3, 0.3)


@pytest.fixture
def cli_runs(monkeypatch):
    """Runs `spirula train` without training: the RunConfigs it would train with, the device
    faked (``set_device(software)``), no preset pinned by the environment."""
    import spirula.engine.device
    import spirula.engine.jobs.train

    monkeypatch.delenv("SPIRULA_PRESET", raising=False)
    seen = []
    monkeypatch.setattr(spirula.engine.jobs.train, "run_training",
                        lambda data, out, cfg, **kw: seen.append(cfg) or {"stopped_early": False, "step": 0})

    def set_device(software: bool) -> None:
        monkeypatch.setattr(spirula.engine.device, "get_gpu", lambda backend=None: SimpleNamespace(software=software))

    return seen, set_device


def test_the_cli_picks_the_software_preset_on_a_software_device(tmp_path, cli_runs, capsys):
    """`spirula train` on software Vulkan: the software preset (2,000 steps at 240 px, the
    studio's "Software device" one), said in one line; what the user set wins; --preset and a
    GPU keep the default. On dfa6aa5: 30,000 steps at 1600 px, no note."""
    from spirula.engine.cli.main import main

    seen, set_device = cli_runs
    out = ["-o", str(tmp_path / "out")]
    set_device(True)
    assert main(["train", str(tmp_path), *out]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "software" in line]
    assert len(notes) == 1 and notes[0].startswith("note: software Vulkan device") and "--preset default" in notes[0]
    assert (seen[-1].train.steps, seen[-1].dataset.max_size, seen[-1].train.init_random_points) == (2_000, 240, 10_000)
    assert "2,000 steps at 240 px, 10,000 random points" in notes[0]
    assert main(["train", str(tmp_path), *out, "--steps", "50", "--max-size", "96"]) == 0
    assert (seen[-1].train.steps, seen[-1].dataset.max_size, seen[-1].train.densify_from) == (50, 96, 100)
    note = [line for line in capsys.readouterr().err.splitlines() if "software" in line]
    assert len(note) == 1 and "50 steps at 96 px, 10,000 random points" in note[0]  # 85b3bc0: 2,000 at 240
    assert main(["train", str(tmp_path), *out, "--preset", "default"]) == 0
    assert (seen[-1].train.steps, seen[-1].dataset.max_size) == (30_000, 1600)
    set_device(False)
    capsys.readouterr()
    assert main(["train", str(tmp_path), *out]) == 0
    assert seen[-1].train.steps == 30_000 and "software" not in capsys.readouterr().err


def test_spirula_run_picks_the_software_preset_too(tmp_path, cli_runs, capsys):
    import argparse

    from spirula.engine.cli.run_command import add_parser, config_from_args

    _, set_device = cli_runs
    set_device(True)
    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    add_parser(sub)
    args = sub._name_parser_map["run"].parse_args([str(tmp_path), "-o", str(tmp_path / "p"), "--appearance", "off"])
    run = config_from_args(args).run
    assert (run.train.steps, run.dataset.max_size) == (2_000, 240)
    assert "note: software Vulkan device" in capsys.readouterr().err


def test_help_names_a_preset_only_where_it_changes_the_default():
    """--help's "(default X; Y with --preset P)": P named only when Y differs from X (on
    85b3bc0 --mcmc-budget read "default 200,000; 200,000 with --preset software")."""
    from spirula.engine.cli.options import _default_text
    from spirula.engine import settings as table
    from spirula.engine.settings import PRESETS

    for s in table.SETTINGS:
        text = _default_text(s, "train")
        for name, over in PRESETS.items():
            if s.name in over:
                assert (f"--preset {name}" in text) == (over[s.name] != s.default), (s.name, text)
