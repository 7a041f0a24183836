"""Diagnose a partition_quality --out folder: per-view PSNR of whole / merged / each part's full
model; error near the ownership seam vs elsewhere; colour offset by owner; Gaussians stats."""
import json, sys
from pathlib import Path
import numpy as np
from PIL import Image
from engine.device import get_gpu
from engine.ingest import load_dataset
from engine.io.ply import read_ply, GaussianPly
from engine.partition.layout import read_layout
from engine.partition.merge import PlyRenderer, concatenate
from engine.splat.metrics import psnr

work = Path(sys.argv[1]); size = int(sys.argv[2]); outpng = work / "diag"; outpng.mkdir(exist_ok=True)
extra = sys.argv[3:]  # name=path.ply extra models
layout = read_layout(work / "parts")
ds = load_dataset(layout.dataset, size)
idx = {c.name: i for i, c in enumerate(ds.cameras)}
test = [idx[n] for n in layout.test]
gpu = get_gpu("vulkan")
whole = read_ply(work / "whole" / "splat.ply")
parts = [read_ply(layout.part_dir(p) / "train" / "splat.ply") for p in layout.parts]
merged = read_ply(work / "merged" / "splat.ply")
own = layout.owner_of(merged.means)
C0 = 0.28209479177387814
def colored(g, owner):
    sh0 = np.full((len(g), 3), -0.5 / C0, np.float32)
    sh0[owner == 0, 0] = 0.5 / C0; sh0[owner == 1, 1] = 0.5 / C0
    return GaussianPly(g.means, g.scales, g.quats, g.opacities, sh0, np.zeros_like(g.shN))
models = {"whole": whole, "merged": merged, **{f"part{k}": g for k, g in enumerate(parts)}}
for e in extra:
    n, p = e.split("=", 1); models[n] = read_ply(Path(p))
print("counts", {k: len(v) for k, v in models.items()})
for k, g in enumerate(parts):
    o = layout.owner_of(g.means)
    print(f"part{k}: {len(g)} G, own {np.mean(o == k):.2f}; opac>0.5 own {np.mean(1/(1+np.exp(-g.opacities[o==k]))>0.5):.2f}")
R = {k: PlyRenderer(gpu, g, ds) for k, g in models.items()}
ownR = PlyRenderer(gpu, colored(merged, own), ds)
rows = []
tot = {k: {"seam": [0, 0], "rest": [0, 0]} for k in models}
for i in test:
    cam = ds.cameras[i]; gt = cam.image.astype(np.float32) / 255
    imgs = {k: np.clip(r.render(i), 0, 1) for k, r in R.items()}
    om = ownR.render(i); a = om[..., 0] + om[..., 1]; w0 = om[..., 0] / np.maximum(a, 1e-6)
    # seam: pixels whose owner weight is mixed, dilated by 2 px
    mixed = (a > 0.05) & (w0 > 0.1) & (w0 < 0.9)
    from scipy.ndimage import binary_dilation
    seam = binary_dilation(mixed, iterations=2)
    row = {"name": cam.name, "seam_frac": float(seam.mean())}
    for k, im in imgs.items():
        err = ((im - gt) ** 2).mean(2)
        row[k] = psnr(im, gt)
        for key, m in (("seam", seam), ("rest", ~seam)):
            tot[k][key][0] += float(err[m].sum()); tot[k][key][1] += int(m.sum())
    # colour offset by owner (merged - gt)
    d = imgs["merged"] - gt
    row["off0"] = d[(w0 > 0.9) & (a > 0.5)].mean(0).round(3).tolist()
    row["off1"] = d[(w0 < 0.1) & (a > 0.5)].mean(0).round(3).tolist()
    rows.append(row)
    stem = Path(cam.name).stem
    dm = np.abs(imgs["merged"] - gt).mean(2); dw = np.abs(imgs["whole"] - gt).mean(2)
    panel = np.concatenate([gt, imgs["whole"], imgs["merged"], np.repeat(np.clip((dm - dw)[..., None] * 4 + 0.5, 0, 1), 3, 2), om], 1)
    Image.fromarray((panel * 255).astype(np.uint8)).save(outpng / f"{stem}.png")
for r in rows:
    print(r["name"][:10], " ".join(f"{k}={r[k]:.2f}" for k in models), f"seam={r['seam_frac']:.3f}", r["off0"], r["off1"])
print("mean", " ".join(f"{k}={np.mean([r[k] for r in rows]):.3f}" for k in models))
for k in models:
    print(k, {key: round(float(-10 * np.log10(s / n)), 2) for key, (s, n) in tot[k].items()})
