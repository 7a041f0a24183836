"""The staged pipeline (spirula.engine.jobs.pipeline): caching by key, --from, atomic outputs and kept
outputs on failure, run.json, typed messages, clear errors; and a short end-to-end
`spirula run` on a few seconds of the chair video (CPU SfM, software-Vulkan training, the
mesh), a cancel in its mesh stage, and `spirula mesh` on the run's project."""

import json
import os

import numpy as np
import pytest
from spirula.engine import messages as msg
from spirula.engine.jobs import stages
from spirula.engine.cli.main import main
from spirula.engine.errors import SpirulaError
from spirula.engine.jobs.pipeline import PipelineConfig, PipelineError, detect_input, run_pipeline
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
                if "*" in rel:  # a pattern: one file that matches it
                    (ctx.staging / rel.replace("*", "glb")).parent.mkdir(parents=True, exist_ok=True)
                    (ctx.staging / rel.replace("*", "glb")).write_text(f"{name} {len(calls)}")
                    continue
                (ctx.staging / rel).mkdir(parents=True)
                (ctx.staging / rel / "out.txt").write_text(f"{name} {len(calls)}")
            return {"stage": name, "stopped_early": fail.get(name) == "stop"}
        return run

    for name in ("import", "sfm", "undistort", "train", "export", "mesh"):
        monkeypatch.setitem(stages.STAGE_FUNCTIONS, name, fake(name, stages.STAGE_OUTPUTS[name]))
    return calls, fail


def test_stages_are_cached_and_redone_from_a_stage(photo_folder, tmp_path, fake_stages):
    calls, _ = fake_stages
    proj = tmp_path / "proj"
    seen = []
    rec = run_pipeline(photo_folder, proj, emit=seen.append)
    assert calls == ["import", "sfm", "undistort", "train", "export", "mesh"]
    assert [s["status"] for s in rec["stages"]] == ["done"] * 6
    assert (proj / "exports" / "out.txt").is_file() and (proj / "exports" / "mesh.glb").is_file()  # side by side
    assert json.loads((proj / "run.json").read_text())["stages"][1]["summary"]["stage"] == "sfm"
    assert [type(m) for m in seen[:3]] == [msg.StageStarted, msg.StageProgress, msg.StageFinished]
    assert isinstance(seen[-1], msg.Done)
    assert not (proj / ".staging").exists()

    calls.clear()
    rec = run_pipeline(photo_folder, proj)
    assert calls == [] and [s["status"] for s in rec["stages"]] == ["cached"] * 6

    cfg = PipelineConfig()
    cfg.mesh.faces = 1234                      # a mesh setting: the mesh only
    run_pipeline(photo_folder, proj, cfg)
    assert calls == ["mesh"]
    calls.clear()
    cfg.mesh.device = "cuda"                   # where it runs is no part of the key
    run_pipeline(photo_folder, proj, cfg)
    assert calls == []

    cfg.run.train.steps = 123                  # a training setting: train, export and the mesh
    run_pipeline(photo_folder, proj, cfg)
    assert calls == ["train", "export", "mesh"]

    calls.clear()
    run_pipeline(photo_folder, proj, cfg, from_stage="sfm")
    assert calls == ["sfm", "undistort", "train", "export", "mesh"]

    calls.clear()
    cfg.sfm.mapper = "incremental"              # an SfM setting invalidates SfM and everything after it
    run_pipeline(photo_folder, proj, cfg, until_stage="sfm")
    assert calls == ["sfm"]
    calls.clear()
    run_pipeline(photo_folder, proj, cfg)
    assert calls == ["undistort", "train", "export", "mesh"]

    calls.clear()
    os.utime(photo_folder / "p1.jpg", ns=(1, 1))   # the input changed
    run_pipeline(photo_folder, proj, cfg)
    assert calls == ["import", "sfm", "undistort", "train", "export", "mesh"]


