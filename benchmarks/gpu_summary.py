"""The short table benchmarks/gpu.sh prints last, from one results folder
(benchmarks/results/<date>-<commit>/): each protocol's exit code and seconds, then the
headline numbers of every JSON it wrote and of every ``RESULT {json}`` line it printed.

    python benchmarks/gpu_summary.py benchmarks/results/<date>-<commit>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def headline(r: dict) -> str:
    """One line of the numbers a BENCHMARKS.md row quotes, by the result's kind."""
    kind = r.get("bench") or r.get("trainer") or r.get("kind") or "result"
    if kind == "raster":
        return (f"raster {r['backend']}: iteration {r['iteration_gpu_ms']:.3f} ms GPU, "
                + ", ".join(f"{k} {v:.3f}" for k, v in r["stages_ms"].items() if v))
    if kind == "train":
        return (f"train {Path(r.get('data', '?')).name} {r['backend']}: {r['sec_per_1k_steps']:.3f} s/1k steps, {r['num_gaussians']:,} Gaussians, "
                f"pool high-water {r['vram_high_water_mib']:.0f} MiB")
    if kind == "viewer":
        return (f"viewer {r['backend']} {r['gaussians']:,} {r['width']}x{r['height']}"
                f"{' readback' if r['readback'] else ''}: median {r['median_ms']:.2f} ms, {r['fps_median']:.1f} fps")
    if kind == "studio":
        return (f"studio {r['backend']} {r['gaussians']:,} {r['width']}x{r['height']} (render {r['render_size'][0]}x"
                f"{r['render_size'][1]}): {r['fps']:.1f} fps, median {r['fps_median']:.1f}, p10 {r['fps_p10']:.1f}, "
                f"longest gap {r['longest_gap_ms']:.0f} ms; {r['steps_per_sec']:.1f} steps/s while orbiting, "
                f"{r['still_steps_per_sec']:.1f} still, step {r['step_ms'] or float('nan'):.1f} ms")
    if kind == "mesh":
        return (f"mesh {r['project']}: {r['seconds']['total']:.1f} s total ("
                + ", ".join(f"{k} {v:.1f}" for k, v in r["seconds"].items() if k != "total") + f"), {r['faces']:,} faces")
    keys = [k for k in ("data", "dataset", "steps", "sec_per_1k_steps", "peak_vram_mib", "psnr", "gaussians") if k in r]
    return f"{kind}: " + ", ".join(f"{k} {r[k]}" for k in keys)


def main() -> None:
    root = Path(sys.argv[1])
    manifest = root / "manifest.jsonl"
    rows = [json.loads(x) for x in manifest.read_text().splitlines() if x.strip()] if manifest.exists() else []
    print(f"{'protocol':10s}{'rc':>4s}{'seconds':>9s}  skipped")
    for m in rows:
        print(f"{m['protocol']:10s}{m['rc']:4d}{m['seconds']:9d}  {m['skipped']}")
    for m in rows:
        d = root / m["protocol"]
        results = []
        for p in sorted(d.glob("*.json")):
            r = json.loads(p.read_text())
            results += r if isinstance(r, list) else [r]  # quality-<date>.json is a list of runs
        out = d / "stdout.txt"
        if out.exists():
            results += [json.loads(x[7:]) for x in out.read_text().splitlines() if x.startswith("RESULT {")]
        for r in results:
            try:
                print(f"  {headline(r)}")
            except (AttributeError, KeyError, TypeError, ValueError) as e:
                print(f"  {m['protocol']}: a result without the expected fields ({e!r})")


if __name__ == "__main__":
    main()
