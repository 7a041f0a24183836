"""`spirula bench viewer`: the studio viewport's frame time on a fixed synthetic scene.

The scene: ``gaussians`` fixed-seed Gaussians in a ball of radius 2 around the origin (log
scales ~ ball size / N^(1/3), random rotations, colours and SH, opacities around 0.5: a
dense, fully covered view like a trained scene). The camera path: one full orbit at
distance 5 in the z = 0 plane (up +z, 50° vertical field of view), ``frames`` frames
after ``warmup`` untimed ones. A frame is what the studio's engine thread renders
(spirula/engine/viewer.py: the training rasterizer's forward pass at the viewport resolution,
compose, frustum lines) at a fixed render scale of 1 (no adaptive resolution); there is no
window, so the frame ends where the swapchain copy would begin. ``--readback`` adds the
host read-back of the readback fallback (the path used without a presentable surface).
Times are wall clock per ``Viewer.render`` call. As in the studio on a GPU, two frames are in
flight (spirula/engine/studio/viewer.py): a call submits its frame, then waits for the one before,
checks it and finishes it, so a call's time is the interval between frames done
(``$SPIRULA_VIEWER_FRAMES=1``, software Vulkan's default: each call waits for its own frame). ``host_ms_median`` is the part
of a call not spent waiting for the GPU (recording, submitting, Python), ``submit_ms_median``
the part of it inside the GPU submissions; ``frames_in_flight`` says which way it ran.
"""

from __future__ import annotations

import math
import time

import numpy as np


def ball_scene(n: int, sh_degree: int, seed: int = 0) -> np.ndarray:
    """Packed rows [N, D] (spirula/engine/splat/param_layout.py) of the viewer benchmark's scene."""
    from ...splat.param_layout import pack

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


def orbit_w2c(k: int, frames: int, distance: float = 5.0) -> np.ndarray:
    """World-to-camera of frame ``k`` of the orbit (``frames`` frames per turn)."""
    from ...pose import look_at

    a = 2.0 * math.pi * k / max(frames, 1)
    return look_at((distance * math.cos(a), distance * math.sin(a), 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0))


def bench_viewer(gpu, gaussians: int = 1_000_000, width: int = 1920, height: int = 1080, sh_degree: int = 3,
                 frames: int = 30, warmup: int = 3, readback: bool = False, seed: int = 0, progress=None) -> dict:
    """Render the orbit on ``gpu``; returns the JSON-ready result."""
    from ...studio import viewer as viewer_module
    from ...studio.polling import install_polling_waits, wait_polling
    from ...studio.viewer import Viewer, ViewSource

    install_polling_waits(gpu)
    waited = [0.0, 0.0]  # seconds a frame spent waiting for the GPU, and submitting

    def timed(fn, slot):
        def call(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                waited[slot] += time.perf_counter() - t
        return call
    t0 = time.perf_counter()
    rows = ball_scene(gaussians, sh_degree, seed)
    params = gpu.upload(rows, "splat.params")
    v = Viewer(gpu)
    v.adaptive, v.render_scale, v.readback_when_headless = False, 1.0, False
    v.resize(width, height)
    src = ViewSource(params, len(rows), sh_degree, sh_degree)
    setup_s = time.perf_counter() - t0
    times, host, submit = [], [], []
    viewer_module.wait_polling = timed(wait_polling, 0)
    gpu.submit = timed(gpu.submit, 1)
    try:
        for k in range(warmup + frames):
            v.state.w2c = orbit_w2c(k, frames)
            t, waited[:] = time.perf_counter(), [0.0, 0.0]
            v.render(src, readback=readback)
            if k >= warmup:
                times.append(1000 * (time.perf_counter() - t))
                host.append(times[-1] - 1000 * waited[0])
                submit.append(1000 * waited[1])
                if progress is not None:
                    progress(k + 1 - warmup, frames)
        v.finish_frame()  # the last frame in flight (untimed)
    finally:
        viewer_module.wait_polling = wait_polling
        del gpu.submit  # the class's method again
    t = np.array(times)
    # the last frame's splats left with a tile after the occlusion cut (the depth sort's count)
    kept = int(gpu.read(v.occlusion.kept, np.uint32, 1)[0]) if v.occlusion is not None else None
    return {"bench": "viewer", "device": gpu.adapter, "backend": gpu.backend, "gaussians": len(rows),
            "width": width, "height": height, "sh_degree": sh_degree, "frames": len(t), "warmup": warmup,
            "seed": seed, "readback": readback, "intersections": v.last_intersections, "setup_s": setup_s,
            "overflows": v.overflows, "recuts": v.recuts, "occlusion": v.occlusion is not None, "kept_splats": kept,
            "median_ms": float(np.median(t)), "p90_ms": float(np.percentile(t, 90)), "min_ms": float(t.min()),
            "fps_median": float(1000 / np.median(t)), "host_ms_median": float(np.median(host)),
            "submit_ms_median": float(np.median(submit)), "frames_in_flight": v.frames_in_flight,
            "frame_ms_each": t.tolist()}


def add_parser(bs) -> None:
    """``spirula bench viewer`` (registered by spirula/engine/cli/bench/commands.py)."""
    from .scene_args import add_scene_options

    p = bs.add_parser("viewer", help="studio viewport frame time: synthetic ball of Gaussians, orbiting camera")
    add_scene_options(p, 1_000_000, 1920, 1080, "viewport", ("--frames", 30, "timed frames, one orbit", "frames"))
    p.add_argument("--readback", action="store_true", help="read each frame back to the host (the readback fallback)")


def run(gpu, args) -> tuple[dict, list[str]]:
    res = bench_viewer(gpu, args.gaussians, args.width, args.height, args.sh_degree, args.frames, args.warmup,
                       args.readback, args.seed)
    line = (f"bench viewer on {res['device']}: {res['gaussians']:,} Gaussians, {res['width']}x{res['height']}, "
            f"SH {res['sh_degree']}{', readback' if res['readback'] else ''}, {res['intersections']:,} intersections, "
            + (f"{res['kept_splats']:,} splats kept after the occlusion cut: " if res['kept_splats'] is not None
               else "no occlusion cut: ") +
            f"median {res['median_ms']:.2f} ms ({res['fps_median']:.1f} fps), p90 {res['p90_ms']:.2f} ms, "
            f"min {res['min_ms']:.2f} ms over {res['frames']} frames")
    return res, [line]
