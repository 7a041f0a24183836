"""Input class: command lines a new user types. Every number is checked by its option's
type before any work (a one-line argparse error, exit code 2, no folder made); --device
cpu is refused with the reason; every option says what it does and no help shows
'(default: None)'; a dataset `spirula run` cannot read fails with the reader's reason."""

from __future__ import annotations

import argparse

import pytest

from spirula.engine.cli.main import build_parser, main
from spirula.engine.errors import CPU_REFUSAL, DeviceError

from .fixtures import ring_dataset

BAD = [
    ("train", ["--steps", "0"]), ("train", ["--steps", "-5"]), ("train", ["--steps", "abc"]),
    ("train", ["--steps", "1.5"]), ("train", ["--max-size", "-1"]), ("train", ["--max-size", "3"]),
    ("train", ["--eval-every", "-1"]), ("train", ["--eval-interval", "-8"]), ("train", ["--seed", "-1"]),
    ("train", ["--init-points", "0"]), ("train", ["--max-gaussians", "0"]), ("train", ["--checkpoint-every", "-2"]),
    ("run", ["--frames", "-2"]), ("run", ["--frames-per-second", "0"]), ("run", ["--frames-per-second", "nan"]),
    ("run", ["--start", "-1"]), ("run", ["--end", "inf"]), ("run", ["--photo-size", "-3"]),
    ("run", ["--frame-size", "-1920"]), ("run", ["--sfm-size", "0"]), ("run", ["--steps", "0"]),
    ("run", ["--max-gaussians", "-10"]),
    ("mesh", ["--faces", "-5"]), ("mesh", ["--voxel", "0"]), ("mesh", ["--voxel", "nan"]), ("mesh", ["--trunc", "-1"]),
    ("mesh", ["--texture-size", "0"]), ("mesh", ["--resolution", "-64"]), ("mesh", ["--max-voxels", "0"]),
    ("mesh", ["--min-support", "0"]), ("mesh", ["--max-size", "-1"]),
    ("mesh", ["--bounds", "0", "0", "0", "nan", "1", "1"]),
]


def _argv(cmd: str, extra: list[str], tmp_path) -> list[str]:
    if cmd == "mesh":
        return ["mesh", str(tmp_path / "project"), *extra]
    return [cmd, str(tmp_path / "data"), "-o", str(tmp_path / "out"), *extra]


@pytest.mark.parametrize("cmd,extra", BAD, ids=[f"{c} {' '.join(e)}" for c, e in BAD])
def test_bad_numbers_are_refused_before_any_work(cmd, extra, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(_argv(cmd, extra, tmp_path))
    err = capsys.readouterr().err
    assert e.value.code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"spirula {cmd}: error: argument {extra[0]}") and "must be" in last, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["train", "d", "-o", "o"], ["run", "d", "-o", "o"], ["mesh", "p"], ["gui"],
                                  ["bench", "raster"], ["bench", "train"]])
def test_device_cpu_is_refused_with_the_reason(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main([*argv, "--device", "cpu"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "cpu backend is not supported" in err and "subgroup" in err and "lavapipe" in err
    assert list(tmp_path.iterdir()) == []


def test_the_cpu_backend_is_refused_before_any_device(monkeypatch):
    import slangpy

    from spirula.engine.device import Gpu

    def no_device(*a, **k):
        raise AssertionError("a cpu device must not be attempted")

    monkeypatch.setattr(slangpy, "Device", no_device)
    with pytest.raises(DeviceError) as e:
        Gpu("cpu")
    assert str(e.value) == CPU_REFUSAL


def _subparsers(parser: argparse.ArgumentParser, path: str = "spirula"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subparsers(sub, f"{path} {name}")


def test_every_option_has_help_and_no_empty_default():
    undocumented, empty_defaults, cpu = [], [], []
    for path, parser in _subparsers(build_parser()):
        text = parser.format_help()
        if "(default: None)" in text or "(default: )" in text:
            empty_defaults.append(path)
        if "cpu" in parser.format_usage().replace("{auto,cpu,cuda}", ""):
            cpu.append(path)
        for a in parser._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not (a.help or "").strip():
                undocumented.append(f"{path} {'/'.join(a.option_strings) or a.dest}")
    assert not undocumented, undocumented
    assert not empty_defaults, empty_defaults
    assert not cpu, cpu  # --sfm-device cpu (pycolmap SIFT on the CPU) is another option


def test_readme_offers_no_cpu_device():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "vulkan|cuda|cpu" not in readme and "--device cpu" not in readme.replace("`--device cpu` is refused", "")


def test_run_on_a_dataset_without_images_gives_the_readers_reason(tmp_path, capsys):
    import shutil

    ring_dataset(tmp_path / "data", 4, points=10)
    shutil.rmtree(tmp_path / "data" / "images")
    rc_train = main(["train", str(tmp_path / "data"), "-o", str(tmp_path / "t")])
    err_train = capsys.readouterr().err.strip().splitlines()[-1]
    rc_run = main(["run", str(tmp_path / "data"), "-o", str(tmp_path / "r")])
    err_run = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc_train == rc_run == 1
    assert "no images folder" in err_train and str(tmp_path / "data" / "images") in err_train
    assert err_run == err_train
    assert not (tmp_path / "t").exists() and not (tmp_path / "r").exists()
