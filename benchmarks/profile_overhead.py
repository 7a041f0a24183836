"""Overhead of the profiler on a short training run: profiling off vs on, interleaved.

Per configuration and repeat: wall time per step, host time per step (the step minus the
time spent in Gpu.read, which is where a step waits for the GPU), and the process CPU
time. Prints one JSON line per repeat and a summary (medians).

    python benchmarks/profile_overhead.py --steps 60 --repeats 3 [--data resources/sample/fox --max-size 120]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np


def run(gpu, ds, steps: int, on: bool, init_points: int) -> dict:
    from engine import profile
    from engine.config import TrainConfig
    from engine.splat.trainer import Trainer

    cfg = TrainConfig(steps=steps, log_interval=25, init_random_points=init_points, densify_from=steps + 1)
    trainer = Trainer(gpu, ds, list(range(len(ds.cameras))), cfg)
    gpu.wait_idle()
    if on:
        profile.enable(text=False, at_exit=False)
    read_s = [0.0]
    orig = gpu.read

    def timed_read(*a, **k):
        t = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            read_s[0] += time.perf_counter() - t

    gpu.read = timed_read
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for step in range(steps):
        trainer.train_step(step)
    t_end = time.perf_counter()
    gpu.wait_idle()
    t1 = time.perf_counter()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    del gpu.read
    queries = gpu.prof.queries if gpu.prof is not None else 0
    if on:
        profile.disable()
    return {"profiling": on, "steps": steps, "wall_ms_per_step": (t1 - t0) * 1e3 / steps,
            "host_ms_per_step": (t_end - t0 - read_s[0]) * 1e3 / steps,
            "cpu_s": (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime), "timestamp_queries": queries}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("resources/sample/fox"))
    ap.add_argument("--max-size", type=int, default=120)
    ap.add_argument("--init-points", type=int, default=5000)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="vulkan")
    a = ap.parse_args()
    from engine.device import get_gpu
    from engine.ingest import load_dataset

    gpu = get_gpu(a.device)
    ds = load_dataset(a.data, a.max_size)
    run(gpu, ds, 5, False, a.init_points)  # compile and warm up
    rows = []
    for r in range(a.repeats):
        for on in (False, True):
            row = run(gpu, ds, a.steps, on, a.init_points)
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {}
    for on in (False, True):
        sel = [x for x in rows if x["profiling"] == on]
        summary["on" if on else "off"] = {k: float(np.median([x[k] for x in sel]))
                                          for k in ("wall_ms_per_step", "host_ms_per_step", "cpu_s")}
    print("SUMMARY " + json.dumps({"device": gpu.adapter, **summary}))


if __name__ == "__main__":
    main()
