"""The engine thread's viewport: the view commands (camera, mode, size, surface, frame
requests, screenshots), when a frame is due, and rendering it through the Viewer
(spirula/engine/studio/viewer.py) into the window's swapchain or the latest-value slot.

While training, frames take at most about half the engine's time (a frame waits as long
as the last one took), except while the camera moves and a training step would not fit
beside a frame in 3/4 of 1/60 s: then training waits (spirula/engine/studio/training.py). A still
view gets one full-resolution frame after a moment (the adaptive resolution only applies
while things move)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from . import protocol as M

log = logging.getLogger("spirula.session")

FRUSTUM_SIZE = 0.035   # frustum depth, x the cameras' extent (scene_extent's radius)
MOVING_HOLD_S = 0.25   # the camera counts as moving this long after its last change

STATS_INTERVAL = 0.5  # s between ViewerStats messages


class Viewport:
    """The viewport's state on the engine thread (``viewer`` is None without one)."""

    def __init__(self, engine):
        self.e = engine
        self.viewer = None
        self.view_dirty = False       # the user changed the view: a frame is owed
        self.moved_at = float("-inf")  # perf_counter() of the last camera change
        self.model_dirty = False      # the Gaussians changed (training)
        self.readback_requests = 0
        self.readback_tag = 0
        self.last_frame = 0.0
        self.last_stats = 0.0
        self.stats_frames = -1        # viewer frame count of the last ViewerStats
        self.reported_mode = None
        self.refine_at: float | None = None
        self._seg_key = None
        self.frustum_scale = 1.0      # the window's frustum size, x FRUSTUM_SIZE
        self.path = None              # M.SetPath: the video's keyframes and path, drawn
        self.bounds: tuple = ()       # the mesh stage's box (6 floats) drawn in the viewport, or ()
        self.bounds_frame: tuple = ()  # its frame (9 floats, rows the box's axes; (): the world's axes)
        self.highlight = -1           # its face whose handle is under the mouse (-1: none)

    # --- commands ----------------------------------------------------------------------------
    def set_view(self, cmd: M.SetView) -> None:
        v = self.viewer
        if v is not None:
            v.state.w2c = np.asarray(cmd.w2c, np.float64).reshape(4, 4)
            v.state.fov_y_deg = float(cmd.fov_y_deg)
            v.state.camera = cmd.camera
            self.update_segments()
        self.view_dirty = True
        self.moved_at = time.perf_counter()

    def camera_moving(self) -> bool:
        """The user moved the camera within the last MOVING_HOLD_S seconds (a drag sends a
        SetView every 16 ms)."""
        return time.perf_counter() - self.moved_at < MOVING_HOLD_S

    def set_mode(self, cmd: M.SetViewMode) -> None:
        v = self.viewer
        if v is not None:
            v.state.mode = cmd.mode if cmd.mode in ("splats", "gt", "error") else "splats"
            v.state.frustums = cmd.frustums
            v.state.show_mesh = bool(cmd.mesh)
            from .mesh_raster import SHADINGS

            v.state.mesh_shading = cmd.mesh_shading if cmd.mesh_shading in SHADINGS else "texture"
            if cmd.frustum_scale != self.frustum_scale:
                self.frustum_scale = max(float(cmd.frustum_scale), 1e-3)
                self.update_segments()
        self.view_dirty = True

    def resize(self, cmd: M.ResizeViewport) -> None:
        if self.viewer is not None:
            self.viewer.resize(cmd.width, cmd.height)
        self.view_dirty = True

    def request_frame(self, cmd: M.RequestFrame) -> None:
        self.view_dirty = True
        self.readback_requests += int(cmd.readback)
        if cmd.readback:
            self.readback_tag = max(self.readback_tag, cmd.tag)

    def attach(self, cmd: M.AttachSurface) -> None:
        v = self.viewer
        if v is None:
            return
        v.resize(cmd.width, cmd.height)
        if os.environ.get("SPIRULA_VIEWER", "").lower() == "readback":
            v.readback_reason = "SPIRULA_VIEWER=readback"
        else:
            reason = v.attach(cmd.platform, tuple(cmd.handle), cmd.width, cmd.height)
            if reason:
                v.readback_reason = reason
        self.view_dirty = True
        self.emit_mode()

    def detach(self, cmd: M.DetachSurface) -> None:
        v = self.viewer
        if v is not None:
            v.detach()
            v.readback_reason = "the window surface was detached"
        self.emit_mode()

    def screenshot(self, cmd: M.SaveScreenshot) -> None:
        from PIL import Image

        path = Path(cmd.path)
        pixels = self.render(force_readback=True)
        if pixels is None:
            raise SpirulaError(f"cannot save {path}: the viewport has no size yet")
        bgra = pixels.view(np.uint8).reshape(pixels.shape[0], pixels.shape[1], 4)
        rgb = np.ascontiguousarray(bgra[..., 2::-1])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        Image.fromarray(rgb).save(tmp, format="PNG")
        os.replace(tmp, path)
        self.e.emit(M.Saved("screenshot", str(path), f"{rgb.shape[1]}x{rgb.shape[0]}"))

    # --- the scene and the presentation mode -------------------------------------------------
    def emit_mode(self) -> None:
        v = self.viewer
        if v is None:
            return
        mode = "swapchain" if v.presenting else "readback"
        key = (mode, v.readback_reason)
        if key != self.reported_mode:
            self.reported_mode = key
            if mode == "readback":
                log.warning("viewport: readback to QImage (%s)", v.readback_reason)
            else:
                log.info("viewport: presenting into the window (Vulkan swapchain)")
            self.e.emit(M.ViewerStatus(mode, "" if mode == "swapchain" else v.readback_reason))

    def scene_changed(self) -> None:
        """A new scene is on show: its camera frustums, and a frame."""
        self._seg_key = None
        if self.viewer is not None:
            self.viewer.state.camera = None
        self.update_segments()
        self.view_dirty = True

    def set_split(self, cmd: M.SetSplit) -> None:
        """A review's split changed: its frustums' colours follow."""
        sc = self.e.scene
        if hasattr(sc, "set_split"):
            sc.set_split(cmd.held_out, cmd.excluded)
            self._seg_key = None
            self.update_segments()
            self.view_dirty = True

    def set_bounds(self, cmd: M.SetBounds) -> None:
        """The mesh stage's box, drawn in the viewport (none: empty)."""
        self.bounds = tuple(float(x) for x in cmd.bounds) if len(cmd.bounds) == 6 else ()
        self.bounds_frame = tuple(float(x) for x in cmd.frame) if self.bounds and len(cmd.frame) == 9 else ()
        self.highlight = int(cmd.highlight) if self.bounds and 0 <= cmd.highlight < 6 else -1
        self.update_segments()
        self.view_dirty = True

    def set_path(self, cmd: M.SetPath) -> None:
        """The video's keyframes and path, drawn in the viewport (none: empty)."""
        self.path = cmd if cmd.keyframes or cmd.points else None
        self.update_segments()
        self.view_dirty = True

    def edit_changed(self) -> None:
        """The splat edit changed (spirula/engine/studio/editing.py): its crop box drawn, a frame."""
        self._seg_key = None
        self.update_segments()
        self.view_dirty = True

    def update_segments(self) -> None:
        from .overlays import box_segments, frustum_segments, keyframe_segments

        v = self.viewer
        sc = self.e.scene
        if v is None:
            return
        dataset = getattr(sc, "dataset", None)  # a training or a review
        cams = dataset.cameras if dataset is not None else []
        key = (id(sc), v.state.camera, self.frustum_scale, self.bounds, self.bounds_frame, self.highlight, self.path)
        if self._seg_key == key:
            return
        self._seg_key = key
        segs, cols = (box_segments(self.bounds, self.highlight, self.bounds_frame) if self.bounds else
                      (np.zeros((0, 6), np.float32), np.zeros(0, np.uint32)))
        crop_segs, crop_cols = self.e.editing.segments()  # the splat edit's crop box
        segs, cols = np.concatenate([segs, crop_segs]), np.concatenate([cols, crop_cols])
        if self.path is not None:  # the video's keyframes and path
            ps, pc = keyframe_segments(self.path.keyframes, self.path.points, self.path.size, self.path.aspect)
            segs, cols = np.concatenate([segs, ps]), np.concatenate([cols, pc])
        if cams:
            test, out = set(sc.test_idx), set(getattr(sc, "excluded_idx", ()))
            splits = ["excluded" if i in out else "test" if i in test else "train" for i in range(len(cams))]
            _, radius = dataset.scene_extent()
            fs, fc = frustum_segments(cams, FRUSTUM_SIZE * radius * self.frustum_scale, v.state.camera, splits)
            segs, cols = np.concatenate([segs, fs]), np.concatenate([cols, fc])
        v.set_segments(segs, cols)

    # --- when a frame is due -----------------------------------------------------------------
    def model_frame_due(self) -> bool:
        if not self.model_dirty or self.viewer is None:
            return False
        interval = max(1.0 / 30.0, 3.0 * self.viewer.last_frame_ms / 1000.0)
        return time.perf_counter() - self.last_frame >= interval

    def view_frame_due(self) -> bool:
        """A frame the user asked for (camera, mode, size). While training, frames take at
        most about half the engine's time: the next one waits as long as the last took
        (unless training waits for the moving camera: then every change is shown)."""
        if not (self.view_dirty or self.readback_requests) or self.viewer is None:
            return False
        if not self.e.training.running or self.e.training.yields_to_view():
            return True
        interval = max(1.0 / 60.0, self.viewer.last_frame_ms / 1000.0)
        return time.perf_counter() - self.last_frame >= interval

    def frame_in_flight(self) -> bool:
        """A frame is submitted but not shown yet (the next render() call shows it)."""
        return self.viewer is not None and self.viewer.in_flight

    def refine_due(self) -> bool:
        """A full-resolution frame once the view has been still for a moment (the adaptive
        resolution only applies while things move)."""
        return (self.refine_at is not None and time.perf_counter() >= self.refine_at
                and not self.e.training.running)

    # --- rendering ---------------------------------------------------------------------------
    def render(self, force_readback: bool = False):
        """A frame when one is due (or ``force_readback``): presented, or its pixels put in
        the session's preview slot; returns the pixels read back, or None."""
        v = self.viewer
        if v is None or v.state.width <= 0 or v.state.height <= 0:
            return None
        refine = self.refine_due() and not self.view_dirty
        if not (self.view_frame_due() or self.model_frame_due() or force_readback or refine):
            if v.in_flight:  # nothing more is due: show the last frame now
                from .surface import PresentError

                try:
                    v.finish_frame()
                except PresentError:
                    self.emit_mode()
            self._emit_stats()  # the last frames may have come inside the throttle window
            return None
        from ..profile import scope
        from .surface import PresentError

        readback = force_readback or self.readback_requests > 0
        full = refine or force_readback  # screenshots at full resolution
        src = self.e.scene.source() if self.e.scene is not None else None
        with scope("viewer"):  # the profiler counts the viewer's kernels apart from the training's
            try:
                pixels = v.render(src, readback=readback, full_res=full, moving=self.camera_moving())
            except PresentError:
                self.emit_mode()
                pixels = v.render(src, readback=True, full_res=full)
        self.view_dirty = self.model_dirty = False
        self.last_frame = time.perf_counter()
        self.refine_at = None if v.last_full_res else self.last_frame + 0.4
        if pixels is not None and (readback or not v.presenting):
            tag = self.readback_tag if readback else 0
            # an unread answer to a tagged request is not overwritten by an ordinary frame
            w2c, intrinsics = v.last_camera
            self.e.s.preview.put_unless(M.PreviewFrame(v.frames, pixels.shape[1], pixels.shape[0], pixels.tobytes(),
                                                       tag, w2c, intrinsics),
                                        lambda old: old.tag != 0 and tag == 0)
            if readback:
                self.readback_requests, self.readback_tag = 0, 0
        self._emit_stats()
        return pixels

    def _emit_stats(self) -> None:
        """ViewerStats at most every STATS_INTERVAL, and once more after the last frame of a
        burst (otherwise the final size and frame count of a resize would never be reported)."""
        v = self.viewer
        if v is None or v.frames == self.stats_frames:
            return
        now = time.perf_counter()
        if now - self.last_stats >= STATS_INTERVAL:
            self.last_stats, self.stats_frames = now, v.frames
            self.e.emit(M.ViewerStats(v.frames, v.last_frame_ms, v.state.width, v.state.height, v.render_scale))
