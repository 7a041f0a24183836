"""Side-by-side table of `spirula bench raster` / `bench train` results: GPU time per kernel
(ms per iteration, per-dispatch timestamps), the iteration's GPU span and wall time, and
training seconds per 1k steps, one column per JSON file. For comparing back ends (Vulkan
against CUDA) and commits on the same machine.

    python benchmarks/kernel_compare.py [--ratio COLUMN] RESULT.json ... (or results folders)

A column's label is the JSON's backend, its folder (``<date>-<commit>``) and its file stem;
``--ratio N`` adds each column's ratio to column N (0-based), e.g. CUDA / Vulkan.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(paths: list[Path]) -> list[tuple[str, dict]]:
    files = []
    for p in paths:
        if not p.exists():
            print(f"(missing: {p})")
        files += sorted(p.rglob("*.json")) if p.is_dir() else [p] if p.exists() else []
    out = []
    for f in files:
        r = json.loads(f.read_text())
        if isinstance(r, dict) and r.get("bench") in ("raster", "train"):
            out.append((f"{f.parent.parent.name if f.parent.name in ('raster', 'train') else f.parent.name}/{f.stem}", r))
    return out


def rows(results: list[tuple[str, dict]]) -> list[tuple[str, list]]:
    kernels: dict[str, float] = {}
    for _, r in results:
        for k, v in r.get("kernels_ms_per_iteration", {}).items():
            kernels[k] = max(kernels.get(k, 0.0), v)
    table = [(k, [r.get("kernels_ms_per_iteration", {}).get(k) for _, r in results])
             for k in sorted(kernels, key=kernels.get, reverse=True)]
    table.append(("iteration GPU span (ms)", [r.get("iteration_gpu_ms") for _, r in results]))
    table.append(("iteration wall (ms)", [r.get("iteration_wall_ms") for _, r in results]))
    table.append(("train s / 1k steps", [r.get("sec_per_1k_steps") for _, r in results]))
    table.append(("train final loss", [r.get("final_loss") for _, r in results]))
    return [(name, vals) for name, vals in table if any(v is not None for v in vals)]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", type=Path, nargs="+")
    p.add_argument("--ratio", type=int, default=None, help="add each column / this column")
    a = p.parse_args(argv)
    results = load(a.paths)
    for i, (label, r) in enumerate(results):
        print(f"[{i}] {r['backend']:6s} {r['bench']:6s} {label}")
    cols = range(len(results))
    print(f"{'':26s}" + "".join(f"{f'[{i}]':>10s}" for i in cols)
          + ("".join(f"{f'[{i}]/[{a.ratio}]':>10s}" for i in cols if i != a.ratio) if a.ratio is not None else ""))
    for name, vals in rows(results):
        line = f"{name:26s}" + "".join(f"{v:10.3f}" if v is not None else f"{'-':>10s}" for v in vals)
        if a.ratio is not None:
            base = vals[a.ratio]
            line += "".join(f"{v / base:10.2f}" if v is not None and base else f"{'-':>10s}"
                            for i, v in enumerate(vals) if i != a.ratio)
        print(line)


if __name__ == "__main__":
    main()