def test_no_mesh_stops_after_the_ply_and_keeps_an_earlier_mesh(photo_folder, tmp_path, fake_stages):
    calls, fail = fake_stages
    proj = tmp_path / "proj"
    cfg = PipelineConfig(with_mesh=False)
    rec = run_pipeline(photo_folder, proj, cfg)
    assert calls[-1] == "export" and "mesh" not in calls and [s["name"] for s in rec["stages"]][-1] == "export"
    assert not (proj / "exports" / "mesh.glb").exists()
    with pytest.raises(PipelineError, match="--until mesh: this run has no mesh stage"):
        run_pipeline(photo_folder, proj, cfg, until_stage="mesh")

    calls.clear()
    run_pipeline(photo_folder, proj)            # with the mesh: only it runs
    assert calls == ["mesh"]
    calls.clear()
    rec = run_pipeline(photo_folder, proj, cfg)  # without: the mesh made before and its record stay
    assert calls == [] and rec["stages"][-1]["name"] == "mesh" and (proj / "exports" / "mesh.glb").is_file()


def test_cancel_in_the_mesh_stage_keeps_the_ply_and_the_earlier_mesh(photo_folder, tmp_path, fake_stages):
    calls, fail = fake_stages
    proj = tmp_path / "proj"
    run_pipeline(photo_folder, proj)
    ply, mesh = (proj / "exports" / "out.txt").read_text(), (proj / "exports" / "mesh.glb").read_text()
    fail["mesh"] = KeyboardInterrupt()
    cfg = PipelineConfig()
    cfg.mesh.faces = 99
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(photo_folder, proj, cfg)
    assert (proj / "exports" / "out.txt").read_text() == ply and (proj / "exports" / "mesh.glb").read_text() == mesh
    rec = json.loads((proj / "run.json").read_text())
    assert [s["status"] for s in rec["stages"]][-2:] == ["cached", "cancelled"]
    assert not (proj / ".staging").exists()


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
    assert calls == ["train", "export", "mesh"]


def test_interrupted_training_is_kept_but_redone(photo_folder, tmp_path, fake_stages):
    """A training stopped early keeps its outputs, recorded "partial", and the run stops
    there: no export, no mesh (issue 49; on dfa6aa5 both ran on the partial model). The
    rerun redoes the training and goes on."""
    from spirula.engine.jobs.pipeline import PipelineStopped

    calls, fail = fake_stages
    fail["train"] = "stop"
    with pytest.raises(PipelineStopped) as stopped:
        run_pipeline(photo_folder, tmp_path / "proj")
    assert stopped.value.stage == "train" and stopped.value.summary["stopped_early"]
    assert calls[-1] == "train" and not (tmp_path / "proj" / "exports").exists()
    rec = json.loads((tmp_path / "proj" / "run.json").read_text())
    assert [s["status"] for s in rec["stages"]][-1] == "partial" and rec["error"]["message"] == "stopped"
    assert (tmp_path / "proj" / "train" / "out.txt").is_file()                           # kept
    fail.clear()
    calls.clear()
    run_pipeline(photo_folder, tmp_path / "proj")
    assert calls == ["train", "export", "mesh"]


