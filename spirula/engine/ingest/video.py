"""Video files through PyAV (FFmpeg): probe, and stream decoded frames one at a time.

Memory stays bounded: frames are yielded as they are decoded and never collected.
Only the first video stream is demuxed; audio, subtitle and data streams are ignored.

Conventions:
* time: seconds from the first decoded frame, from each frame's pts x time_base
  (variable frame rate safe); a frame without pts gets the previous time + 1 / rate.
* rotation: the display matrix's rotation in degrees counter-clockwise (FFmpeg's
  ``av_display_rotation_get``, PyAV's ``frame.rotation``); frames are turned by it so
  that images come out upright as players show them (``np.rot90(img, k=rotation / 90)``).
  A rotation that is not a multiple of 90 degrees is rounded to one, with a warning.
* luma: [h, w] float32 Y' plane in code values scaled to 0..255 (no colour conversion),
  optionally box-downscaled by an integer factor, rotated like the frame.
* rgb: [H, W, 3] uint8 sRGB, rotated. SDR through swscale (the frame's matrix and range)
  with point (nearest) chroma: swscale's 8-bit 4:2:0 path takes each pixel's chroma
  sample as it is, its general path (10/12-bit) would interpolate it, so a 10-bit encode
  came out 2.3-4.5/255 (mean) off the 8-bit encode of the same frames; with point chroma
  for every depth they agree within 1.2/255 (tests/ingest/test_video.py). HDR (PQ / HLG
  transfer) through :func:`spirula.engine.ingest.color.hdr_to_srgb8`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from ..optional import need
from .color import hdr_to_srgb8, hdr_transfer

VIDEO_EXTENSIONS = {".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi", ".mts", ".m2ts", ".3gp", ".mpg", ".mpeg",
                    ".wmv", ".flv", ".ts", ".hevc", ".h264", ".264", ".265", ".ogv"}

# Pixel formats whose first plane is the luma plane (Y'), 8 or 16 bits per sample.
_LUMA_FIRST = ("yuv", "yuvj", "nv12", "nv21", "nv16", "nv24", "p010", "p016", "p210", "p410", "gray")


class VideoError(SpirulaError):
    """A video file cannot be opened or decoded; the message names the file."""


@dataclass
class VideoInfo:
    """What the container says about the video stream (before decoding it all).

    width, height: upright size in pixels (after the rotation); coded_width/height as
    stored. duration_s: container or stream duration (0 when unknown). frame_count:
    the stream's count, or duration x rate when unknown (0 when both are). bit_depth:
    bits per luma sample of the decoded pixel format. hdr: 'pq', 'hlg' or None.
    """

    path: Path
    codec: str
    width: int
    height: int
    coded_width: int
    coded_height: int
    rotation: int
    fps: float
    duration_s: float
    frame_count: int
    pix_fmt: str
    bit_depth: int
    hdr: str | None
    audio_streams: int
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"codec": self.codec, "size": [self.width, self.height], "rotation": self.rotation,
                "fps": round(self.fps, 3), "duration_s": round(self.duration_s, 3), "frame_count": self.frame_count,
                "pix_fmt": self.pix_fmt, "bit_depth": self.bit_depth, "hdr": self.hdr,
                "audio_streams_ignored": self.audio_streams}


@dataclass
class DecodedFrame:
    """One decoded frame: its index in decode order, time in seconds, and accessors."""

    index: int
    time: float
    frame: object                  # av.VideoFrame
    rotation: int                  # degrees counter-clockwise, a multiple of 90
    hdr: str | None

    def luma(self, factor: int = 1) -> np.ndarray:
        """[h, w] float32 luma 0..255, box-downscaled by ``factor`` (partial border
        blocks dropped), rotated upright."""
        return _rotate(box_reduce(_luma_plane(self.frame), factor), self.rotation)

    def rgb(self) -> np.ndarray:
        """[H, W, 3] uint8 sRGB, rotated upright (see the module docstring)."""
        f = self.frame
        kw = {}
        if getattr(f, "color_range", 0):
            kw["src_color_range"] = f.color_range
            kw["dst_color_range"] = "JPEG"
        if self.hdr is not None:
            img = hdr_to_srgb8(f.to_ndarray(format="rgb48le", **kw), self.hdr)
        else:
            img = f.to_ndarray(format="rgb24", interpolation="POINT", **kw)  # chroma as 8-bit 4:2:0 takes it
        return np.ascontiguousarray(_rotate(img, self.rotation))


def _av():
    return need("av")  # the `video` extra: a one-line MissingExtraError when it is not installed


def _open(path: Path):
    av = _av()
    path = Path(path)
    if not path.exists():
        raise VideoError(f"{path}: file not found")
    if path.is_dir():
        raise VideoError(f"{path}: is a folder, not a video file")
    try:
        container = av.open(str(path), mode="r", metadata_errors="ignore")
    except av.error.FFmpegError as e:
        hint = _mp4_index_problem(path)
        raise VideoError(f"{path}: cannot open as a video ({_reason(e)}){'; ' + hint if hint else ''}") from e
    except OSError as e:
        raise VideoError(f"{path}: cannot read ({e.strerror or e})") from e
    if not container.streams.video:
        kinds = ", ".join(f"{s.type} {getattr(s.codec_context, 'name', '?')}" for s in container.streams) or "none"
        container.close()
        raise VideoError(f"{path}: no video stream (streams found: {kinds})")
    return container


def _mp4_index_problem(path: Path) -> str | None:
    """Why an MP4 / MOV (ISO base media) file cannot be opened, from its top-level boxes:
    a recording that was interrupted has its media data but not the 'moov' index, which
    is written last. None when the file is not of that kind or has its index."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            pos, kinds, cut = 0, [], None
            while pos + 8 <= size and len(kinds) < 1000:
                f.seek(pos)
                head = f.read(16)
                box_size, kind = int.from_bytes(head[:4], "big"), head[4:8]
                if box_size == 1 and len(head) >= 16:
                    box_size = int.from_bytes(head[8:16], "big")
                elif box_size == 0:
                    box_size = size - pos
                if box_size < 8 or not kind.isalnum() and kind != b"uuid":
                    break
                kinds.append(kind)
                if pos + box_size > size:
                    cut = (kind.decode("latin-1"), box_size, size - pos)
                    break
                pos += box_size
    except OSError:
        return None
    if not kinds or kinds[0] != b"ftyp" or b"moov" in kinds:
        return None
    if cut is not None:
        return (f"the file is cut short: its '{cut[0]}' box declares {cut[1]} bytes but only {cut[2]} are there, "
                "and the 'moov' index an MP4/MOV writes last is missing (a recording that was interrupted); "
                "the frames cannot be located without it")
    return "the file has no 'moov' index (an MP4/MOV recording that was not finished)"


