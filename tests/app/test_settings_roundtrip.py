"""Every setting of the table (spirula/engine/settings.py), set to a value other than its default,
survives each way a setting travels: the command lines of `spirula train`, `run` and
`partition train`; a project's saved settings and the studio's Restart of it; a studio
checkpoint's recorded command and Resume from it; the "All options" editor; the Training
panel. A setting lost (or changed) on any of them fails here, by name."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from spirula.engine import settings as table


def _other_value(s: table.Setting):
    """A valid value of ``s`` other than its default (exact in binary for floats)."""
    if s.type is bool:
        return not s.default
    if s.choices:
        return next(c for c in s.choices if c != s.default)
    if s.type is tuple:
        return (0.25, 0.5, 0.75)
    if s.type is str:
        return "/somewhere/start.ply"
    if s.type is int:
        if s.high is None:  # past the default, and inside the range (face_size's 0 lies below it)
            return max(s.default * 2 + 1, s.low if s.low is not None else 0)
        return int((s.low + s.high) // 2)
    if s.high is not None:
        mid = ((s.low or 0.0) + s.high) / 2
        return mid if mid != s.default else (mid + s.high) / 2
    return s.default * 1.5 + 0.125


VALUES = {s.name: _other_value(s) for s in table.SETTINGS}


def _check(got: dict, where: str, skip: tuple = ()) -> None:
    lost = {k: (v, got.get(k)) for k, v in VALUES.items() if k not in skip and got.get(k) != v}
    assert not lost, f"{where}: settings lost or changed (wanted, got): {lost}"


def test_the_values_differ_from_the_defaults_and_are_valid():
    for s in table.SETTINGS:
        assert VALUES[s.name] != s.default and s.check(VALUES[s.name]) == VALUES[s.name], s.name


def _argv(skip: tuple = ()) -> list[str]:
    from spirula.engine.cli.options import SWITCHES

    out = []
    for s in table.SETTINGS:
        if s.name in skip:
            continue
        v = VALUES[s.name]
        if s.name in SWITCHES:
            out.append(s.option if v else "--no-" + s.option[2:])
        elif s.type is tuple:
            out += [s.option, *(repr(x) for x in v)]
        else:
            out += [s.option, s.text(v)]
    return out


def test_every_setting_through_the_command_lines(tmp_path):
    from spirula.engine.cli.main import build_parser
    from spirula.engine.cli.options import train_config_of_args
    from spirula.engine.cli.partition_command import PARTITION_FIXED
    from spirula.engine.cli.partition_command import run_config as partition_config
    from spirula.engine.cli.run_command import config_from_args
    from spirula.engine.config import settings_of

    parser = build_parser()
    recon = table.RECONSTRUCTION_ONLY  # before SfM only: `spirula run`'s (a dataset's cameras say them)
    args = parser.parse_args(["train", str(tmp_path), "-o", str(tmp_path / "o"), *_argv(recon)])
    _check(settings_of(train_config_of_args(args, "train")), "spirula train", recon)
    args = parser.parse_args(["run", str(tmp_path), "-o", str(tmp_path / "r"), *_argv()])
    _check(settings_of(config_from_args(args).run), "spirula run")
    skip = tuple(PARTITION_FIXED) + recon
    args = parser.parse_args(["partition", "train", str(tmp_path), *_argv(skip)])
    _check(settings_of(partition_config(args)), "spirula partition train", skip)


def _full_config():
    from spirula.engine.config import run_config

    cfg = run_config(VALUES)
    assert {**asdict(cfg.dataset), **asdict(cfg.train)} == VALUES
    return cfg


def test_every_setting_through_a_saved_project_and_restart(tmp_path):
    """train.json's "config" (as spirula/engine/jobs/train.py writes it), read back by the project
    dialog (describe_project) and restarted as the window sends it."""
    from spirula.engine.config import settings_of
    from spirula.engine.fileio import write_json_atomic
    from spirula.engine.studio import protocol as M
    from spirula.engine.studio.projects import describe_project
    from spirula.engine.studio.scenes import run_config

    (tmp_path / "data").mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "splat.ply").write_bytes(b"ply\n")
    write_json_atomic(project / "train.json", {"dataset": str(tmp_path / "data"), "config": asdict(_full_config())})
    info = describe_project(project)
    _check(info.settings, "the saved project")
    _check(settings_of(run_config(M.StartTraining(info.dataset, **info.settings), "vulkan")), "Restart")


def test_every_setting_through_a_studio_checkpoint_and_resume(tmp_path):
    """The command a studio checkpoint records (spirula/engine/studio/scenes.py recorded_command, JSON
    in the checkpoint), read back for Resume (spirula/engine/studio/projects.py command_of_checkpoint)."""
    from spirula.engine.config import settings_of
    from spirula.engine.studio import protocol as M
    from spirula.engine.studio.projects import command_of_checkpoint
    from spirula.engine.studio.scenes import recorded_command, run_config

    cfg = _full_config()
    # what the panel sends: every setting given (a preset's would be overridden by them)
    cmd = recorded_command(M.StartTraining(str(tmp_path), preset="software", **VALUES), cfg, tmp_path)
    stored = json.loads(json.dumps(asdict(cmd)))
    _check(settings_of(run_config(command_of_checkpoint(stored), "vulkan")), "Resume")


def test_every_setting_through_the_all_options_editor_and_the_panel(qapp):
    from spirula.app.settings_editor import SettingsEditor
    from spirula.app.training_panel import TrainingPanel
    from spirula.engine.config import settings_of
    from spirula.engine.studio import protocol as M
    from spirula.engine.studio.scenes import run_config

    editor = SettingsEditor(VALUES)
    _check(editor.values(), "the All options editor")
    assert set(editor.widgets) == set(table.BY_NAME)
    panel = TrainingPanel()
    panel.restore(editor.values())
    _check(settings_of(run_config(M.StartTraining("d", **panel.settings()), "vulkan")), "the Training panel")
    other = TrainingPanel()                       # remembered (spirula/app/remembered.py) and restored
    other.restore(json.loads(json.dumps(panel.values())))
    _check(settings_of(run_config(M.StartTraining("d", **other.settings()), "vulkan")), "the remembered panel")


def test_a_bad_entry_in_the_editor_names_its_setting(qapp):
    from spirula.app.settings_editor import SettingsEditor

    editor = SettingsEditor()
    editor.widgets["lr_means"].setText("fast")
    with pytest.raises(ValueError, match=r"--lr-means\): must be a number"):
        editor.values()
    editor._accept()
    assert "--lr-means" in editor.error.text() and editor.result() == 0
