import sys; from pathlib import Path
import numpy as np
from engine.io.ply import read_ply
from engine.partition.layout import read_layout
from engine.partition.merge import concatenate, evaluate_ply
work = Path(sys.argv[1]); size = int(sys.argv[2])
L = read_layout(work / "parts")
parts = [read_ply(L.part_dir(p) / "train" / "splat.ply") for p in L.parts]
cut = L.parts[0].owner[1]  # part 0: x < cut
ext = L.parts[0].extent; width = ext[1] - ext[0]
def logit(p): return np.log(p / (1 - p))
for frac in (0.0, 0.05, 0.15, 0.3):
    b = frac * width
    kept = []
    for k, g in enumerate(parts):
        x = (g.means @ L.frame.T)[:, 0] - cut
        d = -x if k == 0 else x  # >0 inside own cell
        keep = d > -b
        s = g.subset(keep); dd = d[keep]
        w = np.clip(0.5 + dd / (2 * b), 0, 1) if b > 0 else (dd >= 0).astype(float)
        a = 1 / (1 + np.exp(-s.opacities)) * np.maximum(w, 1e-4)
        s.opacities = logit(np.clip(a, 1e-6, 1 - 1e-6)).astype(np.float32)
        kept.append(s)
    m = concatenate(kept, ["a", "b"])
    print("band", frac, len(m), round(evaluate_ply(m, L.dataset, L.test, size, "vulkan")["psnr"], 3), flush=True)
