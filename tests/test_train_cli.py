"""End to end on real data (book): `spirula train` improves held-out PSNR, writes a PLY
that reads back, metrics.json, eval PNGs; Ctrl-C still writes the PLY; bad input errors."""

import json

import numpy as np
import pytest
from spirula.engine.cli.main import main
from spirula.engine.io.ply import read_ply


def test_train_book_improves_heldout_psnr(shared_data, tmp_path, monkeypatch):
    out = tmp_path / "proj dir ü"  # spaces and non-ASCII on purpose
    monkeypatch.setenv("SPIRULA_EVAL_GEOMETRY", "1")  # the held-out depth-normal measure, without the phase
    rc = main(["train", str(shared_data / "book"), "-o", str(out), "--steps", "200", "--max-size", "120"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    # 200 steps at 120 px on software Vulkan: the first render (SfM points) is ~8 dB; training
    # must add at least 5 dB on the held-out view (observed 8.2 dB at 120 px, as at 160 and 240 px:
    # 8.2 and 8.1; 699 Gaussians at each size; 12.8 CPU-s here, 21.7 at 240 px)
    assert metrics["psnr"] - metrics["initial_psnr"] >= 5.0, metrics
    assert metrics["step"] == 200 and not metrics["stopped_early"]
    # trained without the geometry phase, depth and normals disagree somewhat (1 - cos in (0, 2))
    assert 0.005 < metrics["normal_consistency"] < 1.0, metrics["normal_consistency"]
    # and some of the held-out view's surface agrees with its nearest training view's within 1 px
    assert 0.0 < metrics["multiview_consistency"] < 1.0, metrics["multiview_consistency"]
    g = read_ply(out / "splat.ply")
    assert len(g.means) == metrics["num_gaussians"] > 600
    assert g.shN.shape[1:] == (15, 3)
    assert np.isfinite(g.means).all()
    assert (out / "eval" / "frame_0000.render.png").is_file() and (out / "eval" / "frame_0000.gt.png").is_file()
    train = json.loads((out / "train.json").read_text())
    losses = [h["loss"] for h in train["history"]]
    assert losses[-1] < 0.8 * losses[0]


def test_interrupt_still_writes_ply(shared_data, tmp_path):
    from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
    from spirula.engine.jobs.train import run_training

    def interrupt(progress):
        if progress.step >= 25:
            raise KeyboardInterrupt

    cfg = RunConfig(dataset=DatasetConfig(max_size=160), train=TrainConfig(steps=1000, log_interval=25))
    m = run_training(shared_data / "book", tmp_path, cfg, on_progress=interrupt)
    # step 25's loss is read back when step 26 retires the step before it (a step late)
    assert m["stopped_early"] and m["step"] == 26
    assert len(read_ply(tmp_path / "splat.ply").means) == m["num_gaussians"]


def test_missing_dataset_is_a_clear_error(tmp_path, capsys):
    rc = main(["train", str(tmp_path / "nope"), "-o", str(tmp_path / "out")])
    assert rc == 1
    err = capsys.readouterr().err
    assert "nope" in err
    assert not (tmp_path / "out").exists()  # the dataset is checked before the output folder is made


def test_unwritable_output_is_refused_before_work(shared_data, tmp_path, capsys):
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    rc = main(["train", str(shared_data / "book"), "-o", str(blocker / "out")])
    err = capsys.readouterr().err
    assert rc == 1 and "cannot create the output folder" in err and "a file" in err


def test_antialias_flag_reaches_the_training_config(tmp_path, monkeypatch):
    """--antialias of `spirula train` and `spirula run` sets TrainConfig.antialias (off without it)."""
    import argparse

    import spirula.engine.jobs.train
    from spirula.engine.cli.run_command import add_parser, config_from_args

    seen = []
    monkeypatch.setattr(spirula.engine.jobs.train, "run_training",
                        lambda data, out, cfg, **kw: seen.append(cfg) or {"stopped_early": False, "step": 0})
    for flags in ([], ["--antialias"]):
        assert main(["train", str(tmp_path), "-o", str(tmp_path / "out"), *flags]) == 0
        sub = argparse.ArgumentParser().add_subparsers(dest="command")
        add_parser(sub)
        args = sub._name_parser_map["run"].parse_args([str(tmp_path), "-o", str(tmp_path / "run"), "--appearance", "off", *flags])
        assert config_from_args(args).run.train.antialias is bool(flags)
    assert [c.train.antialias for c in seen] == [False, True]


def test_geometry_options_reach_the_training_config(tmp_path, monkeypatch, capsys):
    """--geometry-from, --lambda-normal, --lambda-flat, --geometry-alpha-grad, --lambda-multiview and --lambda-mvrgb of `spirula train` and `spirula run` set
    TrainConfig's fields (TrainConfig's defaults without them); out-of-range values are refused."""
    import argparse

    import spirula.engine.jobs.train
    from spirula.engine.cli.run_command import add_parser, config_from_args
    from spirula.engine.config import TrainConfig

    seen = []
    monkeypatch.setattr(spirula.engine.jobs.train, "run_training",
                        lambda data, out, cfg, **kw: seen.append(cfg) or {"stopped_early": False, "step": 0})
    given = ["--geometry", "--geometry-from", "0.5", "--lambda-normal", "0.03", "--lambda-flat", "10",
             "--geometry-alpha-grad", "on", "--lambda-multiview", "0.04", "--lambda-mvrgb", "0.2"]
    defaults = (TrainConfig.geometry_from, TrainConfig.lambda_normal, TrainConfig.lambda_flat, TrainConfig.geometry_alpha_grad,
                TrainConfig.lambda_multiview, TrainConfig.lambda_mvrgb)
    want = [(False, *defaults), (True, 0.5, 0.03, 10.0, True, 0.04, 0.2), (False, *defaults)]
    for flags, expected in zip(([], given, ["--no-geometry"]), want):  # train: off unless asked, as run's flags
        assert main(["train", str(tmp_path), "-o", str(tmp_path / "out"), *flags]) == 0
    assert [(c.train.geometry, c.train.geometry_from, c.train.lambda_normal, c.train.lambda_flat,
             c.train.geometry_alpha_grad, c.train.lambda_multiview, c.train.lambda_mvrgb) for c in seen] == want
    # spirula run: on by default, since its mesh stage follows; off with --no-mesh or --no-geometry
    for flags, expected in (([], (True, *defaults)), (given, want[1]), (["--no-mesh"], (False, *defaults)),
                            (["--until", "export"], (False, *defaults)), (["--until", "mesh"], (True, *defaults)),
                            (["--no-geometry"], (False, *defaults)), (["--no-mesh", *given], want[1])):
        sub = argparse.ArgumentParser().add_subparsers(dest="command")
        add_parser(sub)
        args = sub._name_parser_map["run"].parse_args([str(tmp_path), "-o", str(tmp_path / "run"), "--appearance", "off", *flags])
        t = config_from_args(args).run.train
        assert (t.geometry, t.geometry_from, t.lambda_normal, t.lambda_flat, t.geometry_alpha_grad,
                t.lambda_multiview, t.lambda_mvrgb) == expected, flags
    for flags, why in ((["--no-geometry"], "(--no-geometry)"), (["--no-mesh"], "(no mesh stage follows)"),
                       (["--until", "export"], "(no mesh stage follows)")):
        args = sub._name_parser_map["run"].parse_args([str(tmp_path), "-o", str(tmp_path / "run"), "--appearance", "off",
                                                       *flags, "--lambda-normal", "0.1"])
        with pytest.raises(SystemExit) as e:
            config_from_args(args)
        assert e.value.code == 2 and why in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # one or the other
        sub._name_parser_map["run"].parse_args([str(tmp_path), "-o", str(tmp_path / "run"), "--geometry", "--no-geometry"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    for bad in (["--geometry", "--geometry-from", "1"], ["--geometry", "--lambda-flat", "-1"],
                ["--geometry", "--lambda-normal", "nan"], ["--lambda-normal", "0.02"],
                ["--geometry", "--geometry-alpha-grad", "no"], ["--geometry-alpha-grad", "off"],
                ["--geometry", "--no-geometry"], ["--no-geometry", "--lambda-flat", "1"],
                ["--geometry", "--lambda-multiview", "-0.1"], ["--lambda-multiview", "0.03"],
                ["--geometry", "--lambda-mvrgb", "-0.1"], ["--lambda-mvrgb", "0.2"]):
        with pytest.raises(SystemExit) as e:
            main(["train", str(tmp_path), "-o", str(tmp_path / "out"), *bad])
        assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--geometry-from: must be in [0, 1)" in err
    assert ("spirula train: error: --lambda-normal needs the geometry phase, which is off (off by default in "
            "spirula train): add --geometry") in err
    assert "--geometry-alpha-grad: must be on or off, not 'no'" in err
    assert "--geometry-alpha-grad needs the geometry phase" in err
    assert "argument --no-geometry: not allowed with argument --geometry" in err
    assert "--lambda-flat needs the geometry phase, which is off (--no-geometry)" in err
    assert "--lambda-multiview needs the geometry phase" in err
    assert "--lambda-mvrgb needs the geometry phase" in err
    assert len(seen) == 3  # no refused command trained


def test_an_unexpected_failure_is_one_clear_line(tmp_path, monkeypatch, capsys):
    """A bug inside a command (not a SpirulaError) ends it with exit code 1 and one line that
    names the command and the error; `spirula -v` raises it with its traceback."""
    import spirula.engine.jobs.train

    def broken(*a, **kw):
        raise ValueError("attempt to get argmax of an empty sequence")

    monkeypatch.setattr(spirula.engine.jobs.train, "run_training", broken)
    assert main(["train", str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "error: spirula train failed unexpectedly: ValueError: attempt to get argmax" in err
    assert "Traceback" not in err
    with pytest.raises(ValueError):
        main(["-v", "train", str(tmp_path), "-o", str(tmp_path / "out")])
