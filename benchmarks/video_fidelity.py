"""Issue 52's video bar on a real trained scene: `spirula render`'s decoded frames against our
renderer's frames of the same cameras (spirula/engine/jobs/render_video.py FrameRenderer, rendered here
again, not read from the video), PSNR per frame over the whole image; frame count and
duration checked against the settings.

    python benchmarks/video_fidelity.py PROJECT_OR_SPLAT [--path orbit|training] [--width 1280]
        [--height 720] [--fps 30] [--seconds 4] [--crf N] [--chroma 420|444] [--device vulkan|cuda]
        [--json OUT.json]

Prints one JSON line: frames, expected frames, duration, min / mean / median PSNR, the
render seconds and the file's bytes. The test scene's numbers are in tests/test_render_video.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path


def psnr(a, b) -> float:
    import numpy as np

    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0 ** 2 / mse)


def main(argv=None) -> int:
    import av
    import numpy as np

    from spirula.engine.device import get_gpu
    from spirula.engine.jobs.render_video import FrameRenderer, VideoSettings, load_source, plan_cameras, render_video

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source")
    ap.add_argument("--path", default="orbit")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--crf", type=int, default=None, help="default: VideoSettings' (the product's default)")
    ap.add_argument("--chroma", default=None)
    ap.add_argument("--device", default="vulkan")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)

    s = VideoSettings(width=a.width, height=a.height, fps=a.fps, seconds=a.seconds, path=a.path)
    if a.crf is not None:
        s = replace(s, crf=a.crf)
    if a.chroma:
        s = replace(s, chroma=a.chroma)
    gpu = get_gpu(a.device)
    with tempfile.TemporaryDirectory(prefix="spirula-video-") as tmp:
        out = Path(tmp) / "v.mp4"
        t0 = time.perf_counter()
        r = render_video(a.source, out, s, gpu=gpu)
        seconds = time.perf_counter() - t0
        with av.open(str(out)) as c:
            st = c.streams.video[0]
            duration = float(st.duration * st.time_base) if st.duration else None
            decoded = [f.reformat(format="rgb24", src_colorspace="itu709").to_ndarray() for f in c.decode(video=0)]
        src = load_source(a.source)
        c2w, fovs = plan_cameras(src, s)
        frames = FrameRenderer(gpu, src.gaussians, s.width, s.height)
        values = [psnr(f, frames.render(c2w[i], fovs[i])) for i, f in enumerate(decoded)]
    res = {"source": str(a.source), "device": a.device, "path": s.path, "width": s.width, "height": s.height,
           "fps": s.fps, "seconds": s.seconds, "crf": s.crf, "chroma": s.chroma,
           "frames": len(decoded), "expected_frames": s.frames(), "duration": duration,
           "psnr_min": min(values), "psnr_mean": float(np.mean(values)), "psnr_median": float(np.median(values)),
           "render_seconds": round(seconds, 2), "bytes": r["bytes"], "gaussians": len(src.gaussians)}
    print(json.dumps(res))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
