"""`spirula render <project | splat file> -o out.mp4`: a video of the scene along a camera
path (spirula/engine/jobs/render_video.py does the work; its :class:`VideoSettings` declares every setting
and its default once: the options below take them from there).

These options are plain argparse in this one place: the settings table (spirula/engine/settings.py,
branch wip-settings) covers the dataset and training settings only and did not merge into
this branch cleanly when this command was written."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .options import add_device_option, int_at_least

__all__ = ["add_parser", "cmd_render"]


def add_parser(sub) -> None:
    from ..jobs.render_video import PATHS, VideoSettings

    d = VideoSettings()
    p = sub.add_parser("render", help="render a video (H.264 MP4) of a project's or a splat file's Gaussians",
                       description="Render the Gaussians along a camera path on the GPU and encode H.264 (MP4): "
                                   "an orbit about the subject (default), the training cameras' path smoothed "
                                   "(--path training), or keyframes from a JSON file (--keyframes FILE). Written "
                                   "atomically; Ctrl-C stops without leaving a file.")
    p.add_argument("source", type=Path, help="a trained project folder (splat.ply and train.json) or a splat file")
    p.add_argument("-o", "--output", type=Path, required=True, help="the video to write (.mp4)")
    p.add_argument("--path", choices=PATHS, default=None,
                   help=f"camera path (default {d.path}; keyframes when --keyframes is given)")
    p.add_argument("--keyframes", type=Path, default=None, metavar="FILE.json",
                   help='keyframes: a JSON list of {"c2w": 4x4 camera-to-world (OpenCV axes, the scene\'s frame), '
                        '"fov": vertical degrees, optional "time": seconds}; centre and fov linear, rotation slerp')
    p.add_argument("--width", type=int_at_least(16), default=d.width, help=f"px, even (default {d.width})")
    p.add_argument("--height", type=int_at_least(16), default=d.height, help=f"px, even (default {d.height})")
    p.add_argument("--fps", type=int_at_least(1), default=d.fps, help=f"frames per second (default {d.fps})")
    p.add_argument("--seconds", type=float, default=d.seconds,
                   help=f"duration; fps x seconds must be whole (default {d.seconds:g})")
    p.add_argument("--crf", type=int, default=d.crf,
                   help=f"H.264 quality, 0..51, lower is better and larger (default {d.crf})")
    p.add_argument("--chroma", choices=("420", "444"), default=d.chroma,
                   help=f"colour resolution: 420 plays everywhere, 444 keeps every pixel's colour but not every "
                        f"player decodes it (default {d.chroma})")
    p.add_argument("--no-edit", dest="edit", action="store_false",
                   help="render the splats as trained, without the project's saved studio edit (edit.json: its "
                        "crop box and deleted splats, applied by default as `spirula export` does)")
    p.add_argument("--crop", type=float, nargs=6, default=None,
                   metavar=("XMIN", "YMIN", "ZMIN", "XMAX", "YMAX", "ZMAX"),
                   help="render only the Gaussians whose centres lie in this box (world units; the studio's bounds)")
    add_device_option(p)


def cmd_render(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..device import get_gpu
    from ..fileio import check_writable
    from ..jobs.render_video import VideoSettings, render_video
    from . import stopping

    from ..errors import SpirulaError

    path = args.path or ("keyframes" if args.keyframes else VideoSettings.path)
    if args.keyframes and path != "keyframes":  # the file would be ignored without a word
        raise SpirulaError(f"--keyframes {args.keyframes} is given with --path {path}: drop --path (or say "
                           "--path keyframes) to follow the keyframes")
    s = VideoSettings(width=args.width, height=args.height, fps=args.fps, seconds=args.seconds, crf=args.crf,
                      path=path, keyframes=str(args.keyframes or ""), chroma=args.chroma,
                      crop=tuple(args.crop) if args.crop else ())
    n = s.frames()                                   # bad settings fail before the GPU starts
    if path == "keyframes" and args.keyframes:
        from ..splat.camera_path import read_keyframes

        times = read_keyframes(args.keyframes)[2]
        end = (n - 1) / s.fps
        if times is not None and times[-1] > end + 1e-9:
            late = int((times > end + 1e-9).sum())
            print(f"warning: {late} keyframe{'s' if late > 1 else ''} of {args.keyframes} lie past the video's "
                  f"last frame ({end:g} s; the last keyframe is at {times[-1]:g} s): --seconds "
                  f"{times[-1] + 1 / s.fps:g} reaches it", file=sys.stderr)
    check_writable(args.output.parent if args.output.parent != Path("") else Path("."))
    stop = stopping.current()
    bar = tqdm(total=n, unit="frame", dynamic_ncols=True)
    try:
        with stop.between_steps(bar.write) as should_stop:
            r = render_video(args.source, args.output, s, gpu=get_gpu(args.device),
                             progress=lambda done, total: bar.update(done - bar.n), should_stop=should_stop,
                             apply_edit=args.edit)
    finally:
        bar.close()
    if r["stopped"]:
        print(f"stopped: no video written ({args.output} untouched)")
        return stop.exit_code
    print(f"{r['output']}: {r['frames']} frames, {r['seconds']:g} s at {r['fps']} fps, {r['width']} x {r['height']}, "
          f"{r['bytes']:,} bytes")
    return 0
