"""A training run at a fixed, large Gaussian count (issue 8: 10M Gaussians, SH degree 3, in
8 GiB of device memory), with the device's memory high-water mark and our VRAM pool's
per-category table. Prints one JSON line.

The model starts at ``--gaussians`` rows: the prepared folder's SfM points, each repeated
(``--gaussians`` / points times) with a jitter of its own neighbour distance, scales shrunk
by the cube root of the repetition (the same volume density as 3DGS's initialisation of
the points themselves would give). Densification runs at the cap (``max_gaussians`` =
``--gaussians``): prune, then grow up to the cap, so densify's transient buffers are part
of the measured high-water mark.

    python benchmarks/large_model.py --data .gpu/data/fox --gaussians 10000000 --steps 300 --adam-moments bf16
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.train_bench import VramSampler, as_dataset, load_prepared, parity_points, split  # noqa: E402


def dense_rows(pts: np.ndarray, cols: np.ndarray, count: int, max_sh_degree: int, rng) -> np.ndarray:
    """``count`` packed rows around the SfM points (see the module docstring)."""
    from spirula.engine.splat.init import gaussians_from_points
    from spirula.engine.splat.param_layout import OFF_MEAN, OFF_SCALE

    base = gaussians_from_points(pts, cols, max_sh_degree)
    reps = count / len(base)
    if count <= len(base):
        pick = rng.choice(len(base), count, replace=False)
    else:  # every point once, the rest drawn again
        pick = np.concatenate([np.arange(len(base)), rng.integers(0, len(base), count - len(base))])
    rows = base[pick]
    sigma = np.exp(rows[:, OFF_SCALE]).astype(np.float32)
    rows[:, OFF_MEAN:OFF_MEAN + 3] += rng.standard_normal((count, 3), dtype=np.float32) * sigma[:, None]
    rows[:, OFF_SCALE:OFF_SCALE + 3] -= np.float32(np.log(max(reps, 1.0)) / 3)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--gaussians", type=int, default=10_000_000)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--sh-degree", type=int, default=3)
    ap.add_argument("--adam-moments", choices=["fp32", "bf16"], default="bf16")
    ap.add_argument("--device", choices=["vulkan", "cuda"], default="vulkan")
    ap.add_argument("--vram", action="store_true", help="sample the device's used memory with NVML")
    args = ap.parse_args()
    sampler = VramSampler() if args.vram else None  # before any GPU context: the peak includes it

    from spirula.engine.config import TrainConfig
    from spirula.engine.device import get_gpu
    from spirula.engine.splat.model import GaussianModel
    from spirula.engine.splat.trainer import Trainer

    cams, images, pts, cols = load_prepared(args.data)
    pts, cols = parity_points(args.data, cams, images, pts, cols)  # the points prepare_data.py used to draw
    ds = as_dataset(args.data, cams, images, pts, cols)
    train_idx, _ = split(len(ds.cameras))
    gpu = get_gpu(args.device)
    # SH degree 3 from the first step (the memory is allocated for it anyway); densify at the cap
    cfg = TrainConfig(steps=args.steps, sh_degree=args.sh_degree, sh_degree_interval=0, log_interval=25,
                      densify_from=50, densify_interval=100, densify_until=10**9, opacity_reset_interval=0,
                      max_gaussians=args.gaussians, adam_moments=args.adam_moments)
    rows = dense_rows(pts, cols, args.gaussians, args.sh_degree, np.random.default_rng(0))
    trainer = Trainer(gpu, ds, train_idx, cfg)
    trainer.model = None  # the SfM-sized model goes before the large one is allocated
    gpu.wait_idle()
    trainer.model = GaussianModel(gpu, rows, args.sh_degree, moments_bf16=args.adam_moments == "bf16")
    del rows
    losses = []
    t0 = time.perf_counter()
    state = trainer.train(on_progress=lambda p: losses.append((p.step, p.loss, p.num_gaussians)))
    sec = time.perf_counter() - t0
    peak = sampler.stop() if sampler else None
    pool = gpu.pool.stats(largest=12)
    out = {"dataset": args.data.name, "gaussians": args.gaussians, "sh_degree": args.sh_degree,
           "adam_moments": args.adam_moments, "device": args.device, "gpu": gpu.adapter, "steps": state.step,
           "sec_per_1k_steps": 1000 * sec / max(state.step, 1), "peak_vram_mib": peak,
           "pool_high_water_mib": pool["total"]["high_water_mib"],
           "pool": {"total": pool["total"], "categories": pool["categories"],
                    "largest_at_high_water": pool["largest_at_high_water"]},
           "loss_first_last": [losses[0], losses[-1]] if losses else None,
           "num_gaussians_end": trainer.model.n, "overflowed_steps": trainer.pipeline.overflows}
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
