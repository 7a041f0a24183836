"""The staged pipeline (engine.jobs.pipeline): caching by key, --from, atomic outputs and kept
outputs on failure, run.json, typed messages, clear errors; and a short end-to-end
`spirula run` on a few seconds of the chair video (CPU SfM, software-Vulkan training)."""

import json
import os

import numpy as np
import pytest
from engine import messages as msg
from engine.jobs import stages
from engine.cli.main import main
from engine.errors import SpirulaError
from engine.jobs.pipeline import PipelineConfig, PipelineError, detect_input, run_pipeline
from PIL import Image

from tests.ingest.videos import write_video


@pytest.fixture
def photo_folder(tmp_path):
    src = tmp_path / "photos"
    src.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(src / f"p{i}.jpg")
    return src


@pytest.fixture
def fake_stages(monkeypatch):
    """Replace the photo-path stages by fakes that write their outputs and count calls."""
    calls = []
    fail = {}

    def fake(name, outputs):
        def run(ctx):
            calls.append(name)
            ctx.progress(1, 1, "working")
            if fail.get(name) and fail[name] != "stop":
                raise fail[name]
            for rel in outputs:
                (ctx.staging / rel).mkdir(parents=True)
                (ctx.staging / rel / "out.txt").write_text(f"{name} {len(calls)}")
            return {"stage": name, "stopped_early": fail.get(name) == "stop"}
        return run

    for name in ("import", "sfm", "undistort", "train", "export"):
        monkeypatch.setitem(stages.STAGE_FUNCTIONS, name, fake(name, stages.STAGE_OUTPUTS[name]))
    return calls, fail


def test_stages_are_cached_and_redone_from_a_stage(photo_folder, tmp_path, fake_stages):
    calls, _ = fake_stages
    proj = tmp_path / "proj"
    seen = []
    rec = run_pipeline(photo_folder, proj, emit=seen.append)
    assert calls == ["import", "sfm", "undistort", "train", "export"]
    assert [s["status"] for s in rec["stages"]] == ["done"] * 5
    assert json.loads((proj / "run.json").read_text())["stages"][1]["summary"]["stage"] == "sfm"
    assert [type(m) for m in seen[:3]] == [msg.StageStarted, msg.StageProgress, msg.StageFinished]
    assert isinstance(seen[-1], msg.Done)
    assert not (proj / ".staging").exists()

    calls.clear()
    rec = run_pipeline(photo_folder, proj)
    assert calls == [] and [s["status"] for s in rec["stages"]] == ["cached"] * 5

    cfg = PipelineConfig()
    cfg.run.train.steps = 123                  # a training setting: train and export only
    run_pipeline(photo_folder, proj, cfg)
    assert calls == ["train", "export"]

    calls.clear()
    run_pipeline(photo_folder, proj, cfg, from_stage="sfm")
    assert calls == ["sfm", "undistort", "train", "export"]

    calls.clear()
    cfg.sfm.mapper = "incremental"              # an SfM setting invalidates SfM and everything after it
    run_pipeline(photo_folder, proj, cfg, until_stage="sfm")
    assert calls == ["sfm"]
    calls.clear()
    run_pipeline(photo_folder, proj, cfg)
    assert calls == ["undistort", "train", "export"]

    calls.clear()
    os.utime(photo_folder / "p1.jpg", ns=(1, 1))   # the input changed
    run_pipeline(photo_folder, proj, cfg)
    assert calls == ["import", "sfm", "undistort", "train", "export"]


def test_failed_stage_keeps_earlier_outputs_and_records_the_error(photo_folder, tmp_path, fake_stages):
    calls, fail = fake_stages
    proj = tmp_path / "proj"
    run_pipeline(photo_folder, proj)
    before = (proj / "train" / "out.txt").read_text()
    fail["train"] = SpirulaError("bad things in train")
    seen = []
    with pytest.raises(SpirulaError, match="bad things"):
        run_pipeline(photo_folder, proj, from_stage="sfm", emit=seen.append)
    assert (proj / "train" / "out.txt").read_text() == before          # previous train output untouched
    assert (proj / "sfm" / "out.txt").read_text() != ""                 # the stages before it finished
    rec = json.loads((proj / "run.json").read_text())
    assert rec["error"] == {"stage": "train", "message": "bad things in train"}
    assert [s["status"] for s in rec["stages"]] == ["cached", "done", "done", "failed"]
    assert any(isinstance(m, msg.Error) and "bad things" in m.text for m in seen)
    assert not (proj / ".staging").exists()

    fail.clear()
    calls.clear()
    run_pipeline(photo_folder, proj)        # resumes at the failed stage
    assert calls == ["train", "export"]


def test_interrupted_training_is_kept_but_redone(photo_folder, tmp_path, fake_stages):
    calls, fail = fake_stages
    fail["train"] = "stop"
    rec = run_pipeline(photo_folder, tmp_path / "proj")
    assert [s["status"] for s in rec["stages"]][-2:] == ["partial", "done"]    # exported what it had
    fail.clear()
    calls.clear()
    run_pipeline(photo_folder, tmp_path / "proj")
    assert calls == ["train", "export"]


def test_cancel_stops_between_stages(photo_folder, tmp_path, fake_stages):
    calls, fail = fake_stages
    fail["sfm"] = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(photo_folder, tmp_path / "proj")
    rec = json.loads((tmp_path / "proj" / "run.json").read_text())
    assert rec["stages"][-1]["status"] == "cancelled" and (tmp_path / "proj" / "frames").is_dir()


