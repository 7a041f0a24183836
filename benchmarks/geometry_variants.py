"""Variants of the geometry phase against each other: held-out PSNR and normal consistency.

Runs `spirula train <data> --steps S --max-size M --seed K --geometry <variant flags>` for every
dataset x variant x seed, JOBS at a time on the one GPU (concurrent: the seconds are not a
speed measurement), with SPIRULA_EVAL_GEOMETRY=1 so each run's metrics.json holds
``normal_consistency`` (the held-out views' mean edge-weighted 1 - cos between the rendered
normals and the normals of the rendered depth; 0 = they agree) and ``multiview_consistency``
(the held-out views' share of opaque pixels whose plane depth agrees within 1 px of the
forward-backward reprojection with their nearest training view's; 1 = one surface). Prints one
line per run as it ends, then a table per dataset: each variant's PSNR per seed, the mean, its
difference from the first variant, and the means of both consistencies; writes the same as
JSON (``--json``).

The default variants compare the multi-view geometric consistency term (issue 47 item 1;
spirula/engine/splat/geometry_phase.py MultiViewLoss) and the multi-view photometric one
(PhotometricMultiViewLoss, ``--lambda-mvrgb``) off and on, at PGSR's weights:

    python benchmarks/geometry_variants.py --data .gpu/data/colmap-office_chair .gpu/data/colmap-mouse \\
        --steps 7000 --max-size 1000 --seeds 0 1 2 --jobs 4 --json $OUT/geometry.json

(benchmarks/gpu.sh's ``geometry`` protocol runs exactly that). ``--variant NAME=FLAGS``
(repeatable) replaces them, e.g. ``--variant off= --variant mv0.1="--lambda-multiview 0.1"``; a
variant ``nogeo`` trains without the geometry phase at all. A run that outlives ``--budget``
seconds from the start is killed and reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DEFAULT_VARIANTS = {"off": "", "mv0.03": "--lambda-multiview 0.03", "rgb0.2": "--lambda-mvrgb 0.2"}


def _variant(text: str) -> tuple[str, str]:
    name, sep, flags = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"a variant is NAME=FLAGS, not {text!r}")
    return name, flags


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="+", required=True, help="dataset folders (COLMAP or prepared)")
    ap.add_argument("--steps", type=int, default=7000)
    ap.add_argument("--max-size", type=int, default=1000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=4, help="trainings at once")
    ap.add_argument("--variant", type=_variant, action="append", default=None, metavar="NAME=FLAGS")
    ap.add_argument("--budget", type=float, default=560.0, help="seconds from the start after which runs are killed")
    ap.add_argument("--work", default=None, help="folder of the runs' projects (default: a temporary one)")
    ap.add_argument("--spirula", default=f"{sys.executable} -m spirula.engine.cli", help="the command")
    ap.add_argument("--json", default=None, help="write the results here too")
    a = ap.parse_args(argv)
    variants = dict(a.variant) if a.variant else dict(DEFAULT_VARIANTS)
    work = Path(a.work or tempfile.mkdtemp(prefix="geometry-variants-"))
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + a.budget
    # seed-major: seed 0 of everything lands first when the budget runs out
    jobs = [(d, v, s) for s in a.seeds for d in a.data for v in variants]
    env = dict(os.environ, SPIRULA_EVAL_GEOMETRY="1")

    def one(job):
        data, variant, seed = job
        name = f"{Path(data).name}-{variant}-seed{seed}"
        flags = shlex.split(variants[variant])
        geometry = [] if variant == "nogeo" else ["--geometry"]
        cmd = [*shlex.split(a.spirula), "train", data, "-o", str(work / name), "--steps", str(a.steps),
               "--max-size", str(a.max_size), "--seed", str(seed), "--checkpoint-every", "0", *geometry, *flags]
        left = deadline - time.time()
        row = {"data": Path(data).name, "variant": variant, "seed": seed, "flags": variants[variant]}
        if left < 10:
            row["error"] = "not started (budget)"
        else:
            t0 = time.time()
            with open(work / f"{name}.log", "w") as log:
                try:
                    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=left).returncode
                except subprocess.TimeoutExpired:
                    rc = "killed (budget)"
            row["wall_s"] = round(time.time() - t0, 1)
            try:
                m = json.loads((work / name / "metrics.json").read_text())
                row.update(psnr=m["psnr"], ssim=m["ssim"], normal_consistency=m.get("normal_consistency"),
                           multiview_consistency=m.get("multiview_consistency"),
                           train_s=m.get("train_seconds"), gaussians=m.get("num_gaussians"))
            except (OSError, ValueError, KeyError):
                row["error"] = f"rc {rc}: " + " | ".join((work / f"{name}.log").read_text().strip().splitlines()[-2:])
        print(json.dumps(row), flush=True)
        return row

    with ThreadPoolExecutor(max(1, a.jobs)) as pool:
        rows = list(pool.map(one, jobs))
    print()
    summary = {}
    for data in dict.fromkeys(Path(d).name for d in a.data):
        print(f"{data}: held-out PSNR per seed (mean) | vs {next(iter(variants))} | normal_consistency | "
              "multiview_consistency (means)")
        base = None
        for v in variants:
            ok = [r for r in rows if r["data"] == data and r["variant"] == v and "psnr" in r]
            if not ok:
                print(f"  {v:12s} no finished run")
                continue
            psnr = sum(r["psnr"] for r in ok) / len(ok)
            def mean(key):
                v = [r[key] for r in ok if r.get(key) is not None]
                return sum(v) / len(v) if v else float("nan")
            ncm, mvm = mean("normal_consistency"), mean("multiview_consistency")
            base = psnr if base is None else base
            summary.setdefault(data, {})[v] = {"psnr": psnr, "normal_consistency": ncm, "multiview_consistency": mvm,
                                               "seeds": [r["seed"] for r in ok], "delta_db": psnr - base}
            per = ", ".join(f"{r['psnr']:.2f}" for r in sorted(ok, key=lambda r: r["seed"]))
            print(f"  {v:12s} {per} ({psnr:.3f}) | {psnr - base:+.3f} dB | {ncm:.4f} | {mvm:.4f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"runs": rows, "summary": summary, "steps": a.steps,
                                            "max_size": a.max_size, "variants": variants}, indent=1))
    return 0 if all("psnr" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
