"""Viewer frame time: the studio viewport's frame (training rasterizer forward pass at the
viewport resolution + compose + frustum lines), for N synthetic Gaussians at W x H, with
the camera orbiting. No window: the frame ends where a swapchain copy would begin
(``--readback`` adds the host read-back of the readback fallback).

    python benchmarks/viewer_bench.py --gaussians 1000000 --width 1920 --height 1080 [--device vulkan|cuda]

Prints one JSON line: median / p90 / min frame ms and the intersection count.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np


def synthetic_gaussians(n: int, sh_degree: int, seed: int = 0) -> np.ndarray:
    """Packed rows: a 2-unit ball of Gaussians, log scales ~ ball size / n^(1/3), random
    colours and SH, opacities around 0.5 (a dense, fully covered view like a trained scene)."""
    from engine.splat.layout import pack

    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    means = d / np.linalg.norm(d, axis=1, keepdims=True) * rng.uniform(0, 1, (n, 1)) ** (1 / 3) * 2.0
    s = 2.0 * 1.5 / n ** (1 / 3)
    scales = np.log(s * rng.uniform(0.3, 1.2, (n, 3)))
    q = rng.normal(size=(n, 4))
    quats = q / np.linalg.norm(q, axis=1, keepdims=True)
    opac = rng.normal(0.0, 1.0, n)
    sh0 = rng.normal(0, 0.6, (n, 3))
    m = (sh_degree + 1) ** 2 - 1
    shn = rng.normal(0, 0.05, (n, m, 3))
    return pack(means, scales, quats, opac, sh0, shn, sh_degree)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gaussians", type=int, default=1_000_000)
    ap.add_argument("--width", type=int, default=1920)
    ap.add_argument("--height", type=int, default=1080)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--sh-degree", type=int, default=3)
    ap.add_argument("--device", default=None)
    ap.add_argument("--readback", action="store_true")
    args = ap.parse_args()

    from engine.device import get_gpu
    from engine.studio.viewer import Viewer, ViewSource, install_polling_waits

    gpu = get_gpu(args.device)
    install_polling_waits(gpu)
    rows = synthetic_gaussians(args.gaussians, args.sh_degree)
    params = gpu.upload(rows, "splat.params")
    v = Viewer(gpu)
    v.adaptive, v.render_scale, v.readback_when_headless = False, 1.0, False
    v.resize(args.width, args.height)
    src = ViewSource(params, len(rows), args.sh_degree, args.sh_degree)
    from app.camera import OrbitCamera

    cam = OrbitCamera(distance=5.0, up=(0, 0, 1), fov_y_deg=50)
    times = []
    for k in range(args.warmup + args.frames):
        cam.orbit(2 * math.pi / max(args.frames, 1) / 0.005, 0)
        v.state.w2c = cam.w2c()
        t = time.perf_counter()
        v.render(src, readback=args.readback)
        if k >= args.warmup:
            times.append(1000 * (time.perf_counter() - t))
    r = v.rasterizer(args.sh_degree)
    t = np.array(times)
    print(json.dumps({"bench": "viewer", "device": gpu.adapter, "gaussians": len(rows), "width": args.width,
                      "height": args.height, "frames": len(t), "readback": args.readback,
                      "intersections": int(r.m), "median_ms": float(np.median(t)), "p90_ms": float(np.percentile(t, 90)),
                      "min_ms": float(t.min()), "fps_median": float(1000 / np.median(t))}))


if __name__ == "__main__":
    main()
