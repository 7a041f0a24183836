"""Held-out quality along a run (issue 28's diagnostics): the PLY a trainer has at chosen
steps, scored afterwards by the protocol's one renderer, and JPEGs of the held-out renders.

quality_bench.py ``--score-at 7000,15000`` keeps a PLY at each of those steps (ours: the
trainer's evaluation hook; gsplat: its loop) and adds ``trajectory``: [{step, psnr, ssim,
num_gaussians, views: [psnr per held-out view]}] to the RESULT line. ``--renders DIR``
writes one JPEG per scored model (its held-out renders beside the ground truth), so a view
that collapses can be looked at.

Time to quality (issue 25): ``python benchmarks/quality_trajectory.py LOG ... --targets
fox=30.15,mouse=19.171`` reads the RESULT lines of quality_bench.py logs and prints, per run,
the held-out PSNR and training seconds (``train_s``, the PLY exports left out) at each scored
step and at the end, and the first step at or above the dataset's target PSNR (gsplat
DefaultStrategy's 30k value) with its seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np


def parse_steps(text: str | None, total: int) -> list[int]:
    """"7000,15000" (or "7000+15000", which a MATRIX line of h200_quality.sh can carry: it
    splits its runs at commas) -> sorted steps strictly inside (0, total); [] for None/empty."""
    if not text:
        return []
    steps = sorted({int(s) for s in text.replace("+", ",").split(",") if s.strip()})
    bad = [s for s in steps if not 0 < s < total]
    if bad:
        raise SystemExit(f"--score-at {bad}: each step must lie strictly between 0 and --steps {total}")
    return steps


def eval_interval(steps: list[int]) -> int:
    """The evaluation interval whose multiples include every step of ``steps`` (their gcd)."""
    out = 0
    for s in steps:
        out = math.gcd(out, s)
    return out


def ply_at(folder: Path, step: int) -> Path:
    """Where the PLY of step ``step`` is kept."""
    return folder / f"model-{step:06d}.ply"


def score_trajectory(folder: Path, steps: list[int], score, renders: Path | None) -> list[dict]:
    """[{step, psnr, ssim, num_gaussians, views}] of the PLYs kept at ``steps``; ``score(ply,
    render_dir)`` is the caller's one-renderer scoring (returns score_ply's dict)."""
    out = []
    for step in steps:
        ply = ply_at(folder, step)
        if not ply.exists():
            continue
        r = score(ply, None if renders is None else renders.with_name(f"{renders.name}-{step:06d}.jpg"))
        out.append({"step": step, "psnr": r["psnr"], "ssim": r["ssim"], "num_gaussians": r["num_gaussians"],
                    "views": [round(v["psnr"], 3) for v in r["views"]]})
        print("TRAJECTORY " + json.dumps(out[-1]), flush=True)  # kept in the log should the run be killed
        ply.unlink()
    return out


def save_renders(path: Path, views, render) -> None:
    """One JPEG at ``path``: a row per held-out view, its render beside its ground truth, at
    a quarter of the size (one file per model: the device tool returns few files)."""
    from PIL import Image

    rows = []
    for c, gt in views:
        a = (np.clip(render(c), 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
        img = Image.fromarray(np.concatenate([a, gt[..., :3]], axis=1))
        rows.append(np.asarray(img.resize((max(1, img.width // 4), max(1, img.height // 4)), Image.BOX)))
    if not rows:
        return
    width = max(r.shape[1] for r in rows)
    sheet = np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0))) for r in rows], axis=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(sheet).save(path, quality=85)


def time_to_target(result: dict, target: float | None) -> tuple[list[dict], dict | None]:
    """(points, first): the scored steps of a quality_bench RESULT and its end, as {step, psnr,
    train_s, num_gaussians}; ``first``: the first point at or above ``target`` (None if none)."""
    points = [{k: t.get(k) for k in ("step", "psnr", "train_s", "num_gaussians")} for t in result.get("trajectory", [])]
    points.append({"step": result["steps"], "psnr": result["psnr"], "train_s": result.get("train_s"),
                   "num_gaussians": result["num_gaussians"]})
    hit = [p for p in points if target is not None and p["psnr"] is not None and p["psnr"] >= target]
    return points, (hit[0] if hit else None)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="time to a target held-out PSNR from quality_bench.py logs")
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--targets", default="", help="DATASET=PSNR,... (gsplat-default's 30k held-out PSNR)")
    args = ap.parse_args(argv)
    targets = {k: float(v) for k, _, v in (t.partition("=") for t in args.targets.split(",") if t)}
    fmt = lambda v, f: "-" if v is None else f % v  # noqa: E731
    for log in args.logs:
        for line in log.read_text(errors="replace").splitlines():
            if not line.startswith("RESULT "):
                continue
            r = json.loads(line[len("RESULT "):])
            target = targets.get(r["dataset"])
            points, first = time_to_target(r, target)
            print(f"{r['dataset']} {r['trainer']} s{r['seed']} ({r['gpu']}, {r['commit']}): "
                  f"{fmt(r['sec_per_1k_steps'], '%.3f')} s/1k with the exports")
            for p in points:
                print(f"  {p['step']:6d}  {fmt(p['psnr'], '%7.3f')} dB  {fmt(p['train_s'], '%7.2f')} s  "
                      f"{fmt(p['num_gaussians'], '%8d')} Gaussians")
            if target is not None:
                print(f"  target {target:.3f}: " + (f"step {first['step']}, {fmt(first['train_s'], '%.2f')} s"
                                                    if first else "not reached"))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
