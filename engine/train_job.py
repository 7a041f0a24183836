"""`spirula train`: dataset -> GPU training -> held-out evaluation -> 3DGS PLY, in a
project folder:

    <project>/splat.ply        the trained Gaussians (standard 3DGS PLY)
    <project>/metrics.json     held-out PSNR / SSIM (final and every --eval-interval steps)
    <project>/eval/            held-out renders beside their ground truth (PNG)
    <project>/train.json       settings, dataset notes, loss curve, timings
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from .config import RunConfig
from .device import get_gpu
from .errors import SpirulaError
from .fileio import write_json_atomic
from .ingest import load_dataset
from .io.ply import write_ply
from .splat.evaluate import evaluate
from .splat.layout import unpack
from .splat.trainer import Progress, Trainer

log = logging.getLogger("spirula.train")


def check_output_dir(out_dir: Path) -> None:
    """Create ``out_dir`` or fail before any work if it cannot be written."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpirulaError(f"cannot create the output folder {out_dir}: {e.strerror}") from e
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise SpirulaError(f"the output folder {out_dir} is not writable")


def export_ply(trainer: Trainer, path: Path) -> int:
    """Write the current Gaussians as a 3DGS PLY (atomic); returns the count."""
    fields = unpack(trainer.model.rows(), trainer.cfg.sh_degree)
    write_ply(path, fields)
    return trainer.model.n


def run_training(dataset_path: Path, out_dir: Path, cfg: RunConfig,
                 on_progress: Callable[[Progress], None] | None = None,
                 on_message: Callable[[str], None] = log.info,
                 on_profile: Callable | None = None) -> dict:
    """``on_profile`` receives engine.messages.ProfilerSnapshot about once a second while
    training, when profiling is on (SPIRULA_PROFILE=1, --profile, engine.profile.enable)."""
    from . import profile

    unsubscribe = profile.subscribe(on_profile) if on_profile is not None else None
    try:
        return _run_training(dataset_path, out_dir, cfg, on_progress, on_message)
    finally:
        if unsubscribe is not None:
            unsubscribe()


def _run_training(dataset_path: Path, out_dir: Path, cfg: RunConfig, on_progress, on_message) -> dict:
    out_dir = Path(out_dir)
    check_output_dir(out_dir)
    t0 = time.perf_counter()
    gpu = get_gpu(cfg.device)
    on_message(f"device: {gpu.adapter}")
    dataset = load_dataset(dataset_path, cfg.dataset.max_size)
    for w in dataset.warnings:
        on_message(f"warning: {w}")
    train_idx, test_idx = dataset.split(cfg.dataset.eval_every)
    on_message(f"dataset: {len(dataset.cameras)} images ({len(train_idx)} train, {len(test_idx)} held out), "
               f"{0 if dataset.points is None else len(dataset.points)} SfM points")
    t_load = time.perf_counter() - t0
    trainer = Trainer(gpu, dataset, train_idx, cfg.train)
    on_message(f"initial Gaussians: {trainer.model.n}")
    evals = []

    def on_eval(step: int) -> None:
        m = evaluate(trainer, test_idx)
        evals.append({"step": step, "psnr": m["psnr"], "ssim": m["ssim"]})
        on_message(f"step {step}: held-out PSNR {m['psnr']:.2f} dB, SSIM {m['ssim']:.4f}")
        write_json_atomic(out_dir / "metrics.json", {"evaluations": evals})

    first = evaluate(trainer, test_idx) if test_idx else None
    t1 = time.perf_counter()
    state = trainer.train(on_progress=on_progress, on_eval=on_eval if test_idx else None)
    t_train = time.perf_counter() - t1
    count = export_ply(trainer, out_dir / "splat.ply")
    on_message(f"wrote {out_dir / 'splat.ply'} ({count} Gaussians, step {state.step})")
    final = evaluate(trainer, test_idx, out_dir / "eval") if test_idx else None
    metrics = {
        "step": state.step, "stopped_early": state.stopped_early, "num_gaussians": count,
        "psnr": final and final["psnr"], "ssim": final and final["ssim"],
        "initial_psnr": first and first["psnr"], "views": final and final["views"],
        "evaluations": evals + ([{"step": state.step, "psnr": final["psnr"], "ssim": final["ssim"]}] if final else []),
        "train_seconds": t_train, "sec_per_1k_steps": 1000 * t_train / max(state.step, 1),
    }
    write_json_atomic(out_dir / "metrics.json", metrics)
    write_json_atomic(out_dir / "train.json", {
        "dataset": str(dataset_path), "device": gpu.adapter, "config": asdict(cfg),
        "warnings": dataset.warnings, "load_seconds": t_load, "history": state.history})
    if final:
        on_message(f"held-out PSNR {final['psnr']:.2f} dB (first render {first['psnr']:.2f} dB), SSIM {final['ssim']:.4f}")
    return metrics
