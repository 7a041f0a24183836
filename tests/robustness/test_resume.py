"""Nothing lost: a training run killed with SIGKILL after a checkpoint resumes with
`--resume` and ends where an unbroken run ends (issue 9).

Both runs are subprocesses on software Vulkan with one lavapipe thread
(LP_NUM_THREADS=1): then the rasterizer's float atomics add in a fixed order and a run is
bit-reproducible, so the resumed run must give the identical PLY, not just the issue's
"same Gaussian count, PSNR within 0.05 dB". (With several threads, or on a real GPU, two
unbroken runs already differ in the last bits, and so does a resumed one.)

The schedule (tests/robustness/train_small.py): 160 steps at 64 px on book (5 training
images, 2 held out), densification every 30 steps from 30 to 150, opacity reset at 90,
checkpoints every 80 steps; the kill comes right after the step-80 checkpoint, so the
resumed run densifies twice more (once right after the opacity reset).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from spirula.engine import checkpoint
from spirula.engine.jobs.project_layout import checkpoint_path
from spirula.engine.io.ply import read_ply
from ..patience import patient

REPO = Path(__file__).resolve().parents[2]


def _start(dataset: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, LP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("SPIRULA_PROFILE", None)
    return subprocess.Popen([sys.executable, "-m", "tests.robustness.train_small", str(dataset), str(out), *extra],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 240) -> dict:
    out, _ = proc.communicate(timeout=patient(timeout))
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_sigkill_mid_run_resumes_bit_for_bit(shared_data, tmp_path):
    book = shared_data / "book"
    a_dir, b_dir = tmp_path / "unbroken", tmp_path / "killed ü"
    a = _start(book, a_dir)  # the two first runs side by side (one lavapipe thread each)
    b = _start(book, b_dir)
    ckpt = checkpoint_path(b_dir)
    deadline = time.monotonic() + patient(180)
    while not ckpt.exists():
        assert b.poll() is None, f"run B ended before its first checkpoint:\n{b.communicate()[0]}"
        assert time.monotonic() < deadline, f"no checkpoint within {patient(180):.0f} s"
        time.sleep(0.05)
    b.send_signal(signal.SIGKILL)
    b.communicate()
    assert b.returncode == -signal.SIGKILL
    assert not (b_dir / "splat.ply").exists(), "run B was killed too late: it had finished"
    saved = checkpoint.load(ckpt)
    assert saved.step == 80 and not list(ckpt.parent.glob(".train.npz.*")), "a temporary checkpoint was left"

    resumed = _finish(_start(book, b_dir, "--resume"))
    unbroken = _finish(a)
    assert unbroken["step"] == resumed["step"] == 160 and resumed["resumed_from_step"] == 80
    # the criterion
    assert resumed["num_gaussians"] == unbroken["num_gaussians"]
    assert abs(resumed["psnr"] - unbroken["psnr"]) <= 0.05, (resumed, unbroken)
    # and in fact bit for bit
    ga, gb = read_ply(a_dir / "splat.ply"), read_ply(b_dir / "splat.ply")
    for name in ("means", "scales", "quats", "opacities", "sh0", "shN"):
        np.testing.assert_array_equal(getattr(ga, name), getattr(gb, name), err_msg=name)
    assert resumed["psnr"] == unbroken["psnr"]
    ha = json.loads((a_dir / "train.json").read_text())["history"]
    hb = json.loads((b_dir / "train.json").read_text())["history"]
    assert [h["loss"] for h in ha] == [h["loss"] for h in hb]  # the loss curve across the break too


def test_spirula_run_continues_from_the_training_checkpoint(shared_data, tmp_path, monkeypatch):
    """`spirula run`: the train stage checkpoints into <project>/checkpoints/ (outside the
    staging folder a failed stage loses); a rerun continues from there, and the
    checkpoint goes once the stage has finished."""
    from spirula.engine import messages as msg
    from spirula.engine.errors import NonFiniteError
    from spirula.engine.jobs.pipeline import PipelineConfig, run_pipeline
    from tests.robustness.train_small import inject_nan_at, small_config

    proj = tmp_path / "proj"
    cfg = PipelineConfig(run=small_config(steps=60, checkpoint_every=20), with_mesh=False)  # the training's resume
    with monkeypatch.context() as mp:
        inject_nan_at(mp, 44)
        with pytest.raises(NonFiniteError, match="step 40"):
            run_pipeline(shared_data / "book", proj, cfg)
    ckpt = proj / "checkpoints" / "train.npz"
    assert checkpoint.load(ckpt).step == 40 and not (proj / "train").exists()
    seen = []
    rec = run_pipeline(shared_data / "book", proj, cfg, emit=seen.append)
    train = next(s for s in rec["stages"] if s["name"] == "train")
    assert train["status"] == "done" and train["summary"]["step"] == 60
    notes = [m.detail for m in seen if isinstance(m, msg.StageProgress) and m.detail]
    assert any(f"resumed from {ckpt} at step 40" in d for d in notes), notes
    assert not ckpt.exists() and (proj / "exports" / "splat.ply").is_file()


def test_ctrl_c_stops_after_the_step_and_checkpoints_it(shared_data, tmp_path):
    """`spirula train`: the first SIGINT stops between two steps; that exact state is
    checkpointed and the PLY written; one line says so and the exit code is 130 (issue 49:
    128 + SIGINT, as for every command; spirula/engine/cli/stopping.py)."""
    from tests.robustness.test_stop_signals import Command

    out = tmp_path / "p"
    c = Command("train", str(shared_data / "book"), "-o", str(out), "--max-size", "64", "--eval-every", "0",
                "--sh-degree", "1", "--steps", "5000", "--checkpoint-every", "4000")
    c.wait_for(r"\b[1-9]\d*/5000\b")  # steps done: the training has started
    c.proc.send_signal(signal.SIGINT)
    rc, text = c.finish()
    assert rc == 130, text
    assert "stopping after this step" in text
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stopped_early"] and 0 < metrics["step"] < 4000
    assert f"stopped at step {metrics['step']} (Ctrl-C); checkpoint written to {checkpoint_path(out)}" in text
    assert checkpoint.load(checkpoint_path(out)).step == metrics["step"]
    assert len(read_ply(out / "splat.ply").means) == metrics["num_gaussians"]
