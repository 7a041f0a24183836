import sys, json
sys.path.insert(0, "/work/main")
from pathlib import Path
from engine.config import DatasetConfig, RunConfig, TrainConfig
from engine.partition.split import SplitSettings
from tests.partition.bars import seam_psnr, train_partitioned, train_whole
from tests.partition.city import make_city, write_city
POINTS, STEPS, WIDTH = 12000, 800, 64
root = Path(sys.argv[1]); ctxv = int(sys.argv[2])
hits = write_city(root / "city", make_city(width=WIDTH, height=WIDTH * 3 // 4), points=POINTS)
cfg = RunConfig(dataset=DatasetConfig(max_size=WIDTH, eval_every=8),
                train=TrainConfig(steps=STEPS, strategy="mcmc", mcmc_budget=POINTS, max_gaussians=POINTS,
                                  checkpoint_every=0, mcmc_init_scale=1.0))
whole = train_whole(root / "city", root / "whole", cfg)
settings = SplitSettings(parts=4, overlap=0.12, visibility=0.35, total_gaussians=POINTS, max_size=WIDTH, min_cameras=4,
                         context_views=ctxv)
merged = train_partitioned(root / "city", root / "parts", root / "merged", cfg, settings)
s = seam_psnr(root / "merged" / "eval", hits, root / "parts", band=0.5)
print("RESULT", json.dumps({"ctx": ctxv, "whole": whole["psnr"], "merged": merged["psnr"], "n": merged["num_gaussians"],
      "vram_ratio": max(merged["part_peak_vram_mib"].values()) / whole["peak_vram_mib"], "parts": merged["parts"], "seams": s}))
