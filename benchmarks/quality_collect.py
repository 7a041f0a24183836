"""Collect quality_bench.py results: the ``RESULT {json}`` lines of the logs named on the
command line are appended to a JSON list (default ``benchmarks/results/quality-<date>.json``;
a result already there is not added twice), and a table is printed: per dataset x trainer x
steps, the mean +- standard deviation over seeds of PSNR and SSIM, the mean s/1k steps and
the largest peak VRAM (both over the runs that measured them: runs alone on the GPU).

    python benchmarks/quality_collect.py logs/*.log [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path


def read_results(paths: list[Path]) -> list[dict]:
    out = []
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("RESULT "):
                try:
                    out.append(json.loads(line[len("RESULT "):]))
                except json.JSONDecodeError:
                    print(f"{path}: an unreadable RESULT line skipped", file=sys.stderr)
    return out


def append(path: Path, results: list[dict]) -> int:
    """Append the results not already in the JSON list at ``path``; returns how many were new."""
    have = json.loads(path.read_text()) if path.exists() else []
    seen = {json.dumps(r, sort_keys=True) for r in have}
    new = [r for r in results if json.dumps(r, sort_keys=True) not in seen]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(have + new, indent=1) + "\n")
    tmp.replace(path)
    return len(new)


def mean_std(values: list[float], digits: int) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.{digits}f} ± {sd:.{digits}f}"


def table(results: list[dict]) -> str:
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["dataset"], r["trainer"], r["steps"]), []).append(r)
    head = ["dataset", "trainer", "steps", "seeds", "PSNR", "SSIM", "PSNR 1/2x", "PSNR 2x", "s/1k", "peak MiB",
            "Gaussians"]
    rows = [head]
    for (dataset, trainer, steps), rs in sorted(groups.items()):
        def got(key):
            return [r[key] for r in rs if r.get(key) is not None]
        secs, peaks, counts = got("sec_per_1k_steps"), got("peak_vram_mib"), got("num_gaussians")
        seeds = ",".join(str(seed) for seed in sorted(r["seed"] for r in rs))
        rows.append([dataset, trainer, str(steps), seeds,
                     mean_std(got("psnr"), 2), mean_std(got("ssim"), 4),
                     mean_std(got("psnr_half"), 2), mean_std(got("psnr_double"), 2),
                     f"{statistics.fmean(secs):.3f}" if secs else "-", f"{max(peaks):.0f}" if peaks else "-",
                     f"{statistics.fmean(counts):.0f}" if counts else "-"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", type=Path, nargs="+")
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).parent / "results" / f"quality-{datetime.date.today().isoformat()}.json")
    args = ap.parse_args()
    results = read_results([p for p in args.logs if p.is_file()])
    n_new = append(args.out, results)
    print(f"{len(results)} results read, {n_new} new in {args.out}")
    if results:
        print(table(results))


if __name__ == "__main__":
    main()
