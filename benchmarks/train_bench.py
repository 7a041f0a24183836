"""One benchmark training run on the GPU machine: ours (Vulkan or CUDA) or gsplat 1.5.3,
on a folder made by prepare_data.py, under one protocol, the kernel-parity one: same
images, split (every 8th held out), initial points (the SfM points, or Spirula's random
init drawn once with seed 0: :func:`parity_points`), schedule (3DGS defaults) and metrics
code. Prints one JSON line. Peers at their own defaults, scored from their exported PLYs:
benchmarks/quality_bench.py.

gsplat 1.5.3's DefaultStrategy never applies its periodic opacity reset (gsplat #797), so
this harness applies the reset itself (every 3000 steps until 15000) so the reference
follows the classic 3DGS schedule.

    python benchmarks/train_bench.py --trainer ours-vulkan --data .gpu/data/fox --seed 0 --steps 7000

A gsplat run longer than one device command (native resolution, 30,000 steps) runs in
segments: ``--state FILE --segment-s S`` stops after the first step past S seconds of
timed training, saves everything the next steps depend on (parameters, Adam state, the
learning-rate schedule, the densification statistics, the image order and the generator)
to FILE and prints a ``PARTIAL`` line; the same command again resumes from FILE. The
final RESULT's time is the sum of the segments' timed loops, its peak VRAM the largest of
theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
from PIL import Image


def load_prepared(folder: Path):
    """(cameras, images, points [P,3], colors [P,3]) of a prepare_data.py folder; P = 0
    when the dataset has no SfM points."""
    meta = json.loads((folder / "cameras.json").read_text())
    pts = np.load(folder / "points.npz")
    cams = meta["cameras"]
    images = [np.asarray(Image.open(folder / c["file"]).convert("RGB")) for c in cams]
    return cams, images, pts["points"], pts["colors"]


def parity_points(folder: Path, cams, images, pts, cols, count: int = 100_000):
    """The inputs of the kernel-parity protocol: the SfM points when the folder has them,
    else Spirula's random init (spirula.engine.splat.init.initial_points over all cameras, count
    points, generator seed 0), the same for every trainer and seed."""
    if len(pts):
        return pts, cols
    from spirula.engine.splat.init import initial_points

    return initial_points(as_dataset(folder, cams, images, None, None), count, np.random.default_rng(0))


def commit_id() -> str:
    """$SPIRULA_COMMIT (the carried tree may have no, or a stale, .git), else git's short HEAD."""
    commit = os.environ.get("SPIRULA_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        except OSError:
            pass
    return commit


def write_gsplat_ply(path: Path, params, scale: float = 1.0, origin=None) -> None:
    """gsplat's parameters (means, scales, quats, opacities, sh0 [N,1,3], shN [N,K,3]) as a
    3DGS PLY in our world: x = x_trained / scale + origin, log scales - log(scale) (for a
    run trained in a scaled, shifted copy of our world; rotations are unchanged)."""
    from spirula.engine.io.ply import write_ply

    p = {k: v.detach().float().cpu().numpy() for k, v in params.items()}
    means = p["means"] / scale + (0.0 if origin is None else np.asarray(origin, np.float64))
    write_ply(path, {"means": means, "scales": p["scales"] - np.log(scale), "quats": p["quats"],
                     "opacities": p["opacities"], "sh0": p["sh0"][:, 0], "shN": p["shN"]})


class VramSampler:
    """Peak device memory used by this process's GPU work: NVML used-memory minus the
    baseline at start, sampled every 5 ms (works for Vulkan and CUDA alike), on NVML device
    ``$BENCH_NVML_INDEX`` (default 0; on a machine of several GPUs, the one the run was sent
    to: ``CUDA_VISIBLE_DEVICES`` for gsplat, ``SPIRULA_ADAPTER`` for ours; the result's
    ``nvml_devices_used`` checks it)."""

    def __init__(self):
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.index = int(os.environ.get("BENCH_NVML_INDEX", "0"))
        self.h = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        self.base = self._used()
        self.peak = 0
        self._stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _used(self):
        return self.nvml.nvmlDeviceGetMemoryInfo(self.h).used

    def _run(self):
        while not self._stop:
            self.peak = max(self.peak, self._used() - self.base)
            time.sleep(0.005)

    def stop(self) -> float:
        self._stop = True
        self.t.join()
        return self.peak / 2**20

    def devices_used(self) -> list[int]:
        """NVML indices of the GPUs that list this process (compute or graphics)."""
        nv, pid, used = self.nvml, os.getpid(), []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            procs = []
            for query in (nv.nvmlDeviceGetComputeRunningProcesses, nv.nvmlDeviceGetGraphicsRunningProcesses):
                try:
                    procs += query(h)
                except nv.NVMLError:
                    pass
            if any(p.pid == pid for p in procs):
                used.append(i)
        return used


def as_dataset(folder: Path, cams, images, pts, cols):
    """Our Dataset of a prepared folder's contents (from :func:`load_prepared`)."""
    from spirula.engine.ingest.dataset import Camera, Dataset

    cameras = [Camera(name=c["name"], image_path=Path(c["file"]), width=c["width"], height=c["height"], fx=c["fx"],
                      fy=c["fy"], cx=c["cx"], cy=c["cy"], w2c=np.array(c["w2c"]), image=img)
               for c, img in zip(cams, images)]
    return Dataset(root=Path(folder), cameras=cameras, points=pts, colors=cols)


def split(n):
    test = list(range(0, n, 8))
    return [i for i in range(n) if i % 8 != 0], test


def run_ours(args, backend, cams, images, pts, cols, cfg=None, ply_out: Path | None = None, on_eval=None):
    """Our run: warm-up untimed, trainer.train() timed, then the held-out evaluation; with
    ``ply_out``, the trained model is exported there (spirula.engine.jobs.train.export_ply) first.
    ``cfg`` defaults to the 3DGS defaults at ``args.steps`` / ``args.seed``. ``on_eval(trainer,
    step)``: called every ``cfg.eval_interval`` steps (inside the timed region)."""
    from spirula.engine.config import TrainConfig
    from spirula.engine.device import get_gpu
    from spirula.engine.splat.evaluate import evaluate
    from spirula.engine.splat.trainer import Trainer

    ds = as_dataset(args.data, cams, images, pts, cols)
    train_idx, test_idx = split(len(ds.cameras))
    gpu = get_gpu(backend)
    if cfg is None:
        cfg = TrainConfig(steps=args.steps, seed=args.seed, log_interval=100, adam_moments=args.adam_moments)
    # warm-up: compile every kernel outside the timed region, on a throwaway model
    warm = Trainer(gpu, ds, train_idx, cfg)
    warm.train_step(0)
    gpu.device.wait_for_idle()
    del warm
    trainer = Trainer(gpu, ds, train_idx, cfg)
    if getattr(args, "eager_trim_mib", None) is not None:
        trainer.eager_trim_bytes = int(args.eager_trim_mib * 2**20)
    t0 = time.perf_counter()
    trainer.train(on_eval=None if on_eval is None else lambda step: on_eval(trainer, step))
    sec = time.perf_counter() - t0
    peak = args.sampler.stop() if args.sampler else None
    used = args.sampler.devices_used() if args.sampler else None
    pool = gpu.pool.stats(largest=12)  # before evaluation allocates its own buffers
    try:  # the driver-side heaps (staging, descriptors): what NVML sees beyond the pool
        heaps = [{"name": h.label, "pages": h.num_pages, "mib": h.total_mem_usage / 2**20}
                 for h in gpu.device.report_heaps()]
    except Exception as exc:  # noqa: BLE001 - a report, not a requirement
        heaps = [{"error": str(exc)}]
    if ply_out is not None:
        from spirula.engine.jobs.train import export_ply

        export_ply(trainer, ply_out)
    m = evaluate(trainer, test_idx)
    return {"psnr": m["psnr"], "ssim": m["ssim"], "seconds": sec, "peak_vram_mib": peak,
            "num_gaussians": trainer.model.n, "adapter": gpu.adapter,
            "overflowed_steps": trainer.pipeline.overflows, "heaps": heaps, "nvml_devices_used": used,
            "host_stats": trainer.host_stats, "last_intersections": trainer.pipeline.last_count,
            "pool": {"total": pool["total"], "categories": pool["categories"],
                     "largest_at_high_water": pool["largest_at_high_water"]}}


def run_gsplat(args, cams, images, pts, cols):
    import math

    import torch
    import torch.nn.functional as F
    from gsplat import rasterization
    from gsplat.strategy import DefaultStrategy
    from scipy.spatial import cKDTree

    from spirula.engine.splat.metrics import psnr, ssim

    import gsplat.cuda._backend  # noqa: F401 - builds or loads the CUDA extension (~60 s on a fresh machine) untimed
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    dev = "cuda"
    train_idx, test_idx = split(len(cams))
    centers = np.stack([-np.array(c["w2c"])[:3, :3].T @ np.array(c["w2c"])[:3, 3] for c in cams])
    extent = float(np.linalg.norm(centers - centers.mean(0), axis=1).max()) * 1.1
    d, _ = cKDTree(pts).query(pts, k=4)
    dist = np.maximum(d[:, 1:].mean(1), 1e-7)
    n = len(pts)
    C0 = 0.28209479177387814
    sh = torch.zeros(n, 16, 3)
    sh[:, 0] = (torch.tensor(cols, dtype=torch.float32) / 255 - 0.5) / C0
    params = torch.nn.ParameterDict({
        "means": torch.tensor(pts, dtype=torch.float32),
        "scales": torch.log(torch.tensor(dist, dtype=torch.float32))[:, None].repeat(1, 3),
        "quats": torch.tensor([[1.0, 0, 0, 0]]).repeat(n, 1),
        "opacities": torch.full((n,), math.log(0.1 / 0.9)),
        "sh0": sh[:, :1].clone(), "shN": sh[:, 1:].clone()}).to(dev)
    lrs = {"means": 1.6e-4 * extent, "scales": 5e-3, "quats": 1e-3, "opacities": 5e-2, "sh0": 2.5e-3, "shN": 2.5e-3 / 20}
    opts = {k: torch.optim.Adam([{"params": params[k], "lr": lr, "name": k}], eps=1e-15) for k, lr in lrs.items()}
    sched = torch.optim.lr_scheduler.ExponentialLR(opts["means"], gamma=0.01 ** (1.0 / args.steps))
    strategy = DefaultStrategy(refine_start_iter=500, refine_stop_iter=15000, reset_every=3000, refine_every=100)
    strategy.check_sanity(params, opts)
    state = strategy.initialize_state(scene_scale=extent)
    gts = [torch.tensor(im, device=dev, dtype=torch.float32) / 255 for im in images]
    Ks = [torch.tensor([[c["fx"], 0, c["cx"]], [0, c["fy"], c["cy"]], [0, 0, 1]], dtype=torch.float32, device=dev) for c in cams]
    viewmats = [torch.tensor(c["w2c"], dtype=torch.float32, device=dev) for c in cams]
    win = torch.exp(-((torch.arange(11, device=dev) - 5.0) ** 2) / (2 * 1.5 ** 2))
    win = (win / win.sum())
    w2d = (win[:, None] * win[None, :])[None, None].repeat(3, 1, 1, 1)

    def ssim_t(a, b):  # [1,3,H,W], zero padding, 11x11 Gaussian sigma 1.5
        mu_a, mu_b = F.conv2d(a, w2d, padding=5, groups=3), F.conv2d(b, w2d, padding=5, groups=3)
        saa = F.conv2d(a * a, w2d, padding=5, groups=3) - mu_a ** 2
        sbb = F.conv2d(b * b, w2d, padding=5, groups=3) - mu_b ** 2
        sab = F.conv2d(a * b, w2d, padding=5, groups=3) - mu_a * mu_b
        c1, c2 = 0.01 ** 2, 0.03 ** 2
        return (((2 * mu_a * mu_b + c1) * (2 * sab + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (saa + sbb + c2))).mean()

    def render(i, degree):
        c = cams[i]
        colors = torch.cat([params["sh0"], params["shN"]], 1)
        img, _, info = rasterization(params["means"], params["quats"], torch.exp(params["scales"]),
                                     torch.sigmoid(params["opacities"]), colors, viewmats[i][None], Ks[i][None],
                                     c["width"], c["height"], sh_degree=degree, packed=False)
        return img, info

    rng = np.random.default_rng(args.seed)
    order = []
    start, before = 0, {"seconds": 0.0, "peak_vram_mib": None}
    if args.state is not None and args.state.exists():
        start, order, before = load_gsplat_state(args.state, params, opts, sched, state, rng)
        print(f"resumed at step {start} from {args.state}", flush=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    step = start
    for step in range(start, args.steps):
        if args.segment_s and step > start and time.perf_counter() - t0 > args.segment_s:
            break
        if not order:
            order = list(rng.permutation(train_idx))
        i = int(order.pop())
        img, info = render(i, min(3, step // 1000))
        strategy.step_pre_backward(params, opts, state, step, info)
        pred = img[0]
        loss = 0.8 * (pred - gts[i]).abs().mean() + 0.2 * (1 - ssim_t(pred.permute(2, 0, 1)[None], gts[i].permute(2, 0, 1)[None]))
        loss.backward()
        for o in opts.values():
            o.step()
            o.zero_grad(set_to_none=True)
        sched.step()
        strategy.step_post_backward(params, opts, state, step, info, packed=False)
        # gsplat #797: its reset never fires; apply the classic 3DGS opacity reset here
        if (step + 1) % 3000 == 0 and step + 1 < 15000:
            from gsplat.strategy.ops import reset_opa
            reset_opa(params=params, optimizers=opts, state=state, value=0.01)
    else:
        step = args.steps
    torch.cuda.synchronize()
    sec = before["seconds"] + time.perf_counter() - t0
    peak = args.sampler.stop() if args.sampler else None
    used = args.sampler.devices_used() if args.sampler else None
    if before["peak_vram_mib"] is not None and peak is not None:
        peak = max(peak, before["peak_vram_mib"])
    if step < args.steps:  # the segment's time is up: save, report, stop
        save_gsplat_state(args.state, step, order, sec, peak, params, opts, sched, state, rng)
        return {"partial": True, "step": step, "seconds": sec, "peak_vram_mib": peak, "num_gaussians": len(params["means"])}
    if getattr(args, "ply_out", None) is not None:
        write_gsplat_ply(args.ply_out, params)
    ps, ss = [], []
    with torch.no_grad():
        for i in test_idx:
            img, _ = render(i, 3)
            a = img[0].clamp(0, 1).cpu().numpy()
            b = images[i].astype(np.float32) / 255
            ps.append(psnr(a, b))
            ss.append(ssim(a, b))
    return {"psnr": float(np.mean(ps)), "ssim": float(np.mean(ss)), "seconds": sec, "peak_vram_mib": peak,
            "torch_peak_mib": torch.cuda.max_memory_allocated() / 2**20, "num_gaussians": len(params["means"]),
            "adapter": torch.cuda.get_device_name(), "nvml_devices_used": used}


def save_gsplat_state(path: Path, step, order, seconds, peak, params, opts, sched, strategy_state, rng) -> None:
    """Everything gsplat's next step depends on, to ``path`` (written whole, then renamed)."""
    import torch

    blob = {"step": step, "order": [int(i) for i in order], "seconds": seconds, "peak_vram_mib": peak,
            "params": {k: v.detach() for k, v in params.items()},
            "opts": {k: o.state_dict() for k, o in opts.items()}, "sched": sched.state_dict(),
            "strategy": strategy_state, "rng": rng.bit_generator.state, "torch_rng": torch.cuda.get_rng_state()}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)


def load_gsplat_state(path: Path, params, opts, sched, strategy_state, rng):
    """Restore what :func:`save_gsplat_state` wrote into the freshly built objects (the
    parameters take the saved sizes: densification changed them); returns (step, order,
    {"seconds", "peak_vram_mib"} so far)."""
    import torch

    blob = torch.load(path, map_location="cuda", weights_only=False)
    for k, v in blob["params"].items():
        params[k] = torch.nn.Parameter(v)
    for k, o in opts.items():  # the groups point at the new tensors before the state is loaded
        o.param_groups[0]["params"] = [params[k]]
        o.state.clear()
        o.load_state_dict(blob["opts"][k])
    sched.load_state_dict(blob["sched"])
    strategy_state.clear()
    strategy_state.update(blob["strategy"])
    rng.bit_generator.state = blob["rng"]
    torch.cuda.set_rng_state(blob["torch_rng"].cpu())
    return blob["step"], blob["order"], {"seconds": blob["seconds"], "peak_vram_mib": blob["peak_vram_mib"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", choices=["ours-vulkan", "ours-cuda", "gsplat"], required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=7000)
    ap.add_argument("--vram", action="store_true", help="sample peak device memory with NVML")
    ap.add_argument("--concurrent", action="store_true",
                    help="other runs share the GPU: record quality only (time and memory set to null)")
    ap.add_argument("--adam-moments", choices=["fp32", "bf16"], default="fp32",
                    help="ours: the Adam moments' storage (TrainConfig.adam_moments)")
    ap.add_argument("--eager-trim-mib", type=float,
                    help="ours: Trainer.eager_trim_bytes in MiB (0: free any outgrown scratch the step after)")
    ap.add_argument("--state", type=Path, help="gsplat: resume from / save to this file (see the module docstring)")
    ap.add_argument("--segment-s", type=float, default=0.0,
                    help="gsplat with --state: stop after this many seconds of timed training and save")
    args = ap.parse_args()
    if args.segment_s and (args.state is None or args.trainer != "gsplat"):
        ap.error("--segment-s needs --state and --trainer gsplat")
    # from before any GPU context exists: peak includes the context and everything else
    args.sampler = VramSampler() if args.vram and not args.concurrent else None
    cams, images, pts, cols = load_prepared(args.data)
    pts, cols = parity_points(args.data, cams, images, pts, cols)  # this bench is the parity protocol
    if args.trainer == "gsplat":
        r = run_gsplat(args, cams, images, pts, cols)
        if r.get("partial"):
            print("PARTIAL " + json.dumps({"dataset": args.data.name, "seed": args.seed, "steps": args.steps, **r}),
                  flush=True)
            return
    else:
        r = run_ours(args, args.trainer.split("-")[1], cams, images, pts, cols)
    out = {"dataset": args.data.name, "trainer": args.trainer, "seed": args.seed, "steps": args.steps,
           "adam_moments": None if args.trainer == "gsplat" else args.adam_moments,
           "psnr": r["psnr"], "ssim": r["ssim"], "sec_per_1k_steps": 1000 * r["seconds"] / args.steps,
           "peak_vram_mib": r["peak_vram_mib"], "num_gaussians": r["num_gaussians"], "gpu": r["adapter"],
           "commit": commit_id()}
    if args.sampler:
        out["nvml_index"] = args.sampler.index
    for key in ("torch_peak_mib", "overflowed_steps", "last_intersections", "nvml_devices_used", "host_stats",
                "pool", "heaps"):
        if key in r:
            out[key] = r[key]
    if args.concurrent:
        out.update(sec_per_1k_steps=None, peak_vram_mib=None, torch_peak_mib=None, concurrent=True)
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
