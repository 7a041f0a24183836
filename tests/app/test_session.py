"""The engine thread without Qt: training with pause / resume / stop, the viewport frames
(readback), ground-truth and error views, PLY export and viewing, screenshots, errors."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from PIL import Image

from spirula.engine.studio import protocol as M
from spirula.engine.io.ply import read_ply
from spirula.engine.studio.session import Session
from spirula.engine.studio.viewer import BG_BOTTOM, BG_TOP
from ..patience import patient


class Driver:
    def __init__(self, session: Session):
        self.s = session
        self.seen: list = []
        self.backlog: list = []  # polled, not yet looked at (a wait returns at its match)
        self.tag = 0

    def wait(self, pred, timeout: float = 120.0, what: str = ""):
        t_end = time.perf_counter() + patient(timeout)
        while time.perf_counter() < t_end:
            self.backlog += self.s.poll()
            while self.backlog:
                m = self.backlog.pop(0)
                self.seen.append(m)
                if isinstance(m, M.Error) and not what.startswith("error"):
                    raise AssertionError(f"engine error while waiting for {what}: {m.text}")
                if pred(m):
                    return m
            time.sleep(0.005)
        raise AssertionError(f"timed out waiting for {what or pred}")

    def frame(self, timeout: float = 60.0) -> np.ndarray:
        """The first frame rendered after every command sent so far."""
        self.tag += 1
        self.s.send(M.RequestFrame(readback=True, tag=self.tag))
        t_end = time.perf_counter() + patient(timeout)
        while time.perf_counter() < t_end:
            f = self.s.preview.take()
            if f is not None and f.tag == self.tag:
                self.last_preview = f
                return np.frombuffer(f.data, np.uint8).reshape(f.height, f.width, 4)[..., 2::-1]
            time.sleep(0.005)
        raise AssertionError("no frame")


def _background(h: int) -> np.ndarray:
    t = (np.arange(h) + 0.5) / h
    return ((np.outer(1 - t, BG_TOP) + np.outer(t, BG_BOTTOM)) * 255 + 0.5).astype(np.uint8)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    s = Session(projects=tmp_path_factory.mktemp("projects")).start()
    d = Driver(s)
    ready = d.wait(lambda m: isinstance(m, M.EngineReady), 300, "EngineReady")
    assert ready.adapter
    s.send(M.ResizeViewport(96, 72))
    yield d
    assert s.close(save=False, timeout=patient(120))


def test_train_pause_resume_finish(driver, tiny_dataset, tmp_path):
    s = driver.s
    s.send(M.StartTraining(str(tiny_dataset), project=str(tmp_path / "proj"), steps=40, max_size=64,
                           eval_every=5, eval_interval=20, init_random_points=400, max_gaussians=450, adam_moments="bf16",
                           appearance="affine"))
    scene = driver.wait(lambda m: isinstance(m, M.SceneLoaded), 120, "SceneLoaded")
    assert scene.kind == "dataset" and len(scene.cameras) == 10
    assert {c.split for c in scene.cameras} == {"train", "test"} and scene.cameras[0].thumbnail
    c2w = np.array(scene.cameras[1].c2w).reshape(4, 4)
    s.send(M.SetView(tuple(np.linalg.inv(c2w).reshape(-1)), 60.0, None))
    img = driver.frame()
    assert img.shape == (72, 96, 3)
    assert np.abs(img.astype(int) - _background(72)[:, None, :]).max() > 30  # splats or frustums drawn
    driver.wait(lambda m: isinstance(m, M.TrainMetrics), 120, "first metrics")
    s.send(M.Pause())
    paused = driver.wait(lambda m: isinstance(m, M.JobState) and m.state == "paused", 60, "paused")
    step = int(paused.detail.split()[-1])
    time.sleep(0.5)
    s.send(M.RequestFrame())
    time.sleep(0.3)
    assert not any(isinstance(m, M.TrainMetrics) and m.step > step and np.isfinite(m.loss) for m in s.poll())
    s.send(M.Resume())
    done = driver.wait(lambda m: isinstance(m, M.Done), 300, "Done")
    assert done.result["step"] == 40 and not done.result["stopped_early"]
    g = read_ply(done.result["ply"])
    assert len(g.means) == done.result["num_gaussians"] > 0
    train = json.loads((tmp_path / "proj" / "train.json").read_text())["config"]["train"]
    assert (train["max_gaussians"], train["adam_moments"]) == (450, "bf16")  # the studio's settings reached the run
    metrics = json.loads((tmp_path / "proj" / "metrics.json").read_text())
    assert metrics["psnr"] is not None and [e["step"] for e in metrics["evaluations"]] == [20, 40]
    # one writer of metrics.json (spirula/engine/jobs/train.py write_results): the keys of `spirula train`'s
    assert {"initial_psnr", "normal_consistency", "views", "held_out", "sec_per_1k_steps", "resumed_from_step",
            "antialias"} <= set(metrics) and metrics["initial_psnr"] < metrics["psnr"]
    assert len(metrics["held_out"]) == 2 and (tmp_path / "proj" / "eval").is_dir()
    assert metrics["appearance"] == train["appearance"] == "affine" and (tmp_path / "proj" / "appearance.json").is_file()
    psnrs = [m for m in driver.seen if isinstance(m, M.TrainMetrics) and m.psnr is not None]
    assert len(psnrs) == 2


def test_views_ground_truth_error_and_screenshot(driver, tiny_dataset, tmp_path):
    s = driver.s
    s.send(M.SetView(tuple(np.eye(4).reshape(-1)), 50.0, 2))
    s.send(M.SetViewMode("splats"))
    splats = driver.frame()
    s.send(M.SetViewMode("gt"))
    gt = driver.frame()
    assert driver.last_preview.w2c == () == driver.last_preview.intrinsics  # no free camera to reproject
    s.send(M.SetViewMode("error"))
    err = driver.frame()
    assert not np.array_equal(splats, gt) and not np.array_equal(gt, err)
    # camera 2 is 64 x 48 in a 96 x 72 viewport: the ground truth fills it exactly (x 1.5)
    ref = np.asarray(Image.open(sorted((tiny_dataset / "images").iterdir())[2]).convert("RGB"))
    up = np.asarray(Image.fromarray(ref).resize((96, 72), Image.BILINEAR)).astype(int)
    assert np.abs(gt.astype(int) - up).mean() < 12
    s.send(M.SetViewMode("splats"))
    shot = tmp_path / "shot.png"
    s.send(M.SaveScreenshot(str(shot)))
    saved = driver.wait(lambda m: isinstance(m, M.Saved) and m.kind == "screenshot", 60, "screenshot")
    assert saved.path == str(shot) and Image.open(shot).size == (96, 72)


def test_export_then_view_ply_and_orbit(driver, tmp_path):
    s = driver.s
    out = tmp_path / "export.ply"
    s.send(M.ExportPly(str(out)))
    driver.wait(lambda m: isinstance(m, M.Saved) and m.path == str(out), 60, "export")
    s.send(M.OpenPly(str(out)))
    scene = driver.wait(lambda m: isinstance(m, M.SceneLoaded) and m.kind == "ply", 60, "ply scene")
    assert scene.num_gaussians == len(read_ply(out).means) and not scene.cameras
    from spirula.app.camera import OrbitCamera

    cam = OrbitCamera(target=scene.center, distance=3 * scene.radius + 1.0, up=(0, 0, 1))
    cam.look_at(np.asarray(scene.center) + np.array([3.0, 0.5, 1.0]), scene.center)
    s.send(M.SetView(tuple(cam.w2c().reshape(-1)), 50.0, None))
    a = driver.frame()
    cam.orbit(150, 0)
    s.send(M.SetView(tuple(cam.w2c().reshape(-1)), 50.0, None))
    b = driver.frame()
    # the frame carries the camera it shows, for the window's reprojection (spirula/app/view_warp.py)
    from spirula.app.view_warp import free_intrinsics

    np.testing.assert_array_equal(driver.last_preview.w2c, cam.w2c().reshape(-1))
    np.testing.assert_allclose(driver.last_preview.intrinsics, free_intrinsics(50.0, 96, 72), rtol=1e-12)
    assert np.abs(a.astype(int) - _background(72)[:, None, :]).max() > 30
    assert np.abs(a.astype(int) - b.astype(int)).mean() > 0.5  # the view moved


def test_export_and_view_every_splat_format(driver, tmp_path):
    """The export panel's formats from the studio's scene, and each file dropped back in
    opens in the viewport (spirula/engine/io/formats.py reads it) with its count and SH degree."""
    from spirula.engine.io import formats

    s = driver.s
    for fmt in ("spz", "sog", "compressed-ply", "splat"):
        out = tmp_path / f"export{formats.EXTENSIONS[fmt]}"
        s.send(M.ExportPly(str(out), fmt))
        saved = driver.wait(lambda m: isinstance(m, M.Saved) and m.path == str(out), 60, f"{fmt} export")
        assert saved.kind == fmt and formats.detect(out) == fmt
        s.send(M.OpenPly(str(out)))
        scene = driver.wait(lambda m: isinstance(m, M.SceneLoaded) and m.path == str(out), 60, f"{fmt} scene")
        g = formats.read_any(out, warn=False)
        assert scene.kind == "ply" and scene.num_gaussians == len(g) > 0 and scene.sh_degree == g.sh_degree
        assert np.abs(driver.frame().astype(int) - _background(72)[:, None, :]).max() > 30  # something drawn


def test_point_cloud_ply_opens_as_splats_with_a_note(driver, tmp_path):
    rng = np.random.default_rng(5)
    xyz = rng.normal(size=(50, 3)).astype("<f4")
    path = tmp_path / "cloud.ply"
    path.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 50\nproperty float x\n"
                     b"property float y\nproperty float z\nend_header\n" + xyz.tobytes())
    driver.s.send(M.OpenPly(str(path)))
    scene = driver.wait(lambda m: isinstance(m, M.SceneLoaded) and m.kind == "ply", 60, "point cloud scene")
    assert scene.num_gaussians == 50
    note = next(m for m in driver.backlog + driver.s.poll() if isinstance(m, M.Warning))
    assert note.text.startswith(f"{path}: a point cloud (50 points), not 3D Gaussians: shown as 50 round splats")


def test_stop_saves_and_errors_name_the_file(driver, tiny_dataset, tmp_path):
    s = driver.s
    s.send(M.StartTraining(str(tmp_path / "nowhere"), steps=10))
    err = driver.wait(lambda m: isinstance(m, M.Error), 60, "error for a missing dataset")
    assert "nowhere" in err.text
    s.send(M.StartTraining(str(tiny_dataset), project=str(tmp_path / "p2"), steps=5000, max_size=48, init_random_points=300))
    driver.wait(lambda m: isinstance(m, M.TrainMetrics), 120, "metrics")
    s.send(M.StartTraining(str(tiny_dataset), steps=10))  # refused while training
    warn = driver.wait(lambda m: isinstance(m, M.Warning), 30, "busy warning")
    assert "stop it first" in warn.text
    s.send(M.Cancel(save=True))
    done = driver.wait(lambda m: isinstance(m, M.Done), 120, "stopped")
    assert done.result["stopped_early"] and 0 < done.result["step"] < 5000
    assert (tmp_path / "p2" / "splat.ply").is_file()
    s.send(M.OpenPly(str(tiny_dataset / "transforms.json")))
    err = driver.wait(lambda m: isinstance(m, M.Error), 60, "error for a bad ply")
    assert "transforms.json" in err.text


def test_checkpoints_on_schedule_where_spirula_run_puts_them(driver, tiny_dataset, tmp_path):
    from spirula.engine.jobs.stages import train_checkpoint_path

    s, project = driver.s, tmp_path / "p3"
    s.send(M.StartTraining(str(tiny_dataset), project=str(project), steps=30, max_size=48, init_random_points=300,
                           checkpoint_every=10))
    done = driver.wait(lambda m: isinstance(m, M.Done), 120, "Done")
    saved = [m for m in driver.seen if isinstance(m, M.CheckpointSaved) and m.path == str(train_checkpoint_path(project))]
    assert [(m.step, m.stopped) for m in saved] == [(10, False), (20, False)]
    assert done.result["step"] == 30 and not train_checkpoint_path(project).exists()  # finished: it goes


def test_stopped_training_continues_from_its_project(driver, tiny_dataset, tmp_path):
    s, project = driver.s, tmp_path / "p4"
    s.send(M.StartTraining(str(tiny_dataset), project=str(project), steps=5000, max_size=48, init_random_points=300))
    driver.wait(lambda m: isinstance(m, M.TrainMetrics), 120, "metrics")
    s.send(M.Cancel(save=True))
    saved = driver.wait(lambda m: isinstance(m, M.CheckpointSaved), 120, "checkpoint")
    assert saved.stopped and isinstance(driver.seen[-2], M.Done) and driver.seen[-2].result["step"] == saved.step
    n = len(driver.seen)
    s.send(M.OpenProject(str(project)))
    r = driver.wait(lambda m: isinstance(m, M.TrainingResumed), 120, "resumed")
    assert (r.step, r.steps, r.project) == (saved.step, 5000, str(project))
    after = driver.wait(lambda m: isinstance(m, M.TrainMetrics) and m.steps_per_sec > 0, 120, "a step after")
    assert after.step > saved.step
    replay = [m.step for m in driver.seen[n:] if isinstance(m, M.TrainMetrics) and m.steps_per_sec == 0]
    assert replay and max(replay) <= saved.step  # the loss history up to the break
    s.send(M.Cancel(save=False))
    driver.wait(lambda m: isinstance(m, M.Done), 120, "stopped")


def test_a_training_error_names_the_checkpoint_it_keeps(driver, tiny_dataset, tmp_path, monkeypatch):
    from spirula.engine.splat.trainer import Trainer
    from spirula.engine.jobs.stages import train_checkpoint_path

    s, project = driver.s, tmp_path / "p5"
    s.send(M.OpenProject(str(project)))
    err = driver.wait(lambda m: isinstance(m, M.Error), 60, "error: no checkpoint")
    assert err.path == str(project) and "no training checkpoint" in err.text
    monkeypatch.setattr(Trainer, "_mean_loss", staticmethod(lambda block, steps: float("nan")))  # diverges at the first read
    s.send(M.StartTraining(str(tiny_dataset), project=str(project), steps=25, max_size=48, init_random_points=300,
                           checkpoint_every=10))
    err = driver.wait(lambda m: isinstance(m, M.Error), 120, "error: diverged")
    assert "diverged at step 25" in err.text and err.path == str(project)
    assert f"checkpoint (step 20) is kept in {train_checkpoint_path(project)}" in err.text
    driver.wait(lambda m: isinstance(m, M.JobState) and m.state == "failed", 30, "failed")


def test_a_project_another_process_writes_is_refused_and_the_lock_goes_with_the_run(driver, tiny_dataset, tmp_path):
    """One writer per project (spirula/engine/jobs/lock.py; issue 49): the studio's training takes the
    project's lock, is refused in one line naming the owner while another process holds
    it, and gives it back when the run ends."""
    import subprocess
    import sys
    from pathlib import Path

    from spirula.engine.jobs.lock import LOCK_FILE
    from tests.robustness.test_project_lock import HOLD

    s, project = driver.s, tmp_path / "p6"
    repo = Path(__file__).resolve().parents[2]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(project)], cwd=repo, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        s.send(M.StartTraining(str(tiny_dataset), project=str(project), steps=10, max_size=48, init_random_points=300))
        err = driver.wait(lambda m: isinstance(m, M.Error), 120, "error: the project is busy")
        assert f"{project} is being written by another spirula process (PID {holder.pid}" in err.text
        assert "\n" not in err.text
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    s.send(M.StartTraining(str(tiny_dataset), project=str(project), steps=5000, max_size=48, init_random_points=300))
    driver.wait(lambda m: isinstance(m, M.TrainMetrics), 120, "metrics")
    assert (project / LOCK_FILE).is_file()  # held while it trains
    s.send(M.Cancel(save=True))
    done = driver.wait(lambda m: isinstance(m, M.Done), 120, "stopped")
    assert done.result["stopped_early"] and not (project / LOCK_FILE).exists()
