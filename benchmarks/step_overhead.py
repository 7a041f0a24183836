"""Where a training step's wall time goes, on a prepared dataset (GPU machine).

Trains ``--warm`` steps with the default schedule (so the model has its densified size),
stops densifying, then times ``--steps`` more and splits each step into:
  * host: Python time inside ``Trainer.train_step`` minus the time blocked in the step
    pipeline's wait (recording, binding, submitting);
  * blocked: time waiting for the previous step's submission;
  * gpu: GPU time of the step's command buffer (timestamps at its start and end);
counts the dispatches of one step, and gives each kernel's GPU time per step from a
separate profiled window of 100 steps. Prints one ``RESULT {json}`` line.

    python benchmarks/step_overhead.py --data .gpu/data/fox --device vulkan
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import slangpy as spy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_bench import as_dataset, load_prepared, parity_points, split  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--device", default="vulkan")
    ap.add_argument("--warm", type=int, default=1500)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--window", type=int, default=100, help="steps of each profiled window")
    ap.add_argument("--tile-stats", action="store_true",
                    help="per-tile replay lengths of the training views (is the backward bound by its longest tiles?)")
    ap.add_argument("--splits", default="",
                    help="comma-separated workgroups per tile of the rasterize backward to compare after the "
                         "main window (Rasterizer.backward_splits), e.g. '2,4,8': a profiled window each")
    ap.add_argument("--variants", default="",
                    help="comma-separated link-time constants to compare after the main window, e.g. "
                         "'NAME=0,NAME=1' for an `extern static const` NAME of rasterize_backward, "
                         "'adam:NAME=16' of project_backward_adam ('+' joins several): a profiled window each "
                         "(the backward's PY goes through --pixels-per-thread)")
    ap.add_argument("--pixels-per-thread", default="",
                    help="comma-separated pixels per thread of rasterize_backward to compare (PY in "
                         "raster.slang; Rasterizer.set_backward_pixels_per_thread): a profiled window each")
    ap.add_argument("--sort-items", default="",
                    help="comma-separated items per thread of the rasterizer's radix sort and scan to compare "
                         "(tiles of 256 x items; the default is 16): a profiled window each")
    ap.add_argument("--adam-moments", choices=["fp32", "bf16"], default="fp32",
                    help="the Adam moments' storage of the whole run (TrainConfig.adam_moments)")
    args = ap.parse_args()

    from spirula.engine.config import TrainConfig
    from spirula.engine.device import get_gpu
    from spirula.engine.splat.trainer import Trainer

    cams, images, pts, cols = load_prepared(args.data)
    ds = as_dataset(args.data, cams, images, *parity_points(args.data, cams, images, pts, cols))  # as before: fixed points
    train_idx, _ = split(len(ds.cameras))
    gpu = get_gpu(args.device)
    tr = Trainer(gpu, ds, train_idx, TrainConfig(steps=args.warm + args.steps, log_interval=100,
                                                    adam_moments=args.adam_moments))
    for s in range(args.warm):
        tr.train_step(s)
    tr.drain()
    tr.cfg.densify_until = 0  # steady state: no densification in the timed window

    pool = gpu.device.create_query_pool(type=spy.QueryType.timestamp, count=2 * args.steps)
    blocked = [0.0]
    inner_wait = tr.pipeline.wait

    def timed_wait(sid):
        t = time.perf_counter()
        inner_wait(sid)
        blocked[0] += time.perf_counter() - t

    tr.pipeline.wait = timed_wait
    raw_encoder, raw_submit = gpu.encoder, gpu.submit
    step_index = [0]

    def encoder():
        enc = raw_encoder()
        enc.write_timestamp(pool, 2 * step_index[0])
        return enc

    def submit(enc):
        enc.write_timestamp(pool, 2 * step_index[0] + 1)
        return raw_submit(enc)

    counts: dict[str, int] = {}
    for k in gpu._kernels.values():  # count one step's dispatches (through the plain path)
        def counting(*a, _f=k.dispatch, _n=k.name, **kw):
            counts[_n] = counts.get(_n, 0) + 1
            return _f(*a, **kw)
        k.dispatch, k.profiled = counting, True
    tr.train_step(args.warm)
    tr.drain()
    for k in gpu._kernels.values():
        k.dispatch, k.profiled = k.raw.dispatch, False

    gpu.encoder, gpu.submit = encoder, submit
    host, wall = [], []
    t_all = time.perf_counter()
    for i in range(args.steps):
        step_index[0] = i
        blocked[0] = 0.0
        t = time.perf_counter()
        tr.train_step(args.warm + 1 + i)
        dt = time.perf_counter() - t
        wall.append(dt)
        host.append(dt - blocked[0])
    tr.drain()
    total = time.perf_counter() - t_all
    gpu.encoder, gpu.submit = raw_encoder, raw_submit
    ts = np.array(pool.get_timestamp_results(0, 2 * args.steps)).reshape(-1, 2)
    gpu_ms = (ts[:, 1] - ts[:, 0]) * 1e3
    out = {"dataset": args.data.name, "device": args.device, "gpu": gpu.adapter, "gaussians": tr.model.n,
           "intersections": tr.pipeline.last_count, "overflowed_steps": tr.pipeline.overflows,
           "dispatches_per_step": sum(counts.values()), "dispatch_counts": counts,
           "wall_ms_per_step": 1e3 * total / args.steps,
           "host_ms_median": 1e3 * float(np.median(host)), "blocked_ms_median": 1e3 * float(np.median(np.subtract(wall, host))),
           "gpu_ms_median": float(np.median(gpu_ms)), "gpu_ms_p90": float(np.percentile(gpu_ms, 90))}
    # per-kernel GPU time per step (profiler's timestamps, a separate window of 100 steps)
    s0 = args.warm + 1 + args.steps
    out.update(profiled_window(gpu, tr, s0, args.window))
    print("RESULT " + json.dumps(out), flush=True)
    if args.tile_stats:
        print("TILES " + json.dumps({"dataset": args.data.name, **tile_stats(tr, train_idx)}), flush=True)
    compared = [({"backward_splits": int(k)}, None) for k in filter(None, args.splits.split(","))]
    compared += [({"sort_items": int(k)}, None) for k in filter(None, args.sort_items.split(","))]
    compared += [({"pixels_per_thread": int(k)}, None) for k in filter(None, args.pixels_per_thread.split(","))]
    compared += [({}, {kv.split("=")[0]: int(kv.split("=")[1]) for kv in v.split("+")})
                 for v in filter(None, args.variants.split(","))]
    from spirula.engine.splat.sort import RadixSort, Scan

    default_splits, default_sort, default_scan = tr.raster.backward_splits, tr.raster.sort, tr.raster.scan
    default_py = tr.raster.backward_pixels_per_thread
    for attrs, consts in compared:  # each against the default build, one change at a time
        consts = consts or {}
        tr.raster.backward_splits = attrs.get("backward_splits", default_splits)
        items = attrs.get("sort_items")
        tr.raster.sort = RadixSort(gpu, items_per_thread=items) if items else default_sort
        tr.raster.scan = Scan(gpu, items_per_thread=items) if items else default_scan
        tr.raster.adam_constants = {k[5:]: v for k, v in consts.items() if k.startswith("adam:")}
        tr.raster.set_backward_pixels_per_thread(attrs.get("pixels_per_thread", default_py))
        backward_consts = {k: v for k, v in consts.items() if not k.startswith("adam:")}
        if backward_consts:
            tr.raster.k_bwd = gpu.kernel("raster/raster", "rasterize_backward",
                                         PY=tr.raster.backward_pixels_per_thread, **backward_consts)
        s0 += args.window
        tr.train_step(s0)  # compile outside the window
        tr.drain()
        s0 += 1
        res = profiled_window(gpu, tr, s0, args.window)
        print("VARIANT " + json.dumps({"dataset": args.data.name, "variant": {**attrs, **consts}, "gaussians": tr.model.n,
                                        "intersections": tr.pipeline.last_count, **res}), flush=True)


def tile_stats(tr, views) -> dict:
    """Per 16x16 tile of each training view: the list length and the replayed length (the
    largest last index of its pixels, where the backward starts). Summed over the views;
    the longest tiles bound a kernel that walks each tile's list serially."""
    from spirula.engine.splat.camera_table import View

    lens, replayed = [], []
    for i in views:
        tr.render(i)
        cam = tr.dataset.cameras[i]
        v = View(i, cam.width, cam.height)
        ranges = tr.raster.read("ranges", np.uint32, shape=(v.tiles_y * v.tiles_x, 2))
        last = tr.raster.read("last_index", np.uint32, shape=(v.height, v.width))
        pad = np.zeros((v.tiles_y * 16, v.tiles_x * 16), np.uint32)
        pad[:v.height, :v.width] = last
        tile_last = pad.reshape(v.tiles_y, 16, v.tiles_x, 16).max(axis=(1, 3)).ravel()
        lens.append((ranges[:, 1] - ranges[:, 0]).astype(np.int64))
        replayed.append(tile_last.astype(np.int64))
    per_view_max = [int(r.max()) for r in replayed]
    lens, replayed = np.concatenate(lens), np.concatenate(replayed)
    q = lambda a: {p: int(np.percentile(a, p)) for p in (50, 90, 99, 100)}
    return {"views": len(views), "tiles_per_view": int(len(lens) / len(views)),
            "list_len_percentiles": q(lens), "replayed_percentiles": q(replayed),
            "replayed_mean": float(replayed.mean()), "replayed_max_per_view_mean": float(np.mean(per_view_max))}


def profiled_window(gpu, tr, s0: int, steps: int = 100) -> dict:
    """Per-kernel GPU µs per step over ``steps`` training steps from step ``s0`` (the
    profiler's timestamps)."""
    from spirula.engine import profile

    profile.enable(text=False, at_exit=False)
    for i in range(steps):
        tr.train_step(s0 + i)
    tr.drain()
    gpu.wait_idle()
    rep = profile.report(finish=False)["devices"][0]
    profile.disable()
    return {"kernels_us_per_step": {k["name"]: round(1e3 * k["total_ms"] / steps, 1) for k in rep["kernels"]},
            "profiled_gpu_exec_ms_per_step": rep["timing"]["gpu_exec_ms"] / steps}


if __name__ == "__main__":
    main()
