"""A camera-path video in the studio: RenderVideo runs spirula/engine/jobs/render_video.py render_video
(what `spirula render` runs) on the engine thread, which owns the device, with the source's
saved edit applied (as `spirula export` applies it). Its progress goes out as
StageProgress("video", done, total) messages; Cancel reaches it out of band
(Session.cancel_requested, as for the mesh stage) and leaves no file. The keyframes of the
command go to a temporary keyframe file (spirula/engine/splat/camera_path.py read_keyframes)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from . import protocol as M


def video_settings(cmd: M.RenderVideo, keyframe_file: str = ""):
    from ..jobs.render_video import VideoSettings

    return VideoSettings(width=int(cmd.width), height=int(cmd.height), fps=int(cmd.fps), seconds=float(cmd.seconds),
                         path=cmd.camera_path, keyframes=keyframe_file)


def write_command_keyframes(cmd: M.RenderVideo, path: Path) -> None:
    """The command's keyframes (and their times, if it has them) as a keyframe file."""
    from ..splat.camera_path import write_keyframes

    c2w = np.array([np.reshape(c2w, (4, 4)) for c2w, _ in cmd.keyframes], np.float64)
    fovs = np.array([fov for _, fov in cmd.keyframes], np.float64)
    write_keyframes(path, c2w, fovs, np.asarray(cmd.times, np.float64) if cmd.times else None)


class Rendering:
    def __init__(self, engine):
        self.e = engine
        self.running = False

    def render(self, cmd: M.RenderVideo) -> None:
        from ..jobs.render_video import render_video

        e = self.e
        output = Path(cmd.output)
        # a paused training too: the Cancel meant for the video would end it, read after the render
        training = "a training is under way (stop it first)" if e.training.unfinished() is not None else ""
        busy = e.loads.busy_reason() or training
        if busy:
            raise SpirulaError(f"cannot render {output}: {busy}")
        if not cmd.source:
            raise SpirulaError(f"cannot render {output}: open a trained project or a splat file first")
        if cmd.camera_path == "keyframes" and len(cmd.keyframes) < 2:
            raise SpirulaError(f"cannot render {output}: the keyframe path needs two keyframes or more "
                               f"(it has {len(cmd.keyframes)})")
        # bad settings: one line, before the state changes
        video_settings(cmd, "k.json" if cmd.camera_path == "keyframes" else "").frames()
        self.running = True  # cancel_requested was cleared when the command was sent (Session.send)
        e.state("rendering", f"video {output.name}")
        tmp = None
        try:
            if cmd.camera_path == "keyframes":
                fd, name = tempfile.mkstemp(prefix="spirula-keyframes-", suffix=".json")
                os.close(fd)
                tmp = Path(name)
                write_command_keyframes(cmd, tmp)
            r = render_video(cmd.source, output, video_settings(cmd, str(tmp or "")), gpu=e.gpu, apply_edit=True,
                             progress=lambda done, total: e.emit(M.StageProgress("video", done, total,
                                                                                 f"frame {done}/{total}")),
                             should_stop=e.s.cancel_requested.is_set)
        except Exception:
            e.state("failed", "video export failed")
            raise
        finally:
            self.running = False
            e.s.cancel_requested.clear()
            e.viewport.view_dirty = True
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        if r["stopped"]:
            e.emit(M.Warning(f"video export cancelled; nothing was written to {output}"))
            e.state("idle", "video export cancelled")
            return
        detail = f"{r['frames']} frames, {r['seconds']:g} s at {r['fps']} fps, {r['width']} x {r['height']}"
        e.emit(M.Saved("video", r["output"], detail))
        e.state("idle", f"video {output.name}: {detail}")