def _reason(e: Exception) -> str:
    return getattr(e, "strerror", None) or str(e)


def _bit_depth(fmt) -> int:
    try:
        return int(max(c.bits for c in fmt.components))
    except (AttributeError, ValueError):
        return 8


def _snap_rotation(deg: float) -> int:
    if deg is None or not math.isfinite(deg):
        return 0
    return int(round(deg / 90.0)) * 90 % 360


def probe(path: Path) -> VideoInfo:
    """Read the container header and the first frame (for rotation, pixel format and
    colour transfer); VideoError naming ``path`` if it is not a decodable video."""
    path = Path(path)
    container = _open(path)
    try:
        stream = container.streams.video[0]
        cc = stream.codec_context
        problems: list[tuple[str, str]] = []
        first = next(_decode_tolerant(container, stream, problems), None)
        if first is None:
            why = f": {problems[0][1]}" if problems else ""
            raise VideoError(f"{path}: the video stream ({cc.name}) has no decodable frame{why}")
        warnings = []
        raw_rot = float(first.rotation or 0)
        rotation = _snap_rotation(raw_rot)
        if abs(((raw_rot % 360) - rotation + 180) % 360 - 180) > 1:
            warnings.append(f"{path}: display rotation {raw_rot:.1f} deg is not a multiple of 90; using {rotation}")
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        fps = float(rate) if rate else 0.0
        duration = 0.0
        if stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        elif container.duration:
            duration = container.duration / 1_000_000
        frames = int(stream.frames or 0) or (int(round(duration * fps)) if fps and duration else 0)
        fmt = first.format
        w, h = first.width, first.height
        uw, uh = (h, w) if rotation in (90, 270) else (w, h)
        return VideoInfo(path=path, codec=cc.name, width=uw, height=uh, coded_width=w, coded_height=h,
                         rotation=rotation, fps=fps, duration_s=duration, frame_count=frames, pix_fmt=fmt.name,
                         bit_depth=_bit_depth(fmt), hdr=hdr_transfer(getattr(first, "color_trc", None)),
                         audio_streams=len(container.streams.audio), warnings=warnings)
    finally:
        container.close()


_MAX_BAD_PACKETS = 100  # consecutive packets the decoder rejects before decoding gives up


def _decode_tolerant(container, stream, problems: list[tuple[str, str]]):
    """Frames of ``stream`` as ffmpeg itself would give them: a packet the decoder
    rejects (a damaged or cut-off packet) is skipped; a demuxer error (the file ends
    mid-packet, unreadable bytes) ends the stream after the decoder has given back the
    frames it holds. ``problems`` receives ("decode" | "demux", reason) for each."""
    av = _av()
    demux = container.demux(stream)
    bad = 0
    damaged: set[int] = set()
    while True:
        try:
            packet = next(demux)
        except StopIteration:
            return
        except av.error.FFmpegError as e:
            problems.append(("demux", _reason(e)))
            try:
                yield from stream.codec_context.decode(None)  # drain what the decoder holds
            except av.error.FFmpegError:
                pass
            return
        if packet.is_corrupt and packet.pts is not None:
            damaged.add(packet.pts)  # e.g. the packet a cut runs through: its frame is concealment
        try:
            frames = packet.decode()
        except av.error.FFmpegError as e:
            problems.append(("decode", _reason(e)))
            bad += 1
            if bad > _MAX_BAD_PACKETS:
                return
            continue
        bad = 0
        for frame in frames:
            if frame.pts is not None and frame.pts in damaged:
                problems.append(("damaged", "packet flagged corrupt by the demuxer"))
                continue
            yield frame


