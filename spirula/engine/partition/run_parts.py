"""Train every part of a partition (`spirula partition train <parts>`), each as a Ray task.

Ray (the optional extra ``pip install 'spirula-studio[distributed]'``):

* no address: a local Ray instance is started inside this process (``ray.init()``: one
  machine, all its GPUs and CPUs) and shut down at the end; an address (``ray://host:port``,
  ``host:port`` or ``auto``) joins an existing cluster, whose nodes must see the parts
  folder at the same path (a shared file system) and have the project installed.
* resources: each task asks for ``gpus_per_part`` GPUs (default 1 where the cluster has
  GPUs; a fraction lets several parts share one GPU) and one CPU; on a machine without
  GPUs (software Vulkan, lavapipe) the tasks ask for none.
* without Ray the parts are trained one after another in this process, after a warning
  that says how to install it. Both paths run the same :func:`train_part`.

Per part, the whole scene's settings are scaled by the part's share of the scene
(:func:`part_config`): MCMC's exact budget by its region's share of the SfM points, the
steps by its share of the training cameras, so each Gaussian gets as many optimisation
steps as in the whole-scene run. Held-out views are
the whole scene's (kept out of every part at the split), so a part holds out none.

What a part writes, all atomically, into ``<part>/train/``: the training run's files
(spirula/engine/jobs/train.py: splat.ply, checkpoints/train.npz, metrics.json, train.json),
``progress.json`` (step, steps, loss, Gaussians; at most twice a second) and, when it
has finished every step, ``part.json`` (the metrics and the peak VRAM of the VRAM pool's
accounting, spirula/engine/profile/pool.py). A rerun skips the parts with a ``part.json`` and
resumes the others from their checkpoints (every ``checkpoint_every`` steps). A stop
(``should_stop``) writes ``<part>/train/STOP``, which each running part checks between
steps: it checkpoints and ends; the next run removes the file and resumes.

Progress reaches ``emit`` as spirula.engine.messages: StageStarted / StageProgress /
StageFinished with the part's name as the stage (one bar per part in the CLI, one row per
part in the studio), Warning for what a part said that starts with "warning".
"""

from __future__ import annotations

import copy
import json
import math
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from ..config import RunConfig
from ..fileio import write_json_atomic
from ..messages import Done, Emit, Error, StageFinished, StageProgress, StageStarted, Warning, ignore
from .parts_layout import Layout, PartInfo, read_layout

INSTALL_HINT = ("pip install 'spirula-studio[distributed]'; from a source checkout: "
                ".venv/bin/pip install '.[distributed]'")
MIN_PART_STEPS = 100
# the training settings a partitioned run decides itself (spirula/engine/settings.py names): MCMC (an
# exact budget to share between the parts), nothing held out (the split holds out the whole
# scene's views)
FIXED_SETTINGS = {"strategy": "mcmc", "eval_every": 0}
POLL_S = 0.5


STEP_RULES = ("cameras", "gaussians")


def part_config(layout: Layout, part: PartInfo, cfg: RunConfig, steps_rule: str = "cameras") -> RunConfig:
    """The part's RunConfig: ``cfg`` (the whole scene's) with MCMC, its budget times the
    part's share of the Gaussians, no held-out views, and its steps: ``steps_rule``
    "cameras" (default) the whole scene's times the part's share of the training cameras,
    so each Gaussian gets as many optimisation steps as in the whole-scene run (a step
    trains one camera's Gaussians); "gaussians" times the Gaussians' share (the same total
    steps over all parts, bar the overlap). At least MIN_PART_STEPS steps."""
    if steps_rule not in STEP_RULES:
        raise ValueError(f"steps_rule must be one of {STEP_RULES}, not {steps_rule!r}")
    total = max(int(layout.settings.get("total_gaussians", 1)), 1)
    share = part.gaussians / total
    cams = len(part.cameras) / max(layout.train_cameras, 1) if layout.train_cameras else share
    c = copy.deepcopy(cfg)
    c.dataset.eval_every = 0
    c.train.strategy = "mcmc"
    c.train.mcmc_budget = max(int(round(cfg.train.mcmc_budget * share)), 1)
    c.train.max_gaussians = max(c.train.max_gaussians, c.train.mcmc_budget)
    c.train.steps = max(int(math.ceil(cfg.train.steps * (cams if steps_rule == "cameras" else share))), MIN_PART_STEPS)
    c.train.eval_interval = 0
    return c


