"""Training faults of issue 9, section 6: a NaN in the gradients, running out of device
memory, degenerate camera sets; and `spirula train --resume` refusing what does not fit.

Each run is short (book at 64 px, a few dozen steps): what is checked is the behaviour
at the fault, not the quality.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from spirula.engine import checkpoint
from spirula.engine.jobs.project_layout import checkpoint_path
from spirula.engine.cli.main import main
from spirula.engine.device import _parse_bytes
from spirula.engine.errors import DatasetError, DeviceMemoryError, NonFiniteError
from spirula.engine.ingest.dataset import Camera, Dataset
from spirula.engine.io.ply import read_ply
from spirula.engine.splat.init import scene_bounds
from spirula.engine.splat.scene_scale import training_extent
from spirula.engine.jobs.train import export_ply, run_training
from tests.robustness.train_small import inject_nan_at, small_config
from tests.splat.scenes import look_at_w2c


# ------------------------------------------------------------------------------ NaN / Inf


def test_nan_gradient_stops_with_the_last_good_checkpoint(shared_data, tmp_path, monkeypatch):
    # checkpoints every 16 steps, loss read every 20: the NaN of step 45 comes after the
    # step-32 checkpoint, and the guard's flags stop the step-48 checkpoint before the
    # loss read at step 60 would have
    inject_nan_at(monkeypatch, 44)
    cfg = small_config(steps=80, checkpoint_every=16)
    with pytest.raises(NonFiniteError) as err:
        run_training(shared_data / "book", tmp_path, cfg)
    text = str(err.value)
    assert re.search(r"NaN/Inf in the gradients at step 45 \(\d+ values", text), text
    assert f"last good checkpoint (step 32) is kept in {checkpoint_path(tmp_path)}" in text, text
    assert not (tmp_path / "splat.ply").exists()
    ck = checkpoint.load(checkpoint_path(tmp_path))
    assert ck.step == 32
    assert all(np.isfinite(ck.state["model"][k]).all() for k in ("params", "exp_avg", "exp_avg_sq"))


def test_nan_seen_at_the_loss_read(shared_data, tmp_path, monkeypatch):
    # no checkpoint between the NaN (step 23) and the next loss read (step 40)
    inject_nan_at(monkeypatch, 22)
    with pytest.raises(NonFiniteError, match=r"at step 23 \(\d+ values?\).*step 20\) is kept"):
        run_training(shared_data / "book", tmp_path, small_config(steps=60, checkpoint_every=20, log_interval=40))


def test_ply_export_drops_non_finite_rows(shared_data, tmp_path, gpu):
    from spirula.engine.splat.trainer import Trainer
    from spirula.engine.ingest import load_dataset

    ds = load_dataset(shared_data / "book", 64)
    tr = Trainer(gpu, ds, [1, 2, 3], small_config().train)
    rows = tr.model.rows()
    rows[[3, 10], 0] = np.nan
    rows[17, 12] = np.inf
    gpu.write(tr.model.buf["params"], rows)
    said = []
    count = export_ply(tr, tmp_path / "s.ply", said.append)
    assert count == tr.model.n - 3
    assert said == [f"warning: 3 Gaussians with NaN/Inf values dropped from {tmp_path / 's.ply'}"]
    g = read_ply(tmp_path / "s.ply")
    assert len(g.means) == count and np.isfinite(g.means).all() and np.isfinite(g.sh0).all()
    # a checkpoint of that state is refused, and an earlier one stays
    ident = checkpoint.dataset_identity(ds, [1, 2, 3])
    with pytest.raises(NonFiniteError, match="NaN/Inf in params"):
        checkpoint.save(tmp_path / "c.npz", tr, small_config(), ident)
    assert not (tmp_path / "c.npz").exists() and not list(tmp_path.glob(".c.npz*"))


# ------------------------------------------------------------------------------ out of memory


def test_out_of_memory_reports_vram_and_keeps_the_checkpoint(shared_data, tmp_path, gpu):
    limit_after = 30

    def tighten(progress):  # from step 40 on, no allocation may grow the pool
        if progress.step >= limit_after and gpu.vram_limit is None:
            gpu.vram_limit = gpu.pool.total

    cfg = small_config(steps=200, checkpoint_every=20, densify_from=20, densify_interval=20)
    try:
        with pytest.raises(DeviceMemoryError) as err:
            run_training(shared_data / "book", tmp_path, cfg, on_progress=tighten)
    finally:
        gpu.vram_limit = None
    text = str(err.value)
    assert text.startswith("out of device memory: allocating"), text
    assert "VRAM (device buffers in the pool)" in text and "splat" in text and "total" in text
    assert f"The last good checkpoint (step 40) is kept in {checkpoint_path(tmp_path)}" in text, text
    assert "lower --max-size (now 64 px) or --max-gaussians (now 6,000,000)" in text
    assert checkpoint.load(checkpoint_path(tmp_path)).step == 40
    assert not (tmp_path / "splat.ply").exists()


def test_vram_limit_parsing():
    assert _parse_bytes(None) is None and _parse_bytes("") is None
    assert _parse_bytes("4096") == 4096
    assert _parse_bytes("64M") == _parse_bytes("64MiB") == _parse_bytes("64mb") == 64 << 20
    assert _parse_bytes("1.5G") == 3 << 29


def test_oversized_buffer_is_a_device_memory_error(gpu):
    with pytest.raises(DeviceMemoryError, match=r"allocating 1048576\.00 MiB for 'splat\.huge' failed"):
        gpu.buffer(1 << 40, "splat.huge")


# ------------------------------------------------------------------------------ cameras


def _cams(centers, targets, w=32, h=24) -> list[Camera]:
    rng = np.random.default_rng(1)
    return [Camera(name=f"c{i:02d}.png", image_path=Path(f"c{i:02d}.png"), width=w, height=h, fx=30.0, fy=30.0,
                   cx=w / 2, cy=h / 2, w2c=look_at_w2c(c, t), image=rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
            for i, (c, t) in enumerate(zip(centers, targets))]


def _ring(n=6, r=3.0):
    return [[r * math.cos(2 * math.pi * i / n), 0.3, r * math.sin(2 * math.pi * i / n)] for i in range(n)]


def _points(n=200, seed=2):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 0.5, (n, 3)).astype(np.float32) + np.array([0, 0, 4], np.float32)


def test_ordinary_cameras_keep_the_3dgs_extent():
    ds = Dataset(Path("ring"), _cams(_ring(), [[0, 0, 0]] * 6))
    extent, notes = training_extent(ds)
    assert notes == [] and extent == ds.scene_extent()[1] == pytest.approx(3.3, rel=0.01)


def test_single_camera_without_points_is_refused():
    ds = Dataset(Path("one"), _cams([[0, 0, 0]], [[0, 0, 1]]))
    with pytest.raises(DatasetError, match=r"one: a single camera \(c00.png\) and no 3D points: the scene scale"):
        training_extent(ds)


def test_cameras_at_one_point_without_points_are_refused():
    ds = Dataset(Path("pan"), _cams([[1, 2, 3]] * 5, [[1 + math.cos(a), 2, 3 + math.sin(a)] for a in range(5)]))
    with pytest.raises(DatasetError, match="all 5 cameras are at one point and no 3D points"):
        training_extent(ds)


def test_rotation_only_capture_takes_its_scale_from_the_points():
    # 5 cameras panning on a tripod (centres within 1 mm), SfM points ~4 units away
    centers = [[1e-4 * i, 0, 0] for i in range(5)]
    ds = Dataset(Path("tripod"), _cams(centers, [[0.3 * i - 0.6, 0, 4] for i in range(5)]), points=_points())
    extent, notes = training_extent(ds)
    depth = float(np.median(np.linalg.norm(_points().astype(np.float64) - np.mean(centers, axis=0), axis=1)))
    assert extent == pytest.approx(1.1 * depth)
    assert len(notes) == 1 and "all 5 cameras lie within" in notes[0] and "rotation-only" in notes[0]
    assert f"{extent:.4g} world units" in notes[0]
    single = Dataset(Path("one"), _cams([[0, 0, 0]], [[0, 0, 1]]), points=_points())
    extent, notes = training_extent(single)
    assert notes[0].startswith("a single camera (c00.png): the scene scale comes from the 3D points")


def test_collinear_parallel_cameras_without_points():
    # a sideways dolly: centres on a line, all looking the same way; the extent is the
    # ordinary one and the random initial points go in front of the cameras, not around them
    ds = Dataset(Path("dolly"), _cams([[x, 0, 0] for x in np.linspace(-1, 1, 5)], [[x, 0, 5] for x in np.linspace(-1, 1, 5)]))
    extent, notes = training_extent(ds)
    assert notes == [] and extent == pytest.approx(1.1)
    mid, half = scene_bounds(ds)
    assert mid[2] == pytest.approx(1.0) and abs(mid[0]) < 1e-9 and half > 0.3


def test_non_finite_pose_is_refused():
    cams = _cams(_ring(), [[0, 0, 0]] * 6)
    cams[2].w2c[0, 3] = np.nan
    with pytest.raises(DatasetError, match=r"non-finite camera pose \(NaN/Inf\) for c02.png"):
        training_extent(Dataset(Path("bad"), cams))


def test_trainer_reports_the_scale_note(gpu):
    from spirula.engine.splat.trainer import Trainer

    ds = Dataset(Path("tripod"), _cams([[1e-5 * i, 0, 0] for i in range(3)], [[0.3 * i, 0, 4] for i in range(3)]),
                 points=_points(), colors=np.full((200, 3), 128, np.uint8))
    tr = Trainer(gpu, ds, [0, 1, 2], small_config().train)
    assert tr.extent > 3.0 and "rotation-only" in tr.warnings[0]


# ------------------------------------------------------------------------------ --resume


def test_cli_resume(shared_data, tmp_path, capsys):
    out = tmp_path / "p"
    args = ["train", str(shared_data / "book"), "-o", str(out), "--max-size", "64", "--eval-every", "0",
            "--sh-degree", "1", "--init-points", "500", "--checkpoint-every", "10"]
    rc = main(args + ["--steps", "20", "--resume"])
    assert rc == 1 and f"--resume: no checkpoint at {checkpoint_path(out)}" in capsys.readouterr().err
    assert main(args + ["--steps", "25"]) == 0
    assert checkpoint.load(checkpoint_path(out)).step == 25  # the end checkpoints too (not only every 10)
    capsys.readouterr()
    # another SH degree: the saved rows do not fit
    assert main(args + ["--steps", "25", "--sh-degree", "2", "--resume"]) == 1
    assert "(step 25) does not fit this run: sh_degree 1 -> 2" in capsys.readouterr().err
    # more steps: allowed, with a warning; continues from the end, step 25
    assert main(args + ["--steps", "30", "--resume"]) == 0
    err = "".join(capsys.readouterr())  # messages go through tqdm.write (stdout)
    assert "resumed from" in err and "at step 25" in err and "changed setting, steps 25 -> 30" in err
    import json

    m = json.loads((out / "metrics.json").read_text())
    assert m["step"] == 30 and m["resumed_from_step"] == 25