def test_a_stop_asked_during_a_stage_starts_no_later_stage(photo_folder, tmp_path, fake_stages):
    """should_stop turning true while a stage that cannot stop midway runs (its outputs are
    installed): the next stage does not start."""
    from spirula.engine.jobs.pipeline import PipelineStopped

    calls, fail = fake_stages
    asked = []
    stages_seen = []

    def emit(m):
        if isinstance(m, msg.StageStarted):
            stages_seen.append(m.stage)
            if m.stage == "sfm":
                asked.append(True)  # e.g. SIGTERM arrives during SfM's last, uninterruptible part

    with pytest.raises(PipelineStopped) as stopped:
        run_pipeline(photo_folder, tmp_path / "proj", emit=emit, should_stop=lambda: bool(asked))
    assert stopped.value.stage == "sfm" and calls == ["import", "sfm"] and stages_seen == ["import", "sfm"]
    assert (tmp_path / "proj" / "sfm" / "out.txt").is_file()
    calls.clear()
    run_pipeline(photo_folder, tmp_path / "proj")
    assert calls == ["undistort", "train", "export", "mesh"]


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
            "--steps", "150", "--max-size", "160", "--eval-every", "8",
            "--mesh-faces", "4000", "--mesh-texture-size", "128", "--mesh-resolution", "64"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "registered" in out and "export" in out and "exports/mesh.glb" in out
    rec = json.loads((proj / "run.json").read_text())
    by = {s["name"]: s for s in rec["stages"]}
    assert [s["status"] for s in rec["stages"]] == ["done"] * 7
    assert by["select"]["summary"]["kept"] >= 14
    assert by["sfm"]["summary"]["registered"] >= by["select"]["summary"]["kept"] - 1
    train = by["train"]["summary"]
    assert train["step"] == 150 and train["psnr"] > train["initial_psnr"] + 3, train
    assert (proj / "exports" / "splat.ply").stat().st_size > 1000
    frames = json.loads((proj / "frames" / "frames.json").read_text())
    assert len(frames["kept"]) == by["select"]["summary"]["kept"] and frames["rejected"]
    assert all({"index", "time", "sharpness", "reason"} <= set(r) for r in frames["rejected"])
    from spirula.engine.io.ply import read_ply
    from spirula.engine.ingest.colmap_format import read_model

    model = read_model(proj / "sparse" / "0")
    assert {c.model for c in model.cameras.values()} == {"PINHOLE"}
    assert len(read_ply(proj / "exports" / "splat.ply").means) == by["train"]["summary"]["num_gaussians"]

    # the mesh: exports/ beside the PLY, its report in mesh.json, the settings given
    import trimesh

    mesh = trimesh.load(proj / "exports" / "mesh.glb", force="mesh")
    report = json.loads((proj / "mesh.json").read_text())
    assert 0 < len(mesh.faces) <= 4000 and report["faces"] == by["mesh"]["summary"]["faces"] == len(mesh.faces)
    assert report["config"]["texture_size"] == 128 and report["views"] == by["undistort"]["summary"]["images"]
    assert by["mesh"]["summary"]["files"]["glb"] == os.path.join("exports", "mesh.glb")
    assert report["files"]["glb"] == str(proj / "exports" / "mesh.glb")     # where it lies, not the staging folder
    assert {p.name for p in (proj / "exports").iterdir()} >= {"splat.ply", "mesh.glb", "mesh.obj", "mesh.mtl",
                                                              "mesh.png", "mesh.ply"}

    assert main(args) == 0                                   # everything cached
    rec = json.loads((proj / "run.json").read_text())
    assert [s["status"] for s in rec["stages"]] == ["cached"] * 7

    # a cancel in the mesh stage (other settings) leaves the PLY and the mesh made before as they were
    from spirula.engine.cli.main import build_parser
    from spirula.engine.cli.run_command import config_from_args

    before = {p.name: p.read_bytes() for p in (proj / "exports").iterdir()}
    cfg = config_from_args(build_parser().parse_args(args[:-6] + ["--mesh-faces", "3000", "--mesh-resolution", "48"]))
    seen = []
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(video, proj, cfg, emit=seen.append,
                     should_stop=lambda: any(isinstance(m, msg.StageProgress) and m.stage == "mesh"
                                             and m.detail.startswith("fuse") for m in seen))
    assert {p.name: p.read_bytes() for p in (proj / "exports").iterdir()} == before
    rec = json.loads((proj / "run.json").read_text())
    assert [s["status"] for s in rec["stages"]] == ["cached"] * 6 + ["cancelled"]
    assert not (proj / ".staging").exists()

    # `spirula mesh` takes the run's project as it takes a `spirula train` one
    capsys.readouterr()
    assert main(["mesh", str(proj), "--faces", "2000", "--texture-size", "64", "--resolution", "48"]) == 0
    assert str(proj / "exports" / "mesh.glb") in capsys.readouterr().out
    assert 0 < json.loads((proj / "mesh.json").read_text())["faces"] <= 2000
    assert (proj / "exports" / "splat.ply").read_bytes() == before["splat.ply"]


def test_mesh_of_a_folder_that_is_no_project_names_it(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    assert main(["mesh", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert str(tmp_path / "run") in err and "without a finished training" in err
    assert main(["mesh", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}: neither a `spirula train` project" in err and "`spirula run` project" in err


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
