"""Small videos written by the tests with PyAV (no external files)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np


def write_video(path: Path, frames, *, codec: str = "libx264", pix_fmt: str = "yuv420p", pts_ms=None,
                rotation: float | None = None, audio: bool = False, color_trc: int | None = None,
                options: dict | None = None) -> Path:
    """Encode ``frames`` ([H, W, 3] uint8 RGB each) to ``path``.

    pts_ms: presentation time of each frame in milliseconds (default 1000/30 apart):
    irregular values make a variable-frame-rate file. rotation: display-matrix rotation
    in degrees counter-clockwise (PyAV's ``set_display_rotation``). audio: add a short
    AAC track. color_trc: tag the frames with this transfer characteristic.
    """
    import av

    frames = list(frames)
    h, w = frames[0].shape[:2]
    if pts_ms is None:
        pts_ms = [round(i * 1000 / 30) for i in range(len(frames))]
    c = av.open(str(path), "w")
    s = c.add_stream(codec, rate=30, options=options or ({"crf": "12"} if codec == "libx264" else {}))
    s.width, s.height, s.pix_fmt = w, h, pix_fmt
    s.time_base = Fraction(1, 1000)
    s.codec_context.time_base = Fraction(1, 1000)
    if color_trc is not None:
        s.codec_context.color_trc = color_trc
        s.codec_context.color_primaries = 9   # BT.2020
        s.codec_context.colorspace = 9        # BT.2020 non-constant
    if rotation is not None:
        s.set_display_rotation(rotation)
    a = None
    if audio:
        a = c.add_stream("aac", rate=48000)
        a.layout = "stereo"
    for img, t in zip(frames, pts_ms):
        f = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
        if pix_fmt != "rgb24":
            f = f.reformat(format=pix_fmt)
        if color_trc is not None:
            f.color_trc = color_trc
        f.pts, f.time_base = int(t), s.time_base
        for p in s.encode(f):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    if a is not None:
        samples = np.zeros((2, 1024), np.float32)
        for k in range(10):
            af = av.AudioFrame.from_ndarray(samples, format="fltp", layout="stereo")
            af.sample_rate, af.pts = 48000, k * 1024
            for p in a.encode(af):
                c.mux(p)
        for p in a.encode():
            c.mux(p)
    c.close()
    return path


def textured(h: int, w: int, seed: int = 0) -> np.ndarray:
    """[h, w, 3] uint8 smooth-plus-detailed texture (random blobs and edges)."""
    rng = np.random.default_rng(seed)
    from PIL import Image, ImageFilter

    noise = (rng.random((h // 4 + 1, w // 4 + 1, 3)) * 255).astype(np.uint8)
    base = np.asarray(Image.fromarray(noise).resize((w, h), Image.Resampling.NEAREST))
    img = Image.fromarray(base).filter(ImageFilter.GaussianBlur(0.6))
    return np.asarray(img).copy()


def write_audio_only(path: Path, layout: str = "stereo") -> Path:
    """An AAC file (no video stream) of four silent frames."""
    import av

    channels = 2 if layout == "stereo" else 1
    with av.open(str(path), "w") as c:
        a = c.add_stream("aac", rate=48000)
        a.layout = layout
        for k in range(4):
            f = av.AudioFrame.from_ndarray(np.zeros((channels, 1024), np.float32), format="fltp", layout=layout)
            f.sample_rate, f.pts = 48000, k * 1024
            for p in a.encode(f):
                c.mux(p)
        for p in a.encode():
            c.mux(p)
    return path
