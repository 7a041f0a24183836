"""A video of a scene (`spirula render <project | splat file> -o out.mp4`): the Gaussians
rendered along a camera path on the GPU by the training rasterizer's forward
(:class:`spirula.engine.splat.render.Rasterizer`, as the studio's viewer renders; over black, no
viewer gradient), encoded as H.264 by PyAV (libx264), written atomically.

The path (:class:`VideoSettings` ``path``; spirula/engine/splat/camera_path.py has the geometry):

- ``orbit`` (default): about the subject: from the training cameras when the source is a
  project (the point their optical axes meet, their median distance, height and field of
  view), else from the splats' robust extent (a 50 degree field of view);
- ``training``: the training cameras' own path (in name order) smoothed, resampled to the
  video's frames (a project only);
- ``keyframes``: a JSON file of keyframes (c2w + fov, optional time), interpolated.

A crop (``crop``: the studio's bounds box, xmin ymin zmin xmax ymax zmax) keeps the
Gaussians whose centres lie inside; the splats' orbit frames what is left.

Frames and time: ``frames = fps x seconds``, which must be a whole number (refused
otherwise), so the frame count and the duration are exact; frame ``i`` has pts ``i`` in a
time base of 1 / fps. Width and height must be even (4:2:0 chroma), 16..8192 px.

Colour: the render (display sRGB, clipped to [0, 1], rounded to 8 bits) is converted to
YUV with the BT.709 matrix, limited range, and the stream is tagged BT.709 (primaries,
transfer, matrix) so players decode it as encoded. Chroma is 4:2:0 by default (every
player and browser plays it); 4:2:0 alone caps the PSNR where colour changes from pixel to
pixel (small splats of unrelated colours at a tiny size: 38.6 dB before any encoding;
``chroma="444"``: 52-54 dB). ``crf`` (libx264's constant rate factor, 0..51, lower is
better) defaults to 12: on the test scene (160 x 120, smooth colours, 4:2:0) the decoded
frames are 40.9-41.8 dB PSNR against our renders of the same cameras (crf 16: 40.0-41.2,
crf 23: 33-35 at 96 x 64; tests/test_render_video.py holds 40).

Cancelling (``should_stop``, Ctrl-C in the CLI) and errors leave no file: frames go to a
temporary file beside the output, renamed over it only when every frame is in; an existing
output stays untouched until then.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import SpirulaError

__all__ = ["VideoSettings", "PATHS", "plan_cameras", "render_video", "load_source", "crop_source"]

PATHS = ("orbit", "training", "keyframes")


@dataclass(frozen=True)
class VideoSettings:
    """The video's settings, declared once (the CLI's options take their defaults here).
    width, height: px (even); fps: frames per second; seconds: duration; crf: libx264's
    quality (0..51, lower is better); path: one of PATHS; keyframes: the JSON file for
    ``path="keyframes"``; preset: libx264's speed preset; chroma: "420" (plays everywhere)
    or "444" (full colour resolution, High 4:4:4 profile, which not every player decodes);
    crop: () or (xmin, ymin, zmin, xmax, ymax, zmax) world units: only the Gaussians whose
    centres lie inside are rendered (the studio's bounds box; the orbit frames what is left)."""

    width: int = 1280
    height: int = 720
    fps: int = 30
    seconds: float = 8.0
    crf: int = 12
    path: str = "orbit"
    keyframes: str = ""
    preset: str = "medium"
    chroma: str = "420"
    crop: tuple = ()

    def frames(self) -> int:
        """The frame count; SpirulaError when the settings are out of range or fps x
        seconds is not a whole number."""
        if not (16 <= self.width <= 8192 and 16 <= self.height <= 8192) or self.width % 2 or self.height % 2:
            raise SpirulaError(f"video size {self.width} x {self.height}: width and height must be even, 16..8192 px "
                               "(H.264 4:2:0)")
        if not 1 <= self.fps <= 240:
            raise SpirulaError(f"--fps {self.fps}: must be a whole number in 1..240")
        if not 0 <= self.crf <= 51:
            raise SpirulaError(f"--crf {self.crf}: must be in 0..51 (lower is better quality)")
        if self.chroma not in ("420", "444"):
            raise SpirulaError(f"--chroma {self.chroma}: 420 or 444")
        if self.crop and (len(self.crop) != 6 or not all(math.isfinite(v) for v in self.crop)
                          or any(self.crop[i] >= self.crop[i + 3] for i in range(3))):
            raise SpirulaError(f"--crop {' '.join(f'{v:g}' for v in self.crop)}: six finite numbers, xmin ymin zmin "
                               "xmax ymax zmax, each min below its max")
        if self.path not in PATHS:
            raise SpirulaError(f"camera path {self.path!r}: one of {', '.join(PATHS)}")
        n = self.fps * self.seconds
        if not math.isfinite(n) or n < 1 or abs(n - round(n)) > 1e-6:
            raise SpirulaError(f"--seconds {self.seconds:g} at --fps {self.fps} is {n:g} frames: the duration must be "
                               "a whole number of frames, at least one")
        return int(round(n))


@dataclass
class Source:
    """What a video is made of: the Gaussians and, for a project, its training cameras
    (c2w [K, 4, 4] in name order, vertical fov [K] degrees)."""

    path: Path
    gaussians: object
    c2w: np.ndarray | None = None
    fovs: np.ndarray | None = None


def load_source(source: str | os.PathLike) -> Source:
    """The Gaussians of a project folder (its trained splat.ply; the cameras from the
    dataset its train.json names, poses only) or of a splat file / SOG folder."""
    from ..io.export_command import source_file
    from ..io.formats import read_any
    from .project_layout import trained_folder

    source = Path(source)
    if source.is_dir() and ((source / "train.json").is_file() or (source / "train" / "train.json").is_file()):
        folder = trained_folder(source)
        g = read_any(folder / "splat.ply", warn=False)
        c2w, fovs = _training_cameras(source, folder)
        return Source(folder / "splat.ply", g, c2w, fovs)
    path = source_file(source)
    return Source(path, read_any(path, warn=False))


def _training_cameras(project: Path, folder: Path) -> tuple[np.ndarray | None, np.ndarray | None]:
    import json

    from ..ingest.load import read_scene
    from ..splat.camera_path import fov_of

    try:
        train = json.loads((folder / "train.json").read_text(encoding="utf-8"))
        dataset = Path(train["dataset"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    if not dataset.exists() and (project / "sparse" / "0").is_dir():
        dataset = project                       # a `spirula run` project moved since its training
    if not dataset.exists():
        return None, None
    views = sorted(read_scene(dataset).views, key=lambda v: v.name)
    if not views:
        return None, None
    c2w = np.stack([np.linalg.inv(v.w2c) for v in views])
    fovs = np.array([fov_of(v.camera.fy, v.camera.height) for v in views])
    return c2w, fovs


def crop_source(src: Source, crop) -> Source:
    """``src`` with only the Gaussians whose centres lie in the box ``crop`` (xmin ymin zmin
    xmax ymax zmax, bounds included); SpirulaError when none is left."""
    lo, hi = np.asarray(crop[:3], np.float64), np.asarray(crop[3:], np.float64)
    m = np.asarray(src.gaussians.means, np.float64)
    keep = np.all((m >= lo) & (m <= hi), axis=1)
    if not keep.any():
        raise SpirulaError(f"{src.path}: no Gaussian's centre lies inside the crop box "
                           f"{' '.join(f'{v:g}' for v in crop)} (of {len(m):,})")
    return Source(src.path, src.gaussians.subset(keep), src.c2w, src.fovs)


def plan_cameras(src: Source, s: VideoSettings) -> tuple[np.ndarray, np.ndarray]:
    """([F, 4, 4] c2w, [F] vertical fov degrees) of every frame (module docstring)."""
    from ..splat import camera_path as cp

    n = s.frames()
    if s.path == "keyframes":
        if not s.keyframes:
            raise SpirulaError("the keyframes path needs a keyframe file (--keyframes FILE.json)")
        c2w, fovs, times = cp.read_keyframes(s.keyframes)
        return cp.keyframe_path(c2w, fovs, times, n, s.fps)
    if s.path == "training":
        if src.c2w is None:
            raise SpirulaError(f"{src.path}: the training path needs a project whose dataset is found (its cameras); "
                               "this source has none: use the orbit or keyframes")
        return cp.smoothed_path(src.c2w, src.fovs, n)
    if src.c2w is not None:
        c2w, fov = cp.orbit_from_cameras(src.c2w, src.fovs, n)
        return c2w, np.full(n, fov)
    if len(src.gaussians) == 0:
        raise SpirulaError(f"{src.path}: holds no Gaussians to render")
    return cp.orbit_from_splats(src.gaussians.means, n), np.full(n, 50.0)


class FrameRenderer:
    """Renders frames of packed Gaussians for cameras (c2w, fov) at a size: [H, W, 3] uint8
    (the rasterizer's float image clipped to [0, 1] and rounded)."""

    def __init__(self, gpu, g, width: int, height: int):
        from ..splat.param_layout import pack
        from ..splat.render import Rasterizer

        self.gpu, self.w, self.h, self.deg = gpu, width, height, g.sh_degree
        rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, g.sh_degree)
        self.n = len(rows)
        self.params = gpu.upload(rows, "video.params")
        self.raster = Rasterizer(gpu, g.sh_degree)

    def render(self, c2w: np.ndarray, fov: float) -> np.ndarray:
        from ..splat.camera_path import intrinsics
        from ..splat.camera_table import View, camera_row

        fx, fy, cx, cy = intrinsics(fov, self.w, self.h)
        cams = self.gpu.upload(camera_row(np.linalg.inv(c2w), fx, fy, cx, cy, self.w, self.h)[None], "video.camera")
        img = self.raster.render(self.params, self.n, cams, View(0, self.w, self.h), self.deg)
        return (np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def _open_stream(tmp: Path, s: VideoSettings):
    import av

    container = av.open(str(tmp), "w", format="mp4")
    stream = container.add_stream("libx264", rate=Fraction(s.fps))
    stream.width, stream.height, stream.pix_fmt = s.width, s.height, f"yuv{s.chroma}p"
    stream.time_base = Fraction(1, s.fps)
    cc = stream.codec_context
    cc.time_base = Fraction(1, s.fps)
    cc.options = {"crf": str(s.crf), "preset": s.preset}
    cc.colorspace, cc.color_primaries, cc.color_trc, cc.color_range = 1, 1, 1, 1   # BT.709, limited range
    return container, stream


def render_video(source: str | os.PathLike, output: str | os.PathLike, settings: VideoSettings | None = None, *,
                 gpu=None, progress: Callable[[int, int], None] | None = None,
                 should_stop: Callable[[], bool] | None = None, apply_edit: bool = False) -> dict:
    """Render ``source`` (:func:`load_source`) along the settings' path into the H.264 MP4
    ``output``; ``apply_edit``: the source's saved studio edit (spirula/engine/io/splat_edit.py
    apply_saved_edit: crop, deleted splats), if it has one, is applied first. Returns {"output", "frames", "seconds", "fps", "width", "height", "bytes",
    "stopped"}; ``progress(done, total)`` after each frame; when ``should_stop()`` turns true
    the temporary file is removed and nothing is written ("stopped": True)."""
    import av

    s = settings or VideoSettings()
    n = s.frames()
    output = Path(output)
    if output.suffix.lower() not in (".mp4", ".m4v", ".mov"):
        raise SpirulaError(f"{output}: the video is H.264 in MP4: name it .mp4")
    src = load_source(source)
    if apply_edit:
        from ..io.splat_edit import apply_saved_edit

        src = Source(src.path, apply_saved_edit(src.path, src.gaussians)[0], src.c2w, src.fovs)
        if len(src.gaussians) == 0:
            raise SpirulaError(f"{src.path}: its saved edit leaves no Gaussian to render")
    if s.crop:
        src = crop_source(src, s.crop)
    c2w, fovs = plan_cameras(src, s)
    if gpu is None:
        from ..device import get_gpu

        gpu = get_gpu()
    frames = FrameRenderer(gpu, src.gaussians, s.width, s.height)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.stem}.{os.getpid()}.partial{output.suffix}")
    done = False
    try:
        container, stream = _open_stream(tmp, s)
        try:
            for i in range(n):
                if should_stop is not None and should_stop():
                    break
                frame = av.VideoFrame.from_ndarray(frames.render(c2w[i], float(fovs[i])), format="rgb24")
                frame = frame.reformat(format=f"yuv{s.chroma}p", dst_colorspace="itu709")
                frame.pts = i
                for packet in stream.encode(frame):
                    container.mux(packet)
                if progress is not None:
                    progress(i + 1, n)
            else:
                for packet in stream.encode():
                    container.mux(packet)
                done = True
        finally:
            container.close()
        if done:
            os.replace(tmp, output)
    finally:
        if not done:
            tmp.unlink(missing_ok=True)
    return {"output": str(output), "frames": n if done else 0, "seconds": n / s.fps if done else 0.0, "fps": s.fps,
            "width": s.width, "height": s.height, "bytes": output.stat().st_size if done else 0, "stopped": not done}
