"""Helpers of benchmarks/h200_pipeline.sh (run on the device machine, Python 3.12).

    python3 benchmarks/h200_pipeline_report.py poses <model_dir> <reference_poses.npz> <out.json>
        pose accuracy of an SfM model against the reference poses saved by
        h200_pipeline_prepare.sh (Sim(3) by image name, spirula.engine.sfm.align)
    python3 benchmarks/h200_pipeline_report.py summary <OUT> [--budget S] [--elapsed S]
        gathers $OUT/<scene>/*.json, steps.jsonl and the nvidia-smi memory samples into
        $OUT/summary.json and prints a short table (last thing the script prints)
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cmd_poses(a) -> int:
    import numpy as np

    from spirula.engine.sfm.align import compare_poses, poses_by_name

    ref = np.load(a.reference)
    reference = {str(n): (R, c) for n, R, c in zip(ref["names"], ref["R"], ref["c"])}
    estimate = poses_by_name(a.model)
    acc = compare_poses(estimate, reference)
    out = acc.summary() | {"registered": len(estimate), "reference_images": len(reference),
                           "reference": "office_chair/reference/sparse/0"}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out))
    return 0


def _load(p: Path) -> dict:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def _gpu_samples(path: Path) -> list[tuple[float, float]]:
    """(epoch seconds, MiB used) from `nvidia-smi --query-gpu=timestamp,memory.used -lms`."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for ln in lines:
        try:
            ts, mib = (x.strip() for x in ln.split(",")[:2])
            out.append((datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").timestamp(), float(mib)))
        except ValueError:
            continue
    return out


def _stage(run: dict, name: str) -> dict:
    for s in run.get("stages", []):
        if s.get("name") == name:
            return s
    return {}


def _f(v, fmt: str = ".1f", none: str = "-") -> str:
    return none if v is None else format(v, fmt)


def cmd_summary(a) -> int:
    out = Path(a.out)
    steps = [json.loads(ln) for ln in (out / "steps.jsonl").read_text().splitlines() if ln.strip()] \
        if (out / "steps.jsonl").is_file() else []
    samples = _gpu_samples(out / "gpu_mem.csv")
    idle = min((m for _, m in samples), default=None)
    for s in steps:
        if "start" in s and samples:
            inside = [m for t, m in samples if s["start"] <= t <= s["end"]]
            if inside:
                s["gpu_mem_peak_mib"] = max(inside)
                s["gpu_mem_peak_over_idle_mib"] = max(inside) - idle
    scenes = {}
    for d in sorted(p for p in out.iterdir() if p.is_dir() and p.name != "screenshots"):
        run, mesh = _load(d / "run.json"), _load(d / "mesh.json")
        if not run and not mesh:
            continue
        sc = {"run": run.get("kind"), "error": run.get("error"),
              "stage_seconds": {s["name"]: s.get("seconds") for s in run.get("stages", [])},
              "stage_status": {s["name"]: s.get("status") for s in run.get("stages", [])},
              "total_seconds": run.get("total_seconds")}
        sfm = _stage(run, "sfm").get("summary") or {}
        if sfm:
            sc["sfm"] = {k: sfm.get(k) for k in ("images", "registered", "mapper", "points", "matching",
                                                  "mean_reprojection_error_px", "phase_seconds")}
        pose = _load(d / "pose_accuracy.json")
        if pose:
            sc["pose_accuracy"] = pose
        tr = _stage(run, "train").get("summary") or {}
        sc["train"] = {k: tr.get(k) for k in ("step", "psnr", "ssim", "num_gaussians", "views", "train_seconds",
                                              "sec_per_1k_steps", "stopped_early")}
        if mesh:
            sc["mesh"] = {k: mesh.get(k) for k in ("faces", "vertices", "faces_marching_cubes", "charts",
                                                   "texture_size", "texel_coverage", "views", "gaussians", "grid",
                                                   "seconds", "memory", "device")}
        sc["screenshots"] = sorted(p.name for p in (out / "screenshots").glob(f"{d.name}-view*.png"))
        scenes[d.name] = sc
    for s in steps:  # steps are named <scene>:<what>
        scene, _, what = s["step"].partition(":")
        if scene in scenes:
            scenes[scene].setdefault("steps", {})[what] = {k: s.get(k) for k in
                                                            ("status", "seconds", "gpu_mem_peak_over_idle_mib")}
    summary = {"env": _load(out / "env.json"), "gpu": (out / "gpu.txt").read_text().strip()
               if (out / "gpu.txt").is_file() else None, "budget_s": a.budget, "elapsed_s": a.elapsed,
               "gpu_mem_idle_mib": idle, "steps": steps, "scenes": scenes}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))

    print("\n=== steps (wall s; GPU MiB over idle, nvidia-smi 100 ms samples)")
    for s in steps:
        print(f"  {s['step']:<26} {s['status']:<8} {_f(s.get('seconds')):>7} s  "
              f"{_f(s.get('gpu_mem_peak_over_idle_mib'), '.0f'):>6} MiB")
    print("\n=== scenes")
    hdr = (f"{'scene':<22} {'reg':>7} {'rot°':>5} {'sfm':>6} {'undist':>6} {'train':>6} {'PSNR':>6} {'SSIM':>6} "
           f"{'Gauss':>8} {'faces':>8} {'mesh s':>7} {'host MB':>8} {'gpuacc MB':>9} {'gpu MiB':>7} views")
    print(hdr)
    for name, sc in scenes.items():
        ss, tr, me = sc["stage_seconds"], sc["train"], sc.get("mesh") or {}
        sfm = sc.get("sfm") or {}
        reg = f"{sfm.get('registered')}/{sfm.get('images')}" if sfm else "-"
        rot = (sc.get("pose_accuracy") or {}).get("median_rot_err_deg")
        mem = me.get("memory") or {}
        mesh_step = (sc.get("steps") or {}).get("mesh", {})
        print(f"{name:<22} {reg:>7} {_f(rot, '.2f'):>5} {_f(ss.get('sfm')):>6} {_f(ss.get('undistort')):>6} "
              f"{_f(ss.get('train')):>6} {_f(tr.get('psnr'), '.2f'):>6} {_f(tr.get('ssim'), '.3f'):>6} "
              f"{_f(tr.get('num_gaussians'), ',d'):>8} {_f(me.get('faces'), ',d'):>8} "
              f"{_f((me.get('seconds') or {}).get('total')):>7} {_f(mem.get('host_peak_mb'), '.0f'):>8} "
              f"{_f(mem.get('gpu_peak_mb'), '.0f'):>9} {_f(mesh_step.get('gpu_mem_peak_over_idle_mib'), '.0f'):>7} "
              f"{len(sc['screenshots'])}")
        if me.get("seconds"):
            print("    mesh steps: " + ", ".join(f"{k} {v:.1f}" for k, v in me["seconds"].items()))
        if sc.get("error"):
            print(f"    error: {sc['error']}")
    print(f"\nelapsed {a.elapsed} s of {a.budget} s budget; summary: {out / 'summary.json'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("poses")
    p.add_argument("model")
    p.add_argument("reference")
    p.add_argument("out")
    p = sub.add_parser("summary")
    p.add_argument("out")
    p.add_argument("--budget", type=float)
    p.add_argument("--elapsed", type=float)
    a = ap.parse_args()
    return cmd_poses(a) if a.cmd == "poses" else cmd_summary(a)


if __name__ == "__main__":
    sys.exit(main())
