"""Partitioned against unpartitioned training, the bars of issue 22 (tests/partition/bars.py
measures them; tests/partition/test_city_bars.py runs the small version in CI):

    python benchmarks/partition_quality.py --scene city [--points 20000 --steps 3000 --width 96]
    python benchmarks/partition_quality.py --data .gpu/data/mouse --parts 2 --steps 7000 --max-size 1000

Both runs use MCMC with the same whole-scene budget (``--budget``; the city: its SfM point
count) and steps; each part gets its share of the budget and the steps of its share of the
cameras (spirula/engine/partition/run_parts.py part_config), so the steps per Gaussian match. The merge
then fine-tunes the merged model over every camera (spirula/engine/partition/merge.py finetune; by
default 5% of the parts' steps, ``--finetune-steps``): ``owned_psnr`` is the merge before it,
``merged_psnr`` after (its seconds count in ``partitioned_seconds``; the whole run gets no
extra steps: on mouse at 200 px, 300 more steps of the whole gained 0.03 dB, the merge's
fine-tune 0.62). Peak VRAM is the VRAM pool's accounting (spirula/engine/profile/pool.py),
the same on every device. The city (tests/partition/city.py's ray caster) also scores the
seams: held-out pixels within ``--band`` world units of an inner cell border against the rest.
Prints ``RESULT {json}`` last (benchmarks/gpu_summary.py reads it) and writes it to --json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scene", choices=["city"], help="the synthetic city (else --data)")
    ap.add_argument("--data", type=Path, help="a COLMAP dataset")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--overlap", type=float, default=0.15)
    ap.add_argument("--visibility", type=float, default=0.35)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--budget", type=int, default=None, help="MCMC budget of the whole scene (city: --points)")
    ap.add_argument("--points", type=int, default=20000, help="city: SfM points (and the budget)")
    ap.add_argument("--width", type=int, default=96, help="city: image width (height 3/4 of it)")
    ap.add_argument("--max-size", type=int, default=1000, help="--data: training image side")
    ap.add_argument("--init-scale", type=float, default=1.0, help="MCMC's init scale (x the 3-NN distance)")
    ap.add_argument("--band", type=float, default=0.5, help="city: border band, world units")
    ap.add_argument("--context-views", type=lambda t: None if t == "auto" else int(t), default=None,
                    help="SplitSettings.context_views: auto (default), or K (0: the region's points only)")
    ap.add_argument("--seed", type=int, default=0, help="training seed of the whole run and of every part")
    ap.add_argument("--device", default="vulkan")
    ap.add_argument("--steps-rule", choices=["cameras", "gaussians"], default="cameras",
                    help="a part's steps by its share of the cameras (default) or of the Gaussians")
    ap.add_argument("--finetune-steps", type=lambda t: None if t == "auto" else int(t), default=None,
                    help="merge's --finetune-steps: auto (default: 5%% of the parts' steps with context, when it fits), N, 0 (none)")
    ap.add_argument("--ray", action="store_true", help="train the parts through Ray (default: in-process)")
    ap.add_argument("--out", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if (args.scene is None) == (args.data is None):
        ap.error("give --scene city or --data DATASET")
    work = args.out or Path(tempfile.mkdtemp(prefix="partition-bench-"))
    try:
        result = run(args, work)
    finally:
        if args.out is None:
            shutil.rmtree(work, ignore_errors=True)
    line = json.dumps(result)
    if args.json:
        args.json.write_text(line + "\n")
    print("RESULT " + line)
    return 0


def run(args, work: Path) -> dict:
    from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
    from spirula.engine.partition.split import SplitSettings
    from tests.partition.bars import seam_psnr, train_partitioned, train_whole

    hits = None
    if args.scene == "city":
        from tests.partition.city import make_city, write_city

        dataset = work / "city"
        hits = write_city(dataset, make_city(width=args.width, height=args.width * 3 // 4), points=args.points)
        budget, size = args.budget or args.points, args.width
    else:
        dataset, budget, size = args.data, args.budget or TrainConfig.mcmc_budget, args.max_size
    cfg = RunConfig(device=args.device, dataset=DatasetConfig(max_size=size, eval_every=8),
                    train=TrainConfig(steps=args.steps, seed=args.seed, strategy="mcmc", mcmc_budget=budget, max_gaussians=budget,
                                      checkpoint_every=0, mcmc_init_scale=args.init_scale))
    whole = train_whole(dataset, work / "whole", cfg)
    settings = SplitSettings(parts=args.parts, overlap=args.overlap, visibility=args.visibility, total_gaussians=budget,
                             context_views=args.context_views,
                             max_size=size, min_cameras=4)
    merged = train_partitioned(dataset, work / "parts", work / "merged", cfg, settings, use_ray=args.ray,
                               steps_rule=args.steps_rule, finetune_steps=args.finetune_steps)
    peak = max(merged["part_peak_vram_mib"].values())
    out = {"bench": "partition", "scene": args.scene or str(args.data), "parts": args.parts, "overlap": args.overlap,
           "steps": args.steps, "seed": args.seed, "budget": budget,
           "context_views": json.loads((work / "parts" / "partition.json").read_text())["settings"]["context_views"], "size": size, "device": args.device,
           "whole_psnr": whole["psnr"], "merged_psnr": merged["psnr"], "psnr_delta": merged["psnr"] - whole["psnr"],
           "whole_peak_vram_mib": whole["peak_vram_mib"], "part_peak_vram_mib": merged["part_peak_vram_mib"],
           "vram_ratio": peak / whole["peak_vram_mib"], "part_cameras": merged["part_cameras"],
           "part_steps": merged["part_steps"], "steps_rule": args.steps_rule,
           "whole_seconds": whole["seconds"], "partitioned_seconds": merged["seconds"],
           "merged_gaussians": merged["num_gaussians"], "finetune_steps": merged.get("finetune_steps", 0),
           "owned_psnr": merged.get("owned_psnr", merged["psnr"]),
           "owned_delta": merged.get("owned_psnr", merged["psnr"]) - whole["psnr"]}
    if hits is not None:
        for name, folder in (("whole", work / "whole" / "eval"), ("merged", work / "merged" / "eval")):
            out[f"{name}_seams"] = seam_psnr(folder, hits, work / "parts", args.band)
    return out


if __name__ == "__main__":
    sys.exit(main())
