"""Renderer parity with gsplat 1.5.3 on the GPU machine: same Gaussians, same camera, same
upstream image gradient; compares the rendered image and every parameter gradient.

The Gaussians are a fresh random scene built around a prepared dataset's initial points
(jittered copies with random log scales, rotations, opacity logits and degree-3 SH), so
the comparison covers overlapping, anisotropic splats like a scene mid-training. Prints
one table and a JSON line (``PARITY {...}``).

    python benchmarks/parity_gsplat.py --data .gpu/data/office_chair --count 200000
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_bench import as_dataset, load_prepared, parity_points  # noqa: E402


def random_scene(pts: np.ndarray, cols: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    from scipy.spatial import cKDTree

    from spirula.engine.splat.param_layout import SH_C0, pack

    d, _ = cKDTree(pts).query(pts, k=4)
    spacing = float(np.median(d[:, 1:]))
    pick = rng.integers(0, len(pts), count)
    means = pts[pick] + rng.normal(0.0, spacing, (count, 3))
    scales = np.log(spacing) + rng.normal(-1.0, 0.7, (count, 3))
    quats = rng.normal(size=(count, 4))
    logits = rng.normal(0.0, 2.0, count)
    sh0 = (cols[pick] / 255.0 - 0.5) / SH_C0 + rng.normal(0.0, 0.1, (count, 3))
    shN = rng.normal(0.0, 0.05, (count, 15, 3))
    return pack(means, scales, quats, logits, sh0, shN, 3)


def ours(rows, cam, ci, cams_all, g_image, backend):
    from spirula.engine.device import get_gpu
    from spirula.engine.splat.camera_table import View, camera_table
    from spirula.engine.splat.param_layout import row_stride
    from spirula.engine.splat.render import Rasterizer

    gpu = get_gpu(backend)
    n, d = rows.shape
    params = gpu.upload(rows.reshape(-1), "params")
    cams = gpu.upload(camera_table(cams_all), "cams")
    r = Rasterizer(gpu, 3)
    view = View(ci, cam.width, cam.height)
    img = r.render(params, n, cams, view, 3)
    gpu.write(r.image_grad(), g_image.astype(np.float32).reshape(-1))
    grads = gpu.zeros(4 * n * row_stride(3), "grads")
    g2 = gpu.zeros(4 * n, "g2")
    vc = gpu.zeros(4 * n, "vc")
    enc = gpu.encoder()
    r.record_backward(enc, grads, g2, vc, True)
    gpu.submit(enc)
    radii = r.read("radii", np.int32, shape=(n, 2))
    return (img, gpu.read(grads, np.float32, shape=(n, d)), gpu.read(g2, np.float32, n), radii)


def reference(rows, cam, g_image):
    import torch
    from gsplat import rasterization

    from spirula.engine.splat.param_layout import unpack

    dev = "cuda"
    p = {k: torch.tensor(v, dtype=torch.float32, device=dev, requires_grad=True) for k, v in unpack(rows, 3).items()}
    K = torch.tensor([[cam.fx, 0, cam.cx], [0, cam.fy, cam.cy], [0, 0, 1]], dtype=torch.float32, device=dev)
    vm = torch.tensor(cam.w2c, dtype=torch.float32, device=dev)
    colors = torch.cat([p["sh0"][:, None], p["shN"]], 1)
    img, _, info = rasterization(p["means"], p["quats"], torch.exp(p["scales"]), torch.sigmoid(p["opacities"]), colors,
                                 vm[None], K[None], cam.width, cam.height, sh_degree=3, packed=False)
    info["means2d"].retain_grad()
    img[0].backward(torch.tensor(g_image, dtype=torch.float32, device=dev))
    g2d = info["means2d"].grad[0].clone()
    g2d[:, 0] *= cam.width / 2.0
    g2d[:, 1] *= cam.height / 2.0
    out = {k: v.grad.detach().cpu().numpy() for k, v in p.items()}
    return (img[0].detach().cpu().numpy(), out, g2d.norm(dim=-1).cpu().numpy(), info["radii"][0].cpu().numpy())


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def main() -> None:
    from spirula.engine.splat.param_layout import unpack

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--views", type=int, default=3)
    ap.add_argument("--backend", default="vulkan")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cams_meta, images, pts, cols = load_prepared(args.data)
    pts, cols = parity_points(args.data, cams_meta, images, pts, cols)  # the points prepare_data.py used to draw
    cams = as_dataset(args.data, cams_meta, images, pts, cols).cameras
    rng = np.random.default_rng(args.seed)
    rows = random_scene(pts, cols, args.count, rng)
    report = []
    for ci in np.linspace(0, len(cams) - 1, args.views).astype(int):
        cam = cams[ci]
        g_image = rng.normal(0.0, 1.0 / (cam.width * cam.height), (cam.height, cam.width, 3))
        img_o, g_o, g2_o, rad_o = ours(rows, cam, int(ci), cams, g_image, args.backend)
        img_r, g_r, g2_r, rad_r = reference(rows, cam, g_image)
        go = unpack(g_o, 3)
        row = {"view": int(ci), "width": cam.width, "height": cam.height,
               "image_max_abs": float(np.abs(img_o - img_r).max()),
               "image_mean_abs": float(np.abs(img_o - img_r).mean()),
               "visible_ours": int((rad_o[:, 0] > 0).sum()), "visible_gsplat": int((rad_r > 0).all(-1).sum()),
               "radii_equal": float(np.mean((rad_o == rad_r).all(-1))),
               "grad2d_rel": rel(g2_o, g2_r)}
        for k in ("means", "scales", "quats", "opacities", "sh0", "shN"):
            row[f"{k}_rel"] = rel(go[k], g_r[k])
        report.append(row)
        print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    print("PARITY " + json.dumps({"data": args.data.name, "count": args.count, "views": report}), flush=True)


if __name__ == "__main__":
    main()
