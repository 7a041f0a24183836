import json, shutil, sys, time
from pathlib import Path
from engine.partition.layout import read_layout
from engine.partition.merge import merge_parts, finetune, evaluate_ply
from engine.io.ply import read_ply
work = Path(sys.argv[1]); n = int(sys.argv[2]); size = int(sys.argv[3])
layout = read_layout(work / "parts")
t = time.time()
m = merge_parts(work / "parts", work / f"merged_ft{n}", finetune_steps=n)
print("merged ft", n, "owned", m["owned_psnr"], "ft", m["psnr"], m["num_gaussians"], round(time.time() - t), "s", flush=True)
if len(sys.argv) > 4:
    d = work / f"whole_ft{n}"; d.mkdir(exist_ok=True); shutil.copy(work / "whole" / "splat.ply", d / "splat.ply")
    cfg = json.loads((work / "parts" / "part_00" / "train" / "part.json").read_text())["config"]
    g = finetune(layout, d, n, cfg, size, "vulkan")
    print("whole ft", n, evaluate_ply(g, layout.dataset, layout.test, size, "vulkan")["psnr"], flush=True)