def test_bad_arguments_are_clear_errors(photo_folder, tmp_path):
    with pytest.raises(PipelineError, match="not a stage of a photos run"):
        run_pipeline(photo_folder, tmp_path / "p", from_stage="decode")
    with pytest.raises(PipelineError, match="inside the input folder"):
        run_pipeline(photo_folder, photo_folder / "proj")
    with pytest.raises(PipelineError, match="does not exist"):
        run_pipeline(tmp_path / "nothing.mp4", tmp_path / "p")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PipelineError, match="neither a video file"):
        detect_input(tmp_path / "empty")
    assert detect_input(photo_folder) == "photos"


def test_file_without_video_stream_fails_before_any_output(tmp_path, capsys):
    bad = tmp_path / "notes.mp4"
    bad.write_text("this is not a video")
    rc = main(["run", str(bad), "-o", str(tmp_path / "proj")])
    assert rc == 1
    assert "notes.mp4" in capsys.readouterr().err
    rec = json.loads((tmp_path / "proj" / "run.json").read_text())
    assert rec["error"]["stage"] == "decode" and "notes.mp4" in rec["error"]["message"]
    assert not (tmp_path / "proj" / "decode").exists()


def test_video_without_overlap_fails_in_sfm_and_keeps_the_frames(tmp_path):
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 255, (96, 128, 3), dtype=np.uint8) for _ in range(24)]   # unrelated views
    video = write_video(tmp_path / "noise.mp4", frames)
    proj = tmp_path / "proj"
    cfg = PipelineConfig()
    cfg.frames.target_frames = 6
    with pytest.raises(SpirulaError) as e:
        run_pipeline(video, proj, cfg)
    text = str(e.value)
    assert "noise.mp4" in text and ("overlap" in text or "images could be placed" in text) and "Try:" in text
    assert len(list((proj / "frames").glob("*.jpg"))) == 6
    rec = json.loads((proj / "run.json").read_text())
    assert [s["status"] for s in rec["stages"]] == ["done", "done", "failed"]
    assert not (proj / "sfm").exists()


def test_spirula_run_on_a_few_seconds_of_the_chair_video(shared_data, tmp_path, capsys):
    video = shared_data / "office_chair" / "office_chair.mp4"
    proj = tmp_path / "chair run ü"
    args = ["run", str(video), "-o", str(proj), "--end", "4", "--frames", "16", "--frame-size", "320",
            "--steps", "150", "--max-size", "160", "--eval-every", "8"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "registered" in out and "export" in out
    rec = json.loads((proj / "run.json").read_text())
    by = {s["name"]: s for s in rec["stages"]}
    assert [s["status"] for s in rec["stages"]] == ["done"] * 6
    assert by["select"]["summary"]["kept"] >= 14
    assert by["sfm"]["summary"]["registered"] >= by["select"]["summary"]["kept"] - 1
    train = by["train"]["summary"]
    assert train["step"] == 150 and train["psnr"] > train["initial_psnr"] + 3, train
    assert (proj / "exports" / "splat.ply").stat().st_size > 1000
    frames = json.loads((proj / "frames" / "frames.json").read_text())
    assert len(frames["kept"]) == by["select"]["summary"]["kept"] and frames["rejected"]
    assert all({"index", "time", "sharpness", "reason"} <= set(r) for r in frames["rejected"])
    from engine.io.ply import read_ply
    from engine.ingest.colmap_format import read_model

    model = read_model(proj / "sparse" / "0")
    assert {c.model for c in model.cameras.values()} == {"PINHOLE"}
    assert len(read_ply(proj / "exports" / "splat.ply").means) == by["train"]["summary"]["num_gaussians"]

    assert main(args) == 0                                   # everything cached
    rec = json.loads((proj / "run.json").read_text())
    assert [s["status"] for s in rec["stages"]] == ["cached"] * 6


def test_rotated_10bit_video_gives_upright_frames_and_a_warning(tmp_path):
    from tests.ingest.videos import textured

    frames = []
    for i in range(20):
        img = textured(64, 96, seed=i)
        img[:16, :24] = 255                       # marker in the stored top-left corner
        frames.append(img)
    video = write_video(tmp_path / "deep.mkv", frames, codec="ffv1", pix_fmt="yuv420p10le", rotation=-90)
    seen = []
    cfg = PipelineConfig()
    cfg.frames.target_frames = 5
    rec = run_pipeline(video, tmp_path / "proj", cfg, emit=seen.append, until_stage="select")
    assert [s["name"] for s in rec["stages"]] == ["decode", "select"]
    assert any(isinstance(m, msg.Warning) and "10-bit" in m.text and "deep.mkv" in m.text for m in seen)
    meta = json.loads((tmp_path / "proj" / "frames" / "frames.json").read_text())
    assert len(meta["frames"]) == 5 and meta["sizes"]["video"] == [64, 96]   # portrait after the rotation
    img = np.asarray(Image.open(tmp_path / "proj" / "frames" / meta["frames"][0]), np.float32)
    assert img[:24, -16:].mean() > 240                                    # marker now top-right (turned clockwise)
    assert {"kept", "rejected", "selection"} <= set(meta) and len(meta["rejected"]) == 15


def test_input_kinds_of_the_shared_captures(shared_data):
    assert detect_input(shared_data / "office_chair" / "office_chair.mp4") == "video"
    assert detect_input(shared_data / "mouse" / "images") == "photos"
    assert detect_input(shared_data / "mouse") == "dataset"          # has sparse/0 beside images/
    assert detect_input(shared_data / "fox" / "transforms.json") == "dataset"
