import sys, json, time
from pathlib import Path
sys.path.insert(0, "/work/main")
import numpy as np, pycolmap
from engine.config import DatasetConfig, RunConfig, TrainConfig
from engine.partition.parts import write_points_txt
from engine.partition.run_parts import train_parts
from engine.partition.merge import merge_parts
rec = pycolmap.Reconstruction("/work/shared/data/mouse/sparse/0")
xyz = np.array([p.xyz for p in rec.points3D.values()]); rgb = np.array([p.color for p in rec.points3D.values()])
parts = Path("/tmp/pq2")
for d in sorted(parts.glob("part_0*")):
    write_points_txt(d / "sparse" / "0" / "points3D.txt", xyz, rgb)
cfg = RunConfig(device="vulkan", dataset=DatasetConfig(max_size=200, eval_every=8),
                train=TrainConfig(steps=1500, strategy="mcmc", mcmc_budget=1000000, max_gaussians=1000000,
                                  checkpoint_every=0, mcmc_init_scale=0.1))
t = time.time()
out = train_parts(parts, cfg, use_ray=False)
m = merge_parts(parts, Path("/tmp/pq2-merged"))
print("RESULT", json.dumps({"psnr": m["psnr"], "n": m["num_gaussians"], "parts": m["parts"], "s": time.time() - t,
      "peaks": {k: v["peak_vram_mib"] for k, v in out["parts"].items()}}))