def is_done(part_dir: Path) -> bool:
    """The part finished every step (its part.json exists)."""
    return (Path(part_dir) / "train" / "part.json").is_file()


def train_part(part_dir: str, cfg_dict: dict, stop_file: str | None = None) -> dict:
    """Train the part dataset at ``part_dir`` into ``<part_dir>/train`` (a Ray task or a
    plain call). ``cfg_dict``: RunConfig.to_dict(). Returns part.json's content
    ({"done", "skipped", "metrics", "peak_vram_mib", "seconds"}); a stopped part returns
    done False."""
    from ..config import DatasetConfig, TrainConfig
    from ..device import get_gpu
    from ..jobs.train import run_training

    part = Path(part_dir)
    out = part / "train"
    if is_done(part):
        return {**json.loads((out / "part.json").read_text(encoding="utf-8")), "skipped": True}
    cfg = RunConfig(device=cfg_dict["device"], dataset=DatasetConfig(**cfg_dict["dataset"]),
                    train=TrainConfig(**{**cfg_dict["train"], "background": tuple(cfg_dict["train"]["background"])}))
    stop = Path(stop_file) if stop_file else None
    gpu = get_gpu(cfg.device)
    gpu.pool.reset_high()
    last = [0.0, 0.0]  # time of the last progress write, of the last stop check
    log = []

    def on_progress(p) -> None:
        now = time.monotonic()
        if now - last[0] >= POLL_S or p.step >= p.steps:
            last[0] = now
            write_json_atomic(out / "progress.json", {"step": p.step, "steps": p.steps, "loss": p.loss,
                                                      "gaussians": p.num_gaussians, "steps_per_sec": p.steps_per_sec})

    def should_stop() -> bool:
        now = time.monotonic()
        if stop is None or now - last[1] < 0.25:
            return False
        last[1] = now
        return stop.exists()

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    metrics = run_training(part, out, cfg, on_progress=on_progress, on_message=log.append, should_stop=should_stop,
                           resume="auto")
    result = {"done": not metrics["stopped_early"], "skipped": False, "metrics": metrics,
              "peak_vram_mib": gpu.pool.job_peak() / 2**20, "seconds": time.perf_counter() - t0,
              "config": asdict(cfg), "log": log}
    write_json_atomic(out / "progress.json", {"step": metrics["step"], "steps": cfg.train.steps,
                                              "loss": None, "gaussians": metrics["num_gaussians"]})
    if result["done"]:
        write_json_atomic(out / "part.json", result)
    return result


def train_parts(parts_dir: Path, cfg: RunConfig, address: str | None = None, emit: Emit = ignore,
                should_stop: Callable[[], bool] | None = None, gpus_per_part: float | None = None,
                use_ray: bool = True, steps_rule: str = "cameras") -> dict:
    """Train every unfinished part of ``parts_dir`` (module docstring). ``cfg``: the whole
    scene's settings. ``use_ray=False`` (or Ray missing) trains in this process, one part
    after another. Returns {"parts": {name: part.json content}, "ray": bool, "stopped": bool}."""
    from ..config import resolve_strategy

    layout = read_layout(parts_dir)
    if cfg.train.strategy == "auto" and resolve_strategy("auto", True, cfg.train.steps) != "mcmc":
        emit(Warning(f"parts always train with MCMC (its exact budget keeps each part's memory), which needs "
                     f"steps to grow from the SfM points: at {cfg.train.steps:,} steps a single `spirula train` "
                     f"would take ADC and score better; give the parts more steps"))
    jobs = []
    for p in layout.parts:
        d = layout.part_dir(p)
        c = part_config(layout, p, cfg, steps_rule)
        (d / "train" / "STOP").unlink(missing_ok=True)
        jobs.append((p, d, c))
        emit(StageStarted(p.name, c.train.steps, f"{len(p.cameras)} cameras, {c.train.mcmc_budget:,} Gaussians"))
    ray = _import_ray() if use_ray else None
    if use_ray and ray is None:
        emit(Warning(f"Ray is not installed ({INSTALL_HINT}): training the {len(jobs)} parts one after another "
                     "in this process"))
    if ray is None:
        results = _in_process(jobs, emit, should_stop)
    else:
        results = _with_ray(ray, jobs, address, gpus_per_part, emit, should_stop)
    stopped = any(not r.get("done") for r in results.values())
    summary = {"parts": results, "ray": ray is not None, "stopped": stopped}
    emit(Done({"parts": {k: {"done": v.get("done"), "peak_vram_mib": v.get("peak_vram_mib")} for k, v in results.items()},
               "stopped": stopped}))
    return summary


