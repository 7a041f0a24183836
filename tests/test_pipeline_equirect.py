"""A 360-degree (equirectangular) video through `spirula run` (issue 51): SfM on the frames'
cube faces as one rig per frame (spirula/engine/sfm/equirect.py), the frames' model with one
EQUIRECTANGULAR camera, training on the faces; and the faces' pose check on its own."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spirula.engine.ingest.faces import FACE_NAMES, FACE_ROTATIONS
from spirula.engine.sfm.equirect import frame_poses
from tests.ingest.synth import random_pose


def _room_video(path, frames: int, width: int):
    """An equirectangular video of mesh_gt's room (a few of its solids) from a camera moving
    through it, rendered by the independent ray caster."""
    from benchmarks.mesh_gt.raycast import WideCamera, look_at, render
    from benchmarks.mesh_gt.scenes import get_scene
    from tests.ingest.videos import write_video

    parts = [p for p in get_scene("e").parts
             if p.name in ("walls", "floor", "sofa_seat", "sofa_back", "cabinet", "lamp", "table_top")]
    shapes, textures = [p.shape for p in parts], [p.texture for p in parts]
    images = []
    for i in range(frames):
        s = i / (frames - 1)
        eye = np.array([-0.5 + 1.0 * s, -0.3 + 0.4 * s, 1.3 + 0.1 * np.sin(3 * s)])
        cam = WideCamera(look_at(eye, eye + [1.0, 0.2 * s, 0.0]), "equirect", width, width // 2)
        images.append((np.clip(render(shapes, textures, cam, 1)[0], 0, 1) * 255 + 0.5).astype(np.uint8))
    return write_video(path, images)


def test_spirula_run_on_an_equirectangular_video(tmp_path, capsys):
    from spirula.engine.cli.main import main
    from spirula.engine.ingest.colmap_format import read_model

    video = _room_video(tmp_path / "room360.mp4", 6, 512)
    proj = tmp_path / "proj"
    args = ["run", str(video), "-o", str(proj), "--frames", "6", "--frame-size", "512", "--steps", "60",
            "--max-size", "96", "--eval-every", "3", "--no-mesh"]
    assert main(args) == 0
    seen = capsys.readouterr()
    assert "taken as 360-degree equirectangular" in seen.out + seen.err
    rec = json.loads((proj / "run.json").read_text())
    by = {s["name"]: s for s in rec["stages"]}
    kept = by["select"]["summary"]["kept"]
    assert f"dataset: {6 * kept} face images of {kept} wide images" in seen.out + seen.err
    sfm = by["sfm"]["summary"]
    # every selected frame registers, with all six of its faces (one rig frame each)
    assert sfm["equirect"]["frames"] == kept and sfm["images"] == 6 * kept
    assert sfm["registered"] == 6 * kept, sfm
    und = by["undistort"]["summary"]
    assert und["frames"] == kept and und["max_face_disagreement_deg"] < 0.1
    model = read_model(proj / "sparse" / "0")
    assert [c.model for c in model.cameras.values()] == ["EQUIRECTANGULAR"]
    assert len(model.images) == kept and len(list((proj / "images").iterdir())) == kept
    train = by["train"]["summary"]
    assert train["step"] == 60 and train["psnr"] > train["initial_psnr"] + 1, train
    assert (proj / "exports" / "splat.ply").stat().st_size > 1000


def test_frame_poses_recover_the_frame_and_measure_disagreement():
    rng = np.random.default_rng(9)
    truth = {f"f{k}": random_pose(rng) for k in range(3)}
    faces = {name: {f: np.vstack([FACE_ROTATIONS[f] @ w2c[:3, :4], [0, 0, 0, 1]]) for f in FACE_NAMES}
             for name, w2c in truth.items()}
    poses, spread = frame_poses(faces)
    for name, w2c in truth.items():
        np.testing.assert_allclose(poses[name], w2c, atol=1e-12)
    assert max(a for _, a, _ in spread) < 1e-6 and max(d for _, _, d in spread) < 1e-9
    # one face turned 6 degrees about its axis: the frame's spread says so
    c, s = np.cos(np.radians(6)), np.sin(np.radians(6))
    turn = np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    faces["f1"]["left"] = turn @ faces["f1"]["left"]
    _, spread = frame_poses(faces)
    worst = {n: a for n, a, _ in spread}
    assert worst["f0"] < 1e-6 and 4.0 < worst["f1"] < 6.0


def test_a_fisheye_sfm_model_is_kept_for_the_faces(tmp_path):
    # `spirula run --camera-model OPENCV_FISHEYE`: the undistort stage keeps the frames and the
    # distorted model, so the training splits them into faces; --wide-lens crop undistorts
    from spirula.engine.ingest import load_dataset
    from spirula.engine.jobs.pipeline import PipelineConfig
    from spirula.engine.jobs.stages import StageContext, stage_undistort
    from tests.ingest.synth import write_image

    rng = np.random.default_rng(13)
    proj = tmp_path / "proj"
    f = 80 / (np.pi / 2)
    pycolmap = pytest.importorskip("pycolmap")
    rec = pycolmap.Reconstruction()   # what the SfM stage leaves: a model with a fisheye camera
    rec.add_camera_with_trivial_rig(pycolmap.Camera(camera_id=1, model="OPENCV_FISHEYE", width=160, height=160,
                                                    params=[f, f, 80.0, 80.0, 0.01, 0.0, 0.0, 0.0]))
    for i in range(3):
        w2c = random_pose(rng)
        rec.add_image_with_trivial_frame(pycolmap.Image(image_id=i + 1, camera_id=1, name=f"frame_{i:03d}.jpg"),
                                         pycolmap.Rigid3d(pycolmap.Rotation3d(w2c[:3, :3]), w2c[:3, 3]))
    (proj / "sfm" / "sparse" / "0").mkdir(parents=True)
    rec.write(proj / "sfm" / "sparse" / "0")
    for i in range(4):  # the fourth frame did not register
        write_image(proj / "frames" / f"frame_{i:03d}.jpg", 160, 160, rng)
    staging = tmp_path / "staging"
    staging.mkdir()
    ctx = StageContext("undistort", "video", tmp_path / "v.mp4", proj, staging, PipelineConfig(), lambda m: None,
                       lambda: False)
    summary = stage_undistort(ctx)
    assert summary["wide"] and summary["images"] == 3
    assert sorted(p.name for p in (staging / "images").iterdir()) == [f"frame_{i:03d}.jpg" for i in range(3)]
    ds = load_dataset(staging, 0, face_size=32)
    assert {c.source for c in ds.cameras} == {f"frame_{i:03d}.jpg" for i in range(3)} and len(ds.cameras) == 15
    cfg = PipelineConfig()
    cfg.run.dataset.wide_lens = "crop"
    assert cfg.stage_settings("undistort") == {"wide_lens": "crop"} and PipelineConfig().stage_settings("undistort") == {}


def test_crop_mode_refuses_a_360_video_before_sfm(tmp_path, capsys):
    """--wide-lens crop cannot train a 360-degree capture: `spirula run` says so at the SfM
    stage, in one line naming the video, before any feature is extracted (it failed only at
    the training before)."""
    from spirula.engine.cli.main import main

    video = _room_video(tmp_path / "room360.mp4", 3, 256)
    proj = tmp_path / "proj"
    code = main(["run", str(video), "-o", str(proj), "--frames", "3", "--frame-size", "256", "--steps", "20",
                 "--max-size", "64", "--no-mesh", "--wide-lens", "crop"])
    err = capsys.readouterr().err
    assert code != 0
    assert "room360.mp4" in err and "--wide-lens faces" in err and "360-degree" in err, err
    assert not (proj / "cache" / "sfm").exists() or not any((proj / "cache" / "sfm").rglob("*.db")), \
        "features were extracted"
    assert not (proj / "sparse").exists()


def _sfm_stage(tmp_path, size, projection, monkeypatch):
    """The SfM stage on 3 frames of ``size`` with --projection ``projection``, pycolmap's run
    replaced by a stand-in recording what it was given: (the run's arguments, the notes)."""
    from PIL import Image

    import spirula.engine.sfm as sfm
    from spirula.engine import messages as msg
    from spirula.engine.jobs.pipeline import PipelineConfig
    from spirula.engine.jobs.stages import StageContext, stage_sfm

    rng = np.random.default_rng(51)
    proj = tmp_path / f"proj_{projection}_{size[0]}"
    (proj / "frames").mkdir(parents=True)
    names = [f"frame_{i:03d}.jpg" for i in range(3)]
    for n in names:
        Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(proj / "frames" / n)
    (proj / "frames" / "frames.json").write_text(json.dumps(
        {"kind": "video", "frames": names, "groups": {"1": names}, "sizes": {"1": list(size)}}))
    calls = []

    def fake_run_sfm(image_dir, names, groups, sizes, kind, out, cfg, **kw):
        calls.append({"names": list(names), "camera_model": cfg.camera_model, "rig": kw.get("rig") is not None})
        return {"registered": len(names), "images": len(names)}

    monkeypatch.setattr(sfm, "run_sfm", fake_run_sfm)
    cfg = PipelineConfig()
    cfg.run.dataset.projection = projection
    staging = proj / "staging"
    staging.mkdir()
    seen = []
    ctx = StageContext("sfm", "video", tmp_path / "clip.mp4", proj, staging, cfg, seen.append, lambda: False)
    stage_sfm(ctx)
    notes = [m.detail for m in seen if isinstance(m, msg.StageProgress) and m.detail.startswith("note: ")]
    return calls, notes


def test_projection_decides_whether_2to1_frames_are_360(tmp_path, monkeypatch):
    """--projection (issue 51): auto takes 2:1 frames for 360 and says so, naming the option
    that turns it off; perspective runs the ordinary SfM on the frames themselves; equirect
    refuses frames that are not 2:1 before any SfM. Only a set value enters the SfM stage's key."""
    from spirula.engine.errors import SpirulaError
    from spirula.engine.jobs.pipeline import PipelineConfig

    calls, notes = _sfm_stage(tmp_path, (128, 64), "auto", monkeypatch)
    assert len(calls) == 1 and calls[0]["rig"] and len(calls[0]["names"]) == 18   # 3 frames x 6 faces
    assert calls[0]["camera_model"] == "PINHOLE" and calls[0]["names"][0].startswith("front/")
    assert len(notes) == 1 and "360-degree" in notes[0] and "--projection perspective" in notes[0], notes
    calls, notes = _sfm_stage(tmp_path, (128, 64), "perspective", monkeypatch)
    assert calls == [{"names": [f"frame_{i:03d}.jpg" for i in range(3)], "camera_model": "auto", "rig": False}]
    assert not any("360" in n for n in notes)
    calls, notes = _sfm_stage(tmp_path, (128, 64), "equirect", monkeypatch)
    assert calls[0]["rig"] and "--projection perspective" not in notes[0]
    calls, _ = _sfm_stage(tmp_path, (96, 64), "auto", monkeypatch)   # not 2:1: perspective
    assert not calls[0]["rig"]
    with pytest.raises(SpirulaError, match=r"clip\.mp4.*--projection equirect needs .*not 96x64"):
        _sfm_stage(tmp_path, (96, 64), "equirect", monkeypatch)
    cfg = PipelineConfig()
    assert "projection" not in cfg.stage_settings("sfm") and "projection" not in cfg.stage_settings("train")["dataset"]
    cfg.run.dataset.projection = "perspective"
    assert cfg.stage_settings("sfm")["projection"] == "perspective"


def test_projection_is_an_option_of_spirula_run_only(capsys):
    """A dataset's cameras say their projection: `spirula train` has no --projection."""
    from spirula.engine.cli.main import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--projection {auto,equirect,perspective}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--projection" not in capsys.readouterr().out


def test_the_360_notes_name_a_frame_sfm_dropped_and_the_faces_as_trained(tmp_path, monkeypatch):
    """The notes a fresh user reads (issue 51): a selected frame SfM did not register is
    named (a warning and the stage's summary line), and the training's faces are given at
    the size they train at, faces of one size together, on one line."""
    from PIL import Image

    import spirula.engine.sfm.equirect as eq
    from spirula.engine import messages as msg
    from spirula.engine.cli.run_command import _short
    from spirula.engine.ingest.load import undistortion_notes
    from spirula.engine.jobs.pipeline import PipelineConfig
    from spirula.engine.jobs.stages import StageContext, stage_undistort

    proj = tmp_path / "proj"
    (proj / "frames").mkdir(parents=True)
    names = [f"frame_{i:03d}.jpg" for i in range(3)]
    for n in names:
        Image.new("RGB", (128, 64)).save(proj / "frames" / n)
    (proj / "frames" / "frames.json").write_text(json.dumps({"kind": "video", "frames": names}))
    (proj / "sfm" / "sparse" / "0").mkdir(parents=True)
    (proj / "sfm" / "summary.json").write_text(json.dumps({"equirect": {"frame_size": [128, 64], "face_size": 41}}))

    def fake_model(model_dir, out_dir, frame_size):  # SfM registered the first and the last frame
        out_dir.mkdir(parents=True)
        (out_dir / "images.txt").write_text("".join(f"{k + 1} 1 0 0 0 0 0 0 1 {n}\n\n"
                                                    for k, n in enumerate([names[0], names[2]])))
        return {"frames": 2, "faces_registered": 12, "points": 0, "max_face_disagreement_deg": 0.0, "warnings": []}

    monkeypatch.setattr(eq, "write_equirect_model", fake_model)
    staging = tmp_path / "staging"
    staging.mkdir()
    seen = []
    ctx = StageContext("undistort", "video", tmp_path / "clip.mp4", proj, staging, PipelineConfig(), seen.append,
                       lambda: False)
    summary = stage_undistort(ctx)
    warns = [m.text for m in seen if isinstance(m, msg.Warning)]
    assert len(warns) == 1 and "1 of 3 frames not registered" in warns[0] and "frame_001.jpg" in warns[0], warns
    assert summary["frames_dropped"] == ["frame_001.jpg"] and sorted(p.name for p in (staging / "images").iterdir()) \
        == [names[0], names[2]]
    line = _short("undistort", summary)
    assert line.startswith("2 of 3 360-degree frames registered (12 cube faces), not frame_001.jpg"), line
    faces = [{"face": f, "width": w, "height": w, "trained": [min(w, 64)] * 2}
             for f, w in (("front", 60), ("right", 60), ("back", 60), ("left", 60), ("up", 71), ("down", 71))]
    notes = undistortion_notes([{"camera": "EQUIRECTANGULAR 256x128", "images": 4, "max_size": 64, "faces": faces}])
    assert notes == ["training on 4 images of EQUIRECTANGULAR 256x128 as 6 pinhole faces each: front, right, back, "
                     "left 60x60 px; up, down 64x64 px (from 71x71) (90-degree cube faces cropped to the lens "
                     "footprint, scaled to --max-size 64)"]


def test_projection_equirect_on_a_video_not_2to1_is_refused_before_decoding(tmp_path):
    """The video's header already shows its size: refused in the decode stage, before any frame
    is decoded or selected (it used to come at SfM, after both)."""
    from spirula.engine.errors import SpirulaError
    from spirula.engine.jobs.pipeline import PipelineConfig, run_pipeline
    from tests.ingest.videos import write_video

    rng = np.random.default_rng(6)
    video = write_video(tmp_path / "flat.mp4", [rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(4)])
    cfg = PipelineConfig()
    cfg.run.dataset.projection = "equirect"
    with pytest.raises(SpirulaError, match=r"flat\.mp4.*--projection equirect needs frames of one 2:1 size.*64x48"):
        run_pipeline(video, tmp_path / "proj", cfg)
    rec = json.loads((tmp_path / "proj" / "run.json").read_text())
    assert rec["error"]["stage"] == "decode" and [s["status"] for s in rec["stages"]] == ["failed"]
    assert not (tmp_path / "proj" / "decode").exists() and not (tmp_path / "proj" / "frames").exists()
