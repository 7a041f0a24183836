"""The reference for `spirula bench raster`: gsplat 1.5.3 on the same synthetic scene.

Builds the scene with spirula.engine.cli.bench.commands.synthetic_scene (same seed, same Gaussians,
same camera), converts it to gsplat's inputs (activated scales and opacities, wxyz
quaternions, SH coefficients [N, K, 3]) and times, on CUDA with events, the median over
``--iters`` iterations after ``--warmup``:

  forward   gsplat.rasterization(...)  (projection + SH, tile intersection + sort, rasterize)
  backward  loss.backward() of an L1 loss against the same random target
  adam      torch.optim.Adam(fused=True).step() on the six parameter tensors

and, from torch.profiler over a few more iterations, the GPU time per CUDA kernel grouped
into the stages of our bench (projection, binning_sort, rasterize_fwd, rasterize_bwd,
projection_bwd_adam) by kernel name; kernels it cannot place are listed under "other" with
their names so the mapping can be checked.

Run on the GPU machine only (needs torch + CUDA and gsplat, which compiles on first import):

    python3 benchmarks/raster_bench_gsplat.py [--gaussians 2000000 --width 1237 --height 822] --json out.json

Results: docs/benchmarks-history.md (2026-11-30, "`spirula bench raster` on the H200"); run by
benchmarks/gpu.sh's "raster" protocol.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# kernel-name fragments -> stage (checked in order; names are lower-cased)
STAGE_RULES = [
    ("rasterize_to_pixels_bwd", "rasterize_bwd"), ("rasterize_to_pixels_3dgs_bwd", "rasterize_bwd"),
    ("rasterize_to_pixels", "rasterize_fwd"),
    ("projection", "projection"), ("spherical_harmonics", "projection"), ("sh_fwd", "projection"),
    ("isect", "binning_sort"), ("radix", "binning_sort"), ("segmented_sort", "binning_sort"),
    ("cub::", "binning_sort"), ("offset_encode", "binning_sort"),
    ("adam", "projection_bwd_adam"), ("multi_tensor_apply", "projection_bwd_adam"),
]


def stage_of(name: str) -> str:
    n = name.lower()
    if ("projection" in n or "spherical_harmonics" in n or "sh_" in n) and "bwd" in n:
        return "projection_bwd_adam"
    for frag, st in STAGE_RULES:
        if frag in n:
            return st
    return "other"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gaussians", type=int, default=2_000_000)
    ap.add_argument("--width", type=int, default=1237)
    ap.add_argument("--height", type=int, default=822)
    ap.add_argument("--sh-degree", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    import torch
    from gsplat import rasterization

    from spirula.engine.cli.bench.commands import synthetic_scene
    from spirula.engine.splat.param_layout import OFF_MEAN, OFF_OPACITY, OFF_QUAT, OFF_SCALE, OFF_SH, sh_coeffs

    sc = synthetic_scene(a.gaussians, a.width, a.height, a.sh_degree, a.seed)
    rows = sc["rows"]
    dev = torch.device("cuda")
    k = sh_coeffs(a.sh_degree)
    t = lambda x: torch.tensor(np.ascontiguousarray(x), dtype=torch.float32, device=dev)
    params = {
        "means": t(rows[:, OFF_MEAN:OFF_MEAN + 3]),
        "log_scales": t(rows[:, OFF_SCALE:OFF_SCALE + 3]),
        "quats": t(rows[:, OFF_QUAT:OFF_QUAT + 4]),
        "logits": t(rows[:, OFF_OPACITY]),
        "sh0": t(rows[:, OFF_SH:OFF_SH + 3].reshape(-1, 1, 3)),
        "shN": t(rows[:, OFF_SH + 3:OFF_SH + 3 * k].reshape(-1, k - 1, 3)),
    }
    for p in params.values():
        p.requires_grad_(True)
    viewmats = t(sc["w2c"])[None]
    Ks = t([[sc["fx"], 0.0, sc["cx"]], [0.0, sc["fy"], sc["cy"]], [0.0, 0.0, 1.0]])[None]
    target = t(sc["gt"].astype(np.float32) / 255.0)[None]
    opt = torch.optim.Adam(list(params.values()), lr=1e-3, eps=1e-15, fused=True)

    def forward():
        colors = torch.cat([params["sh0"], params["shN"]], dim=1)
        img, _, meta = rasterization(params["means"], params["quats"], torch.exp(params["log_scales"]),
                                     torch.sigmoid(params["logits"]), colors, viewmats, Ks, a.width, a.height,
                                     sh_degree=a.sh_degree, packed=False, eps2d=0.3)
        return img, meta

    ev = lambda: torch.cuda.Event(enable_timing=True)
    fwd_ms, bwd_ms, adam_ms, isects = [], [], [], []
    for it in range(a.warmup + a.iters):
        e0, e1, e2, e3 = ev(), ev(), ev(), ev()
        opt.zero_grad(set_to_none=False)
        torch.cuda.synchronize()
        e0.record()
        img, meta = forward()
        e1.record()
        loss = (img - target).abs().mean()
        loss.backward()
        e2.record()
        opt.step()
        e3.record()
        torch.cuda.synchronize()
        if it >= a.warmup:
            fwd_ms.append(e0.elapsed_time(e1))
            bwd_ms.append(e1.elapsed_time(e2))
            adam_ms.append(e2.elapsed_time(e3))
            if "isect_ids" in meta:
                isects.append(int(meta["isect_ids"].numel()))

    # per-kernel GPU time over a few more iterations, grouped into our stages
    from torch.profiler import ProfilerActivity, profile

    prof_iters = 5
    with profile(activities=[ProfilerActivity.CUDA]) as pr:
        for _ in range(prof_iters):
            opt.zero_grad(set_to_none=False)
            img, _ = forward()
            (img - target).abs().mean().backward()
            opt.step()
        torch.cuda.synchronize()
    stages: dict[str, float] = {}
    kernels: dict[str, float] = {}
    for e in pr.key_averages():
        dt = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)  # µs
        if dt <= 0:
            continue
        st = stage_of(e.key)
        stages[st] = stages.get(st, 0.0) + dt / 1e3 / prof_iters
        kernels[e.key] = dt / 1e3 / prof_iters
    med = lambda v: float(np.median(v)) if v else None
    res = {
        "bench": "raster", "trainer": "gsplat", "gsplat": __import__("gsplat").__version__,
        "device": torch.cuda.get_device_name(), "gaussians": a.gaussians, "width": a.width, "height": a.height,
        "sh_degree": a.sh_degree, "iters": a.iters, "warmup": a.warmup, "seed": a.seed,
        "intersections": med(isects) and int(med(isects)),
        "forward_ms": med(fwd_ms), "backward_ms": med(bwd_ms), "adam_ms": med(adam_ms),
        "stages_ms_from_torch_profiler": stages,
        "kernels_ms_per_iteration": dict(sorted(kernels.items(), key=lambda kv: -kv[1])[:40]),
        "note": "forward/backward/adam: CUDA events, median; stages: torch.profiler kernel times / iteration "
                "(the profiler's own overhead included); backward loss is L1 only (ours: L1 + D-SSIM, timed "
                "separately as 'loss')",
    }
    if a.json is not None:
        a.json.write_text(json.dumps(res, indent=2))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
