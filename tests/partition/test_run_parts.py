"""Training the parts: a 2-part run through Ray on software Vulkan, killed mid-way (SIGKILL
of the whole command) and resumed; then merge; then the same parts without Ray (skipped,
with the install hint). One local Ray start per run, shut down after it."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
from spirula.engine.io.ply import read_ply
from spirula.engine.jobs.project_layout import checkpoint_path
from spirula.engine.messages import StageFinished, StageProgress, Warning
from spirula.engine.partition import run_parts
from spirula.engine.partition.parts_layout import read_layout
from spirula.engine.partition.merge import merge_parts
from spirula.engine.partition.parts import split_dataset
from spirula.engine.partition.split import SplitSettings
from tests.partition.city import make_city, write_city
from ..patience import patient

REPO = Path(__file__).resolve().parents[2]
STEPS, BUDGET, SIZE = 500, 1200, 32


def _cfg():
    return RunConfig(dataset=DatasetConfig(max_size=SIZE, eval_every=0),
                     train=TrainConfig(steps=STEPS, strategy="mcmc", mcmc_budget=BUDGET, max_gaussians=BUDGET,
                                       checkpoint_every=40, mcmc_init_scale=1.0))


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    pytest.importorskip("ray")
    root = tmp_path_factory.mktemp("tiny")
    write_city(root / "city", make_city(blocks=2, width=SIZE, height=24), points=BUDGET)
    split_dataset(root / "city", root / "parts", SplitSettings(parts=2, min_cameras=6, total_gaussians=BUDGET,
                                                               max_size=SIZE), on_message=lambda _: None)
    return root


def _train_command(parts_dir: Path) -> list[str]:
    return [sys.executable, "-m", "spirula.engine.cli", "partition", "train", str(parts_dir), "--steps", str(STEPS),
            "--max-gaussians", str(BUDGET), "--max-size", str(SIZE), "--checkpoint-every", "40"]


def test_ray_run_killed_mid_way_resumes(parts):
    parts_dir = parts / "parts"
    layout = read_layout(parts_dir)
    proc = subprocess.Popen(_train_command(parts_dir), cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpts = [checkpoint_path(layout.part_dir(p) / "train") for p in layout.parts]
    try:
        deadline = time.monotonic() + patient(300)
        while not any(c.exists() for c in ckpts):
            assert proc.poll() is None, "the run ended before its first checkpoint"
            assert time.monotonic() < deadline, f"no checkpoint within {patient(300):.0f} s"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray processes it started
        proc.wait()
    # Ray's workers are not in the command's process group: they die with their raylet (fate
    # sharing) a moment later, and may write one more checkpoint until then
    stamps, quiet = None, 0
    for _ in range(100):
        now = [c.stat().st_mtime_ns if c.exists() else 0 for c in ckpts]
        quiet = quiet + 1 if now == stamps else 0
        stamps = now
        if quiet >= 10:
            break
        time.sleep(0.2)
    assert not any(run_parts.is_done(layout.part_dir(p)) for p in layout.parts)
    interrupted = [p.name for p, c in zip(layout.parts, ckpts) if c.exists()]
    assert interrupted

    messages = []
    out = run_parts.train_parts(parts_dir, _cfg(), emit=messages.append)
    assert out["ray"] and not out["stopped"]
    for p in layout.parts:
        result = out["parts"][p.name]
        assert result["done"] and not result.get("skipped")
        want = run_parts.part_config(layout, p, _cfg()).train.steps
        assert result["metrics"]["step"] == want
        resumed = any(line.startswith("resumed from") for line in result["log"])
        assert resumed == (p.name in interrupted), (p.name, result["log"][:5])
        assert result["peak_vram_mib"] > 0
    assert {m.stage for m in messages if isinstance(m, StageProgress)} == {p.name for p in layout.parts}
    assert {m.stage for m in messages if isinstance(m, StageFinished)} == {p.name for p in layout.parts}

    merged = merge_parts(parts_dir, parts / "project", finetune_steps=0)  # ownership alone (the fine-tune: test_merge_finetune.py)
    g = read_ply(parts / "project" / "splat.ply")
    assert len(g) == merged["num_gaussians"] == sum(v["kept"] for v in merged["parts"].values())
    owner = layout.owner_of(g.means)
    start = 0
    for p in layout.parts:  # the merged file holds each part's own Gaussians, in order
        n = merged["parts"][p.name]["kept"]
        assert (owner[start:start + n] == p.index).all()
        start += n
    assert merged["psnr"] is not None and np.isfinite(merged["psnr"]) and merged["held_out"] == len(layout.test)


def test_without_ray_the_parts_run_in_process_after_the_hint(parts, monkeypatch):
    parts_dir = parts / "parts"
    monkeypatch.setattr(run_parts, "_import_ray", lambda: None)
    if not all(run_parts.is_done(parts_dir / p.name) for p in read_layout(parts_dir).parts):
        run_parts.train_parts(parts_dir, _cfg(), emit=lambda _: None)  # run alone: train them here, in process
    messages = []
    out = run_parts.train_parts(parts_dir, _cfg(), emit=messages.append)
    assert not out["ray"]
    hint = [m.text for m in messages if isinstance(m, Warning)]
    assert any("pip install 'spirula-studio[distributed]'" in t and "one after another" in t for t in hint)
    assert all(m.cached for m in messages if isinstance(m, StageFinished))  # finished parts are skipped
    assert all(json.loads((parts_dir / n / "train" / "part.json").read_text())["done"] for n in out["parts"])