def _import_ray():
    try:
        import ray
    except ImportError:
        return None
    return ray


def _finish(p: PartInfo, result: dict, emit: Emit) -> None:
    for line in result.get("log", []):
        if line.startswith("warning"):
            emit(Warning(f"{p.name}: {line}"))
    m = result.get("metrics", {})
    emit(StageFinished(p.name, float(result.get("seconds", 0.0)),
                       {"done": result.get("done"), "step": m.get("step"), "gaussians": m.get("num_gaussians"),
                        "peak_vram_mib": result.get("peak_vram_mib")}, cached=bool(result.get("skipped"))))


def _progress(p: PartInfo, part_dir: Path, emit: Emit, seen: dict) -> None:
    path = part_dir / "train" / "progress.json"
    try:
        stamp = path.stat().st_mtime_ns
        if seen.get(p.name) == stamp:
            return
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # not written yet (or being replaced)
    seen[p.name] = stamp
    loss = "" if d.get("loss") is None else f"loss {d['loss']:.4f}, "
    emit(StageProgress(p.name, int(d["step"]), int(d["steps"]), f"{loss}{int(d.get('gaussians') or 0):,} Gaussians"))


def _in_process(jobs, emit, should_stop) -> dict:
    results = {}
    for p, d, c in jobs:
        if should_stop is not None and should_stop():
            break
        stop = d / "train" / "STOP"
        done = []

        def poll():  # progress and the stop, while the part trains on this thread
            while not done:
                _progress(p, d, emit, seen)
                if should_stop is not None and should_stop():
                    stop.parent.mkdir(parents=True, exist_ok=True)
                    stop.touch()
                time.sleep(POLL_S / 2)

        seen: dict = {}
        watcher = threading.Thread(target=poll, daemon=True)
        watcher.start()
        try:
            results[p.name] = train_part(str(d), c.to_dict(), str(stop))
        finally:
            done.append(True)
            watcher.join()
        _progress(p, d, emit, seen)
        _finish(p, results[p.name], emit)
    return results


def _with_ray(ray, jobs, address, gpus_per_part, emit, should_stop) -> dict:
    started = not ray.is_initialized()
    if started:
        local = {} if address else {"object_store_memory": 128 * 2**20}  # results are small; the outputs are files
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False, **local)
    try:
        gpus = float(ray.cluster_resources().get("GPU", 0.0))
        per = gpus_per_part if gpus_per_part is not None else (1.0 if gpus >= 1 else 0.0)
        if per > 0 and gpus == 0:
            emit(Warning(f"the Ray cluster has no GPU: the parts ask for none (not {per})"))
            per = 0.0
        task = ray.remote(num_gpus=per, num_cpus=1, max_retries=0)(train_part)
        pending = {}
        results = {}
        for p, d, c in jobs:
            if is_done(d):  # no task for a finished part
                results[p.name] = train_part(str(d), c.to_dict())
                _finish(p, results[p.name], emit)
                continue
            pending[task.remote(str(d), c.to_dict(), str(d / "train" / "STOP"))] = (p, d)
        seen: dict = {}
        asked = False
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for p, d in pending.values():
                _progress(p, d, emit, seen)
            if should_stop is not None and should_stop() and not asked:
                asked = True
                for p, d in pending.values():
                    (d / "train").mkdir(parents=True, exist_ok=True)
                    (d / "train" / "STOP").touch()
            for ref in ready:
                p, d = pending.pop(ref)
                try:
                    results[p.name] = ray.get(ref)
                except Exception as e:  # the task's error (RayTaskError wraps it): said, the others go on
                    cause = getattr(e, "cause", None) or e
                    results[p.name] = {"done": False, "error": f"{type(cause).__name__}: {cause}".splitlines()[0]}
                    emit(Error(f"{p.name}: {results[p.name]['error']}", str(d)))
                _progress(p, d, emit, seen)
                _finish(p, results[p.name], emit)
        return results
    finally:
        if started:
            ray.shutdown()
