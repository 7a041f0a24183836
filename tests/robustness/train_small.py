"""A short training run with the whole densification schedule squeezed into a few
hundred steps, for the robustness tests to start as a subprocess (and kill):

    python -m tests.robustness.train_small DATASET OUT [--resume] [--steps N] [--checkpoint-every K]

It is `spirula train` (spirula.engine.jobs.train.run_training) with another TrainConfig.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig


def small_config(steps: int = 160, checkpoint_every: int = 80, max_size: int = 64, **train) -> RunConfig:
    base = dict(steps=steps, checkpoint_every=checkpoint_every, log_interval=20, sh_degree=1, sh_degree_interval=50,
                densify_from=30, densify_interval=30, densify_until=150, opacity_reset_interval=90, seed=7,
                strategy="adc")  # the schedule above is ADC's (the default "auto" would pick MCMC on book)
    base.update(train)
    return RunConfig(dataset=DatasetConfig(max_size=max_size, eval_every=4), train=TrainConfig(**base))


def inject_nan_at(monkeypatch, step_index: int) -> None:
    """Make step ``step_index`` (from 0) produce NaN gradients: its screen-space gradients
    (opacity's among them) are NaN before the backward accumulates into them, so every
    visible Gaussian's opacity-logit gradient is NaN when the fused projection backward +
    Adam (which guards them) reads it."""
    from spirula.engine.splat.render import SCREEN_GRAD_STRIDE, Rasterizer

    original = Rasterizer._record_backward
    keep = []

    def record_backward(self, enc, grads, grad2d_sum, vis_count, accumulate_stats, g_screen, optimizer=None):
        if optimizer is not None and optimizer["step"] == step_index:
            size = SCREEN_GRAD_STRIDE * self.n
            nan = self.gpu.upload(np.full(size, np.nan, np.float32), "test.nan")
            keep.append(nan)  # alive until the command buffer has run
            self.gpu.copy(enc, g_screen, 0, nan, 0, 4 * size)
        original(self, enc, grads, grad2d_sum, vis_count, accumulate_stats, g_screen, optimizer)

    monkeypatch.setattr(Rasterizer, "_record_backward", record_backward)


def main(argv: list[str] | None = None) -> int:
    from spirula.engine.jobs.train import run_training

    p = argparse.ArgumentParser()
    p.add_argument("dataset", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--steps", type=int, default=160)
    p.add_argument("--checkpoint-every", type=int, default=80)
    a = p.parse_args(argv)
    cfg = small_config(a.steps, a.checkpoint_every)
    m = run_training(a.dataset, a.out, cfg, on_message=lambda t: print(t, flush=True),
                     resume="require" if a.resume else "never")
    print(json.dumps({k: m[k] for k in ("step", "num_gaussians", "psnr", "resumed_from_step")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
