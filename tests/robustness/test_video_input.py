"""Input class 4, video: display rotation 90/180/270, variable frame rate, 10-bit, no
video stream, a file cut short mid-stream (the frames before the cut are kept).

Lossless codecs (PNG-in-MP4, FFV1) make the expected pixels exact; the cut-short files
use H.264 without B-frames so that decode order is display order and the frames that
must survive are exactly those whose packet lies wholly before the cut.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spirula.engine.ingest.video import VideoError, iter_frames, probe

from ..ingest.videos import write_audio_only, write_video


def _encode(path: Path, frames, codec="png", pix_fmt="rgb24", rotation=None, pts=None, options=None,
            container_options=None) -> Path:
    import av

    with av.open(str(path), "w", options=container_options or {}) as c:
        s = c.add_stream(codec, rate=30, options=options or {})
        s.width, s.height, s.pix_fmt = frames[0].shape[1], frames[0].shape[0], pix_fmt
        if rotation is not None:
            s.set_display_rotation(rotation)
        for i, img in enumerate(frames):
            f = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format=pix_fmt)
            f.pts = i if pts is None else pts[i]
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_display_rotation_turns_pixels_exactly(tmp_path, rotation):
    """The display matrix says "turn counter-clockwise by R" (FFmpeg's
    av_display_rotation_get, what players and ffmpeg's autorotate do): every decoded
    frame is the stored one turned so, pixel for pixel."""
    img = np.random.default_rng(rotation).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    path = _encode(tmp_path / f"turned {rotation}.mp4", [img] * 3, rotation=rotation)
    info = probe(path)
    assert (info.rotation, info.width, info.height) == (rotation, *((24, 32) if rotation != 180 else (32, 24)))
    frames = list(iter_frames(path, info))
    assert len(frames) == 3
    for f in frames:
        np.testing.assert_array_equal(f.rgb(), np.rot90(img, rotation // 90))


def test_variable_frame_rate_and_10_bit(tmp_path):
    """Irregular timestamps give the frames' own times; 10-bit samples come back as the
    8-bit values they were made from."""
    rng = np.random.default_rng(4)
    imgs = [rng.integers(0, 256, (16, 24, 3), dtype=np.uint8) for _ in range(6)]
    pts_ms = [0, 33, 41, 150, 151, 700]
    import av

    path = tmp_path / "vfr10.mkv"
    with av.open(str(path), "w") as c:
        s = c.add_stream("ffv1", rate=30)
        s.width, s.height, s.pix_fmt = 24, 16, "gbrp10le"
        from fractions import Fraction

        s.time_base = s.codec_context.time_base = Fraction(1, 1000)
        for img, t in zip(imgs, pts_ms):
            f = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="gbrp10le")
            f.pts, f.time_base = t, Fraction(1, 1000)
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    info = probe(path)
    assert info.bit_depth == 10
    frames = list(iter_frames(path, info))
    assert [round(f.time * 1000) for f in frames] == pts_ms
    for f, img in zip(frames, imgs):
        np.testing.assert_array_equal(f.rgb(), img)


def test_no_video_stream(tmp_path):
    path = write_audio_only(tmp_path / "voice memo.m4a", layout="mono")
    with pytest.raises(VideoError) as e:
        probe(path)
    assert str(e.value) == f"{path}: no video stream (streams found: audio aac)"


def _marked(n: int, h: int = 64, w: int = 128) -> list[np.ndarray]:
    """Noisy frames (so packets are large) with a bright bar at x = 3 i .. 3 i + 2."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        img = rng.integers(40, 90, (h, w, 3), dtype=np.uint8)
        img[:, 3 * i:3 * i + 3] = 240
        out.append(img)
    return out


def _which(rgb: np.ndarray) -> int:
    cols = np.nonzero(rgb[:, :, 0].mean(axis=0) > 150)[0]
    return int(round((cols.mean() - 1) / 3)) if len(cols) else -1


@pytest.mark.parametrize("fmt", ["mkv", "mp4 (index first)", "ts"])
@pytest.mark.parametrize("fraction", [0.3, 0.62])
def test_cut_short_keeps_the_frames_before_the_cut(tmp_path, fmt, fraction):
    import av

    ext = fmt.split()[0]
    frames = _marked(40)
    full = _encode(tmp_path / f"full.{ext}", frames, codec="libx264", pix_fmt="yuv420p",
                   options={"crf": "18", "x264-params": "bframes=0"},
                   container_options={"movflags": "faststart"} if ext == "mp4" else None)
    data = full.read_bytes()
    cut = int(len(data) * fraction)
    with av.open(str(full)) as c:
        ends = [p.pos + p.size for p in c.demux(c.streams.video[0]) if p.size]
    whole = sum(end <= cut for end in ends)  # frames whose packet lies wholly before the cut
    path = tmp_path / f"cut short.{ext}"
    path.write_bytes(data[:cut])
    warnings: list[str] = []
    got = list(iter_frames(path, on_warning=warnings.append))
    assert len(got) == whole and 5 < whole < 40
    assert [_which(f.rgb()) for f in got] == list(range(whole))  # the right frames, in order, none damaged
    assert len(warnings) == 1
    if ext == "ts":  # no duration in the container: the packet the cut runs through is what shows it
        assert warnings[0] == f"{path}: 1 corrupt frames skipped"
    else:
        assert warnings[0].startswith(f"{path}: the video stream ends at {got[-1].time:.2f} s but the container "
                                      f"says it lasts 1.33 s; the file looks cut short; using the {whole} frames")


def test_unfinished_mp4_says_why(tmp_path):
    """An MP4 whose recording was interrupted has no 'moov' index (written last): the
    error names the file and says so, instead of FFmpeg's bare 'invalid data'."""
    full = write_video(tmp_path / "rec.mp4", _marked(20))
    data = full.read_bytes()
    path = tmp_path / "interrupted rec.mp4"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoError) as e:
        probe(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: cannot open as a video (")
    assert "; the file is cut short: its 'mdat' box declares" in msg
    assert msg.endswith("and the 'moov' index an MP4/MOV writes last is missing (a recording that was "
                        "interrupted); the frames cannot be located without it")