def iter_frames(path: Path, info: VideoInfo | None = None,
                on_warning: Callable[[str], None] | None = None) -> Iterator[DecodedFrame]:
    """Decode the first video stream of ``path`` frame by frame (bounded memory).

    Corrupt frames (flagged by the decoder) and packets the decoder rejects are skipped
    with a warning; a file cut short mid-stream gives the frames before the cut, with a
    warning (also when the stream simply ends well before the duration the container
    announces); no frame at all raises VideoError naming the file.
    """
    info = info or probe(path)
    container = _open(path)
    problems: list[tuple[str, str]] = []
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        tb = stream.time_base
        step = 1.0 / info.fps if info.fps > 0 else 1.0 / 30.0
        index, t0, last_t, corrupt = 0, None, None, 0
        for frame in _decode_tolerant(container, stream, problems):
            if frame.is_corrupt:
                corrupt += 1
                continue
            if frame.pts is not None and (frame.time_base or tb) is not None:
                t = float(frame.pts * (frame.time_base or tb))
            else:
                t = (last_t + step) if last_t is not None else 0.0
            if t0 is None:
                t0 = t
            t -= t0
            if last_t is not None and t <= last_t - 1e-9:
                t = last_t + 1e-6   # keep times increasing (broken pts)
            last_t = t
            yield DecodedFrame(index, t, frame, info.rotation, info.hdr)
            index += 1
        if index == 0:
            why = f": {problems[0][1]}" if problems else ""
            raise VideoError(f"{path}: the video stream ({info.codec}) has no decodable frame{why}")
        if on_warning:
            for line in _decode_report(path, index, last_t, corrupt, problems, info, step):
                on_warning(line)
    finally:
        container.close()


def _decode_report(path: Path, n: int, last_t: float, corrupt: int, problems: list[tuple[str, str]],
                   info: VideoInfo, step: float) -> list[str]:
    out = []
    rejected = [why for kind, why in problems if kind == "decode"]
    if rejected:
        out.append(f"{path}: {len(rejected)} damaged packets skipped ({rejected[0]})")
    corrupt += sum(kind == "damaged" for kind, _ in problems)
    if corrupt:
        out.append(f"{path}: {corrupt} corrupt frames skipped")
    demux = [why for kind, why in problems if kind == "demux"]
    if demux:
        out.append(f"{path}: reading stopped after {n} frames (t = {last_t:.2f} s): {demux[0]}; "
                   "the file looks cut short; using the frames decoded so far")
    elif info.duration_s > 0 and last_t + 2 * step < 0.95 * info.duration_s:
        out.append(f"{path}: the video stream ends at {last_t:.2f} s but the container says it lasts "
                   f"{info.duration_s:.2f} s; the file looks cut short; using the {n} frames decoded")
    return out


def box_reduce(img: np.ndarray, k: int) -> np.ndarray:
    """[H, W] -> [H // k, W // k] float32 mean of k x k blocks (partial border blocks
    dropped). Sums k strided row slices then k column slices (2k whole-array adds,
    much faster in NumPy than a reshaped mean over two axes)."""
    g = np.asarray(img, np.float32)
    if k <= 1:
        return g
    h, w = (g.shape[0] // k) * k, (g.shape[1] // k) * k
    g = g[:h, :w]
    rows = g[0::k].copy()
    for i in range(1, k):
        rows += g[i::k]
    out = rows[:, 0::k].copy()
    for i in range(1, k):
        out += rows[:, i::k]
    out *= np.float32(1.0 / (k * k))
    return out


def is_video_file(path: Path) -> bool:
    """True for a file with a known video extension (the content is checked on open)."""
    return Path(path).is_file() and Path(path).suffix.lower() in VIDEO_EXTENSIONS


def _luma_plane(frame) -> np.ndarray:
    """The Y' plane as [H, W] float32 0..255, read in place for Y'CbCr / grey formats,
    through swscale otherwise."""
    fmt = frame.format
    if fmt.name.startswith(_LUMA_FIRST) and not fmt.name.endswith("be"):
        plane = frame.planes[0]
        bits = _bit_depth(fmt)
        if bits <= 8:
            raw = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:, : plane.width]
            return raw.astype(np.float32)
        raw = np.frombuffer(plane, "<u2").reshape(plane.height, plane.line_size // 2)[:, : plane.width]
        shift = 16 if fmt.name.startswith(("p010", "p016", "p210", "p410")) else bits  # MSB-aligned formats
        return raw.astype(np.float32) * np.float32(255.0 / ((1 << shift) - 1))
    return frame.to_ndarray(format="gray").astype(np.float32)


def _rotate(img: np.ndarray, rotation: int) -> np.ndarray:
    k = (rotation // 90) % 4
    return np.rot90(img, k=k) if k else img
