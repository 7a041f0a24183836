"""`spirula bench raster|train|viewer|studio|mesh`: fixed workloads with JSON output.

This module registers all five (``add_parser``) and holds raster and train; viewer
(the studio viewport's frame time) is spirula/engine/cli/bench/viewer_fps.py, studio (the viewport's
frame rate while a model trains) spirula/engine/cli/bench/studio_fps.py, mesh (the steps of
`spirula mesh` on a project) spirula/engine/cli/bench/mesh_steps.py. benchmarks/gpu.sh runs them
on the GPU machine as named protocols.

raster: a fixed-seed synthetic scene (default 2,000,000 Gaussians, SH degree 3, one
1237 x 822 camera) and one full training iteration per repeat (projection, depth sort,
binning, tile sort, rasterize forward, L1 + D-SSIM loss, rasterize backward, projection
backward, Adam), recorded exactly as the trainer records it. Per-dispatch GPU timestamps
(the profiler, switched on for the run) are grouped into the stages below; a memset or
copy counts toward the stage of the kernel that follows it. Each stage's number is the
median over the timed iterations of that stage's summed GPU time in one iteration (gaps
between dispatches are not included; ``iteration_gpu_ms`` is the command buffers' span).

Memory-traffic floors (spirula/engine/cli/bench/floors.py): the same run first measures the device's
bandwidth (a 256 MiB device-to-device copy and a read+write kernel, 16 MiB on a software
device; ``2 x bytes / GPU time``, median of 5; the larger is used, JSON ``bandwidth``).
Every timed kernel, copy and clear of the iteration then gets its compulsory bytes from
the byte model (each input read once, each output written once, from the workload's
sizes: N, D, visible Gaussians, intersections, pixels, tiles, sort passes), a floor =
bytes / bandwidth and the ratio measured / floor (JSON ``floors.kernels``; per recorded
operation in ``floors.calls``), and the three slowest are named with their ratios and
whether each is within 3x of its floor (``floors.slowest``). The model's list of
operations is checked against the profiler's trace (``floors.model_matches_trace``).

Compute floors (spirula/engine/cli/bench/compute_floors.py), for rasterize_forward and
rasterize_backward, which are bound by per-pixel arithmetic rather than bytes: the run
also measures the device's FP32 rate (shaders/profile/flops.slang, independent FMA chains,
GPU timestamps, median of 5; JSON ``compute_floors.probe``), and each of the two gets
floor = pixel-splat pairs (sum of the last iteration's last_index) x FP32 FLOPs per pair
(counted from raster.slang) / that rate, and the ratio measured / floor, next to its byte
floor's ratio (JSON ``compute_floors.kernels``). A count of the pairs that composite
(shaders/profile/composited.slang; the rest are rejected by the alpha test at a fraction
of the arithmetic) gives the floor proper, ``floor_ms_composited``, and its ratio to the
byte floor; a count per 32-lane subgroup (JSON ``compute_floors.lane_sets``) gives the
backward's floor under SIMT execution, ``floor_ms_subgroup``.

train: a short training run on the embedded sample (resources/sample/fox) with fixed
settings; reports seconds per 1,000 steps, the last loss, the Gaussian count and the VRAM
pool's high-water mark.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

STAGES = ("projection", "binning_sort", "rasterize_fwd", "loss", "rasterize_bwd", "projection_bwd_adam")
_STAGE_OF = {
    "project_forward": "projection",
    "radix_hist": "binning_sort", "radix_offsets": "binning_sort", "radix_scatter": "binning_sort",
    "scan_reduce": "binning_sort",
    "scan_tiles": "binning_sort", "gather_counts": "binning_sort", "emit_intersections": "binning_sort",
    "tile_ranges": "binning_sort",
    "rasterize_forward": "rasterize_fwd",
    "ssim_fwd": "loss", "ssim_bwd": "loss",
    "clear_screen_grads": "rasterize_bwd", "rasterize_backward": "rasterize_bwd",
    "project_backward_adam": "projection_bwd_adam",
}


# --- the synthetic scene ------------------------------------------------------------------------
def synthetic_scene(n: int, width: int, height: int, sh_degree: int = 3, seed: int = 0) -> dict:
    """Fixed-seed Gaussians in front of one pinhole camera (OpenCV axes, camera at the
    origin looking down +z, focal 0.9 x width). Returns ``rows`` (packed [N, D] float32,
    spirula/engine/splat/param_layout.py), ``w2c`` [4, 4], ``fx, fy, cx, cy``, ``width``, ``height``
    and ``gt`` [H, W, 3] uint8. Depths 2..12, 10% of the centres outside the view, screen
    footprint of a few pixels (log-normal), random rotations, opacities and SH."""
    from ...splat.param_layout import pack, sh_coeffs

    rng = np.random.default_rng(seed)
    f = 0.9 * width
    z = rng.uniform(2.0, 12.0, n)
    x = rng.uniform(-0.55, 0.55, n) * (width / f) * z
    y = rng.uniform(-0.55, 0.55, n) * (height / f) * z
    means = np.stack([x, y, z], axis=1)
    log_scales = np.log(0.0025 * z)[:, None] + rng.normal(0.0, 0.5, (n, 3))
    quats = rng.normal(0.0, 1.0, (n, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    logits = rng.normal(0.0, 1.5, n)
    k = sh_coeffs(sh_degree)
    sh = rng.normal(0.0, 0.25, (n, k, 3))
    rows = pack(means, log_scales, quats, logits, sh[:, 0], sh[:, 1:], sh_degree)
    gt = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    return {"rows": rows, "w2c": np.eye(4), "fx": f, "fy": f, "cx": width / 2.0, "cy": height / 2.0,
            "width": width, "height": height, "gt": gt}


def _stage_times(trace) -> dict[str, float]:
    """Trace of one iteration (kind, label, bytes, seconds) -> {stage: ms}."""
    from ...profile.profiler import KERNEL, SPAN

    out = dict.fromkeys(STAGES, 0.0)
    out["other"] = 0.0
    pending = 0.0  # memsets / copies: charged to the next kernel's stage
    for kind, label, _, dt in trace:
        if kind == SPAN:
            continue
        if kind != KERNEL:
            pending += dt
            continue
        st = _STAGE_OF.get(label.rpartition(":")[2], "other")
        out[st] += (dt + pending) * 1e3
        pending = 0.0
    out["other"] += pending * 1e3
    return out


def bench_raster(gpu, gaussians: int = 2_000_000, width: int = 1237, height: int = 822, sh_degree: int = 3,
                 iters: int = 20, warmup: int = 3, seed: int = 0, progress=None,
                 bandwidth_bytes: int | None = None) -> dict:
    """Run the raster benchmark on ``gpu``; returns the JSON-ready result.
    ``bandwidth_bytes``: size of the bandwidth probe (default 256 MiB, 16 MiB on a software
    device; spirula/engine/cli/bench/floor_report.py measure_bandwidth)."""
    from ... import profile
    from . import compute_floors, floor_report, floors
    from ...splat.camera_table import View, camera_row
    from ...splat.loss import PhotometricLoss
    from ...splat.model import GaussianModel
    from ...splat.render import Rasterizer
    from ...splat.trainer import pack_rgba8

    bandwidth = floor_report.measure_bandwidth(gpu, bandwidth_bytes)
    flop_rate = compute_floors.measure_flops(gpu)
    t_setup = time.perf_counter()
    sc = synthetic_scene(gaussians, width, height, sh_degree, seed)
    was_on = profile.enabled()
    profile.enable(text=False, at_exit=False)  # per-dispatch timestamps; prints nothing unless --profile
    prof = gpu.prof
    model = GaussianModel(gpu, sc["rows"], sh_degree)
    model.set_learning_rates(1.6e-4, 5e-3, 1e-3, 5e-2, 2.5e-3, 2.5e-3 / 20)
    raster = Rasterizer(gpu, sh_degree)
    loss = PhotometricLoss(gpu, arena=raster.arena)
    cams = gpu.upload(camera_row(sc["w2c"], sc["fx"], sc["fy"], sc["cx"], sc["cy"], width, height)[None], "bench.camera")
    gt = gpu.upload(pack_rgba8(sc["gt"]), "gt.bench")
    loss_sum = gpu.zeros(16, "loss_sum")
    view = View(0, width, height)
    setup_s = time.perf_counter() - t_setup
    stages: dict[str, list[float]] = {k: [] for k in (*STAGES, "other")}
    per_kernel: dict[str, list[float]] = {}
    gpu_ms, wall_ms, isects = [], [], []
    ops: list[list[tuple[str, float, int]]] = []  # per timed iteration: (name, seconds, bytes moved) in order
    from ...profile.profiler import COPY, KERNEL, MEMSET, SPAN

    for it in range(warmup + iters):
        prof.trace = []
        t0 = time.perf_counter()
        m = raster.prepare(model.buf["params"], model.n, cams, view, sh_degree)
        enc = gpu.encoder()
        raster.record_forward(enc, backward=True)
        loss.record(enc, raster.image, gt, width, height, raster.image_grad(), loss_sum, 0.2)
        raster.record_backward(enc, None, model.buf["grad2d_sum"], model.buf["vis_count"], True,
                               optimizer=model.adam_args(step=it))
        gpu.submit(enc)
        gpu.wait_idle()
        t1 = time.perf_counter()
        trace, prof.trace = prof.trace, None
        if it < warmup:
            continue
        wall_ms.append((t1 - t0) * 1e3)
        isects.append(m)
        gpu_ms.append(sum(dt for kind, _, _, dt in trace if kind == SPAN) * 1e3)
        for k, v in _stage_times(trace).items():
            stages[k].append(v)
        it_k: dict[str, float] = {}
        for kind, label, _, dt in trace:
            if kind == KERNEL:
                it_k[label] = it_k.get(label, 0.0) + dt * 1e3
        for k, v in it_k.items():
            per_kernel.setdefault(k, []).append(v)
        ops.append([(label.rpartition(":")[2] if kind == KERNEL else label, dt,
                     2 * nb if kind == COPY else nb if kind == MEMSET else 0)
                    for kind, label, nb, dt in trace if kind != SPAN])
        if progress is not None:
            progress(it + 1 - warmup, iters)
    gpu.wait_idle()
    # the FP32 probe again: a GPU slower during the loop than before it (lower clocks,
    # another process) shows here; some H200 runs had every kernel 1.6-3.6x slower with
    # normal probes before the loop (docs/benchmarks-history.md, tenth session)
    flop_rate_after = compute_floors.measure_flops(gpu)
    visible, replayed, pairs = _raster_counts(raster, model.n, view)
    work = floors.Workload(n=model.n, max_sh_degree=sh_degree, sh_degree=sh_degree, visible=visible,
                           intersections=raster.m, width=width, height=height, replayed=replayed,
                           sort_tile=raster.sort.tile, scan_tile=raster.scan.tile)
    floor_rep = floor_report.floor_report(work, ops, bandwidth["gb_per_s"])
    by_name = {r["name"]: r for r in floor_rep["kernels"]}
    composited = compute_floors.composited_count(gpu, raster, view) if not raster.bands else None
    lane_sets = (compute_floors.lane_set_counts(gpu, raster, view)
                 if not raster.bands and raster.backward_pixels_per_thread == 2 else None)
    compute_rep = compute_floors.compute_report(
        pairs, {k: by_name[k]["ms"] for k in compute_floors.KERNELS if k in by_name}, flop_rate,
        {k: by_name[k]["ratio"] for k in compute_floors.KERNELS if k in by_name}, composited, lane_sets)
    raster.trim()
    vram = gpu.pool.stats()
    if not was_on:
        profile.disable()
    return {
        "bench": "raster", "device": gpu.adapter, "backend": gpu.backend,
        "gaussians": gaussians, "width": width, "height": height, "sh_degree": sh_degree,
        "iters": iters, "warmup": warmup, "seed": seed, "intersections": int(np.median(isects)) if isects else None,
        "stages_ms": {k: _median(v) for k, v in stages.items()},
        "iteration_gpu_ms": _median(gpu_ms), "iteration_wall_ms": _median(wall_ms),
        "iteration_gpu_ms_each": gpu_ms,
        "flop_rate_after_over_before": flop_rate_after["flop_per_s"] / flop_rate["flop_per_s"],
        "kernels_ms_per_iteration": dict(sorted(((k.rpartition(":")[2], _median(v)) for k, v in per_kernel.items()),
                                                key=lambda kv: -kv[1])),
        "vram_high_water_mib": vram["total"]["high_water_mib"],
        "aliasing_saved_mib": vram["aliasing_saved_mib"], "setup_s": setup_s,
        "bandwidth": bandwidth, "floors": floor_rep, "compute_floors": compute_rep,
        "note": "stage = median over iterations of the summed per-dispatch GPU time (timestamps); "
                "memsets/copies count toward the next kernel's stage",
    }


def _raster_counts(raster, n: int, view) -> tuple[int, int, int]:
    """Of the last rendered iteration: V, the Gaussians with tiles_touched > 0; R, the
    intersections rasterize_backward replays (per tile, min(range length, largest last
    contributor index of its pixels)); and the compulsory pixel-splat pairs of both
    rasterizers, the sum of last_index over the pixels (compute_floors.pair_count, int64).
    Host reads after the timed loop (reporting only)."""
    from ...splat.camera_table import TILE
    from .compute_floors import pair_count

    visible = int(np.count_nonzero(raster.read("tiles_touched", np.uint32)[:n]))
    tx, ty = view.tiles_x, view.tiles_y
    last = np.zeros((ty * TILE, tx * TILE), np.uint32)  # padded to whole tiles with 0 (no pairs)
    last[:view.height, :view.width] = raster.read("last_index", np.uint32, shape=(view.height, view.width))
    max_last = last.reshape(ty, TILE, tx, TILE).max(axis=(1, 3)).reshape(-1).astype(np.int64)
    ranges = raster.read("ranges", np.uint32, shape=(tx * ty, 2)).astype(np.int64)
    return visible, int(np.minimum(max_last, ranges[:, 1] - ranges[:, 0]).sum()), pair_count(last)


def bench_train(gpu, data: Path | None = None, steps: int = 1000, max_size: int = 0, init_points: int = 100_000,
                seed: int = 0, progress=None) -> dict:
    """Train ``steps`` steps on the sample (3DGS defaults otherwise); no evaluation or export.

    ``sec_per_1k_steps`` counts every step, the first ones' kernel compiles included (nvrtc on
    CUDA, the driver's on Vulkan: seconds); ``steady_sec_per_1k_steps`` counts only the steps
    after the first fifth (log points' clock), which is the rate a long run trains at."""
    from ...config import TrainConfig
    from ...ingest import load_dataset
    from ...splat.trainer import Trainer

    from ...jobs.selftest import sample_dir

    data = Path(data) if data is not None else sample_dir()  # the checkout's or the installed sample
    t0 = time.perf_counter()
    ds = load_dataset(data, max_size if max_size > 0 else None)
    train_idx, _ = ds.split(8)
    cfg = TrainConfig(steps=steps, seed=seed, init_random_points=init_points, log_interval=25)
    trainer = Trainer(gpu, ds, train_idx, cfg)
    marks: list[tuple[int, float]] = []

    def on_progress(p):
        marks.append((p.step, time.perf_counter()))
        if progress is not None:
            progress(p)

    t1 = time.perf_counter()
    state = trainer.train(on_progress=on_progress)
    t2 = time.perf_counter()
    later = [m for m in marks if m[0] >= state.step // 5]
    steady = (1000.0 * (t2 - later[0][1]) / (state.step - later[0][0])
              if later and state.step > later[0][0] else None)
    cams = [ds.cameras[i] for i in train_idx]
    return {
        "bench": "train", "device": gpu.adapter, "backend": gpu.backend, "data": str(data),
        "images": len(train_idx), "image_size": [int(cams[0].width), int(cams[0].height)],
        "steps": state.step, "seed": seed, "init_points": init_points,
        "train_s": t2 - t1, "sec_per_1k_steps": 1000.0 * (t2 - t1) / max(state.step, 1),
        "steady_sec_per_1k_steps": steady,
        "setup_s": t1 - t0, "final_loss": state.history[-1]["loss"] if state.history else None,
        "num_gaussians": trainer.model.n, "profiling": gpu.prof is not None,
        "vram_high_water_mib": gpu.pool.stats()["total"]["high_water_mib"],
        "loss_curve": [[h["step"], h["loss"]] for h in state.history],
    }


# --- command line ---------------------------------------------------------------------------------
def add_parser(sub) -> None:
    """``spirula bench raster|train|viewer|studio|mesh`` (called by spirula/engine/cli/main.py)."""
    from ..options import add_device_option, image_side, int_at_least
    from . import mesh_steps, studio_fps, viewer_fps
    from .scene_args import add_scene_options

    p = sub.add_parser("bench", help="fixed-workload benchmarks (JSON output)")
    bs = p.add_subparsers(dest="bench", required=True)
    r = bs.add_parser("raster", help="synthetic scene: projection, binning+sort, rasterize fwd/bwd, projection bwd + Adam")
    add_scene_options(r, 2_000_000, 1237, 822, "image", ("--iters", 20, "timed iterations after warm-up", "iterations"))
    r.add_argument("--bandwidth-mib", type=int_at_least(1), default=None,
                   help="size of the bandwidth probe (default 256 MiB, 16 MiB on a software device)")
    t = bs.add_parser("train", help="short fixed training run on the embedded sample (fox)")
    t.add_argument("--data", type=Path, default=None, help="dataset folder (default resources/sample/fox)")
    t.add_argument("--steps", type=int_at_least(1), default=1000, help="training steps (default 1000)")
    t.add_argument("--max-size", type=image_side, default=0, help="longer image side in px (0 = as stored)")
    t.add_argument("--init-points", type=int_at_least(1), default=100_000, help="random initial points (default 100,000)")
    t.add_argument("--seed", type=int_at_least(0), default=0, help="random seed (default 0)")
    viewer_fps.add_parser(bs)
    studio_fps.add_parser(bs)
    mesh_steps.add_parser(bs)  # with `spirula mesh`'s options, --device included
    for name, q in bs.choices.items():
        if name != "mesh":
            add_device_option(q)
        q.add_argument("--json", type=Path, default=None, help="also write the result to this file")


def run(args) -> int:
    from ...device import get_gpu
    from .compute_floors import format_compute_floors
    from .floor_report import format_floors

    if args.bench == "mesh":  # the mesh job opens its device itself (MeshConfig.device)
        from . import mesh_steps

        return _report(args, *mesh_steps.run(args))
    if args.bench == "studio":  # the studio's engine thread opens the device itself, as in the window
        from . import studio_fps

        return _report(args, *studio_fps.run(args))
    gpu = get_gpu(args.device)
    if args.bench == "viewer":
        from . import viewer_fps

        return _report(args, *viewer_fps.run(gpu, args))
    if args.bench == "raster":
        res = bench_raster(gpu, args.gaussians, args.width, args.height, args.sh_degree, args.iters, args.warmup,
                           args.seed, progress=lambda i, n: print(f"\r  iteration {i}/{n}", end="", file=sys.stderr),
                           bandwidth_bytes=args.bandwidth_mib << 20 if args.bandwidth_mib else None)
        print(file=sys.stderr)
        lines = [f"bench raster on {res['device']}: {res['gaussians']:,} Gaussians, {res['width']}x{res['height']}, "
                 f"SH {res['sh_degree']}, {res['intersections']:,} intersections; median of {res['iters']} iterations"]
        lines += [f"  {k:22s}{v:10.3f} ms" for k, v in res["stages_ms"].items() if v is not None]
        lines += [f"  {'iteration (GPU span)':22s}{res['iteration_gpu_ms']:10.3f} ms",
                  f"  {'iteration (wall)':22s}{res['iteration_wall_ms']:10.3f} ms",
                  "memory-traffic floors (spirula/engine/cli/bench/floors.py; floor = compulsory bytes / measured bandwidth):"]
        lines += format_floors(res["floors"], res["bandwidth"])
        lines.append("compute floors of the rasterizers (spirula/engine/cli/bench/compute_floors.py; floor = pixel-splat pairs "
                     "x FP32 FLOPs per pair / measured FP32 rate):")
        lines += format_compute_floors(res["compute_floors"])
        drift = res["flop_rate_after_over_before"]
        if not 0.8 <= drift <= 1.25:
            lines.append(f"warning: the FP32 probe after the timed loop ran at {drift:.0%} of its rate before it: "
                         "the GPU's speed changed during this run (clocks, or another process on it); "
                         "its times are not comparable with other runs")
    else:
        res = bench_train(gpu, args.data, args.steps, args.max_size, args.init_points, args.seed,
                          progress=lambda p: print(f"\r  step {p.step}/{p.steps} loss {p.loss:.4f}", end="", file=sys.stderr))
        print(file=sys.stderr)
        lines = [f"bench train on {res['device']}: {res['steps']} steps, {res['images']} images "
                 f"{res['image_size'][0]}x{res['image_size'][1]}: {res['sec_per_1k_steps']:.2f} s / 1k steps "
                 f"({_steady(res)}), "
                 f"final loss {res['final_loss']:.4f}, {res['num_gaussians']:,} Gaussians, "
                 f"pool high-water {res['vram_high_water_mib']:.1f} MiB"]
    return _report(args, res, lines)


def _steady(res: dict) -> str:
    s = res.get("steady_sec_per_1k_steps")
    return "no steady rate: too few steps" if s is None else f"{s:.2f} after the first fifth, compiles excluded"


def _report(args, res: dict, lines: list[str]) -> int:
    """The summary lines to stderr, the JSON to stdout (and to --json)."""
    from ...fileio import write_json_atomic

    print("\n".join(lines), file=sys.stderr)
    if args.json is not None:
        write_json_atomic(args.json, res)
    print(json.dumps(res))
    return 0


def _median(v):
    return float(np.median(v)) if len(v) else None
