"""The studio viewport, rendered on the engine thread.

A frame is the training rasterizer's forward pass (:class:`spirula.engine.splat.render.Rasterizer`,
its own scratch buffers) for the viewport camera, composed over a background gradient by
``shaders/view/viewer.slang`` (or the ground truth, or the error image, of a dataset
camera), with the dataset cameras drawn as line frustums. The packed BGRA8 result is
either copied into a swapchain image of the window's surface and presented, or read back
for the GUI to show as a QImage (automatic fallback when presenting is impossible).

Nothing here blocks in a GPU wait while holding the GIL longer than the projection and
depth sort of one view: waits poll ``is_submit_finished`` and sleep, so the Qt thread keeps
running (slangpy's blocking waits hold the GIL).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import slangpy as spy

from ..device import Gpu
from ..errors import SpirulaError
from ..splat.buffers import BufferSet
from ..splat.camera_table import CAM_FLOATS, View, camera_row
from ..splat.occlusion import Occlusion
from ..splat.render import Rasterizer
from .adaptive import AdaptiveResolution
from .overlays import BG_BOTTOM, BG_TOP
from .polling import wait_polling
from .surface import SwapchainPresenter

MODES = ("splats", "gt", "error")
_MODE_ID = {"splats": 0, "gt": 1, "error": 2}


@dataclass
class ViewSource:
    """What the viewport shows: packed Gaussians on the GPU (see spirula/engine/splat/param_layout.py) and,
    for a dataset, its cameras (table on the GPU, host records, ground-truth images)."""

    params: spy.Buffer | None
    n: int
    max_sh_degree: int
    sh_degree: int
    cams: spy.Buffer | None = None            # camera table of the dataset (camera_table)
    cameras: list = field(default_factory=list)  # spirula.engine.ingest.Camera records
    gt: Callable[[int], spy.Buffer | None] | None = None  # packed RGBA8 image of a camera
    filter3d: spy.Buffer | None = None        # anti-aliased training's 3D filter [n] (spirula/engine/splat/antialias.py)
    mesh: object | None = None                # a triangle mesh on the GPU (spirula/engine/studio/mesh_raster.MeshGpu)


@dataclass
class ViewState:
    width: int = 0
    height: int = 0
    w2c: np.ndarray = field(default_factory=lambda: np.eye(4))
    fov_y_deg: float = 50.0
    camera: int | None = None
    mode: str = "splats"
    frustums: bool = True
    show_mesh: bool = True        # a source with a mesh draws it (else its splats)
    mesh_shading: str = "texture"


@dataclass
class _Frame:
    """One frame's plan (Viewer._plan): what it draws, at which render size, fitted how."""

    mode: str
    camera: int | None
    has_render: bool
    draw_mesh: bool
    gt_buf: object
    rw: int
    rh: int
    scale: tuple[float, float]
    offset: tuple[float, float]


@dataclass
class _Submitted:
    """A frame submitted to the GPU (Viewer._submit_frame): what finishing it needs."""

    sid: int              # the submission
    slot: int             # its output buffer and count read-back (0 or 1)
    src: "ViewSource | None"
    f: _Frame
    capacity: int | None  # its intersection capacity (None: counted exactly, or no splats)
    width: int
    height: int
    count_key: tuple | None  # _count_key of a capacity-mode render (its count is read back)
    cut: bool             # it binned behind the occlusion cut
    cam_rows: np.ndarray | None  # the camera rows its command buffer uploaded (None: uploaded before)


def _frames_in_flight(text: str) -> int:
    """$SPIRULA_VIEWER_FRAMES: 1 or 2; SpirulaError otherwise."""
    if text.strip() not in ("1", "2"):
        raise SpirulaError(f"$SPIRULA_VIEWER_FRAMES={text!r}: the frames in flight are 1 or 2")
    return int(text)


def _count_key(src: ViewSource, f: _Frame) -> tuple:
    """What a frame's intersection count is carried over between: the model and render size."""
    return id(src.params), src.n, f.rw, f.rh


class Viewer(AdaptiveResolution, SwapchainPresenter):
    def __init__(self, gpu: Gpu):
        self.gpu = gpu
        self.k_compose = gpu.kernel("view/viewer", "compose")
        self.k_segments = gpu.kernel("view/viewer", "draw_segments")
        self.bufs = BufferSet(gpu, "viewer")
        self.cam = gpu.zeros(2 * 4 * CAM_FLOATS, "viewer.camera")  # rows: viewport, render
        self.dummy = gpu.zeros(64, "viewer.dummy")
        self.rasters: dict[int, Rasterizer] = {}
        self.mesh_raster = None   # spirula/engine/studio/mesh_raster.MeshRasterizer, made for the first mesh
        self.state = ViewState()
        self.last_camera: tuple = ((), ())  # (w2c 16 floats, (fx, fy, cx, cy)) of the last frame's splats
        self.init_surface()
        self.segments: tuple[np.ndarray, np.ndarray] | None = None
        self._seg_bufs: tuple[spy.Buffer, spy.Buffer, int] | None = None
        self.frames = 0
        self.overflows = 0  # frames rendered twice: their intersections outgrew the capacity
        self.recuts = 0     # frames rendered twice: a tile ran out of splats behind the occlusion cut
        # occlusion culling (spirula/engine/splat/occlusion.py); $SPIRULA_VIEWER_OCCLUSION=0 turns it off
        self.occlusion = Occlusion(gpu) if os.environ.get("SPIRULA_VIEWER_OCCLUSION", "1") != "0" else None
        # per frame slot: intersections, occlusion violations
        self._count_readbacks = [gpu.readback_buffer(16, f"viewer.count{k}") for k in range(2)]
        # frames in flight: 2 overlaps a frame's recording with the last one's GPU work (render());
        # 1 (software Vulkan's default): each frame waits for itself. On software Vulkan the "GPU"
        # is the same CPU, so there is nothing to overlap, and its submissions and presents hold
        # the GIL while earlier work runs (the studio's event loop stalled 50-75 ms).
        # $SPIRULA_VIEWER_FRAMES=1 or 2 chooses.
        self.frames_in_flight = _frames_in_flight(os.environ.get("SPIRULA_VIEWER_FRAMES",
                                                                 "1" if gpu.software else "2"))
        self._in_flight: _Submitted | None = None
        self._last_count: tuple[tuple, int] | None = None  # (_count_key of the render, its count)
        self.last_frame_ms = 0.0
        self.last_render_size = (0, 0)
        self.last_full_res = True
        self.init_adaptive(gpu.software)
        self.readback_when_headless = True  # benchmarks turn it off: render + compose only

    # --- rasterizers ------------------------------------------------------------------------
    def rasterizer(self, max_sh_degree: int) -> Rasterizer:
        r = self.rasters.get(max_sh_degree)
        if r is None:
            r = self.rasters[max_sh_degree] = Rasterizer(self.gpu, max_sh_degree, (0.0, 0.0, 0.0))
        return r

    def mesh_rasterizer(self):
        if self.mesh_raster is None:
            from .mesh_raster import MeshRasterizer

            self.mesh_raster = MeshRasterizer(self.gpu)
        return self.mesh_raster

    def resize(self, width: int, height: int) -> None:
        self.state.width, self.state.height = max(0, int(width)), max(0, int(height))

    # --- cameras ----------------------------------------------------------------------------
    def set_segments(self, segs: np.ndarray, colors: np.ndarray) -> None:
        self.segments = (segs, colors)
        self._seg_bufs = None

    def view_row(self, src: ViewSource | None, w: int, h: int) -> np.ndarray:
        """Camera row of the viewport at ``w`` x ``h`` pixels: the free camera (w2c, fov), or
        a dataset camera's pose and intrinsics with its image fitted (letterboxed) inside."""
        w2c, fx, fy, cx, cy = self.view_camera(src, w, h)
        return camera_row(w2c, fx, fy, cx, cy, w, h)

    def view_camera(self, src: ViewSource | None, w: int, h: int) -> tuple:
        """(w2c [4, 4], fx, fy, cx, cy) of the viewport at ``w`` x ``h`` pixels (focal lengths
        and principal point in those pixels): the free camera (fov_y, centred), or a dataset
        camera's own, its image fitted (letterboxed) inside."""
        st = self.state
        ci = st.camera
        if src is not None and ci is not None and 0 <= ci < len(src.cameras):
            c = src.cameras[ci]
            s = min(w / c.width, h / c.height)
            ox, oy = (w - c.width * s) / 2, (h - c.height * s) / 2
            return c.w2c, c.fx * s, c.fy * s, c.cx * s + ox, c.cy * s + oy
        f = 0.5 * h / math.tan(math.radians(st.fov_y_deg) / 2)
        return st.w2c, f, f, w / 2, h / 2

    # --- a frame ----------------------------------------------------------------------------
    def render(self, src: ViewSource | None, readback: bool = False, full_res: bool = False,
               moving: bool = False) -> np.ndarray | None:
        """Render, compose and present (or read back) one frame. Returns the [H, W] uint32
        BGRA pixels when ``readback`` or when not presenting, else None. Raises PresentError
        when the swapchain failed (the viewer has switched to readback).

        The splats go in one submission with no host wait inside (the rasterizer's capacity
        mode, spirula/engine/splat/render.py): the tile lists are sized from the last frame's
        intersection count, and the count is read once the frame has finished. A frame whose
        count outgrew that capacity is rendered again, exactly (the prepare/count path), before
        it is presented or read back, so a cut list never shows.

        Frames in flight (``frames_in_flight`` 2, a GPU's default, when nothing is read back): a steady splat
        frame is submitted, and the one before it is then waited for, checked (and rendered
        again if it must be) and presented, so the host records a frame while the GPU renders
        the last one. A frame is shown one call late; :meth:`finish_frame` shows the last one
        (the studio calls it when no frame is due)."""
        st = self.state
        w, h = st.width, st.height
        if w <= 0 or h <= 0:
            return None
        gpu = self.gpu
        overlap = (self.frames_in_flight > 1 and not readback
                   and not (self.surface is None and self.readback_when_headless))
        if self._in_flight is None:
            wait_polling(gpu)  # training work queued earlier: wait for it without the GIL
        t0 = time.perf_counter()
        f = self._plan(src, readback, full_res)
        thin = (moving and not full_res and not readback and f.mode == "splats" and f.has_render and not f.draw_mesh
                and self.adaptive)
        if thin and not self.was_moving:
            self.start_moving()
        self.was_moving = thin
        thinned = thin and self.move_level > 0
        if thinned:  # the moving view of a slow device: fewer splats and pixels (spirula/engine/studio/adaptive.py)
            src = replace(src, n=max(1, int(src.n * self.splat_share)))
            k = min(self.render_scale * self.move_scale, self.max_scale)
            rw, rh = max(1, round(w / k)), max(1, round(h / k))
            f = replace(f, rw=rw, rh=rh, scale=(w / rw, h / rh))
        rows = np.stack([self.view_row(src, w, h), self.view_row(src, f.rw, f.rh)]).reshape(-1)
        capacity = self._capacity(src, f)
        steady = overlap and capacity is not None and f.mode == "splats" and f.has_render and not f.draw_mesh
        if not steady:
            self.finish_frame()  # this frame waits for its own end: the one in flight goes first
            self._trim()
        if capacity is None:  # the exact path projects and counts in a submission of its own first
            self._upload_cam(rows)
            rows = None
        t_render = time.perf_counter()
        if steady:
            prev = self._in_flight
            slot = 1 - prev.slot if prev is not None else 0
            shown = None  # (swapchain image, its copy's submission) of the frame before this one
            if prev is not None and self.surface is not None and (prev.width, prev.height) == (w, h):
                # its copy goes ahead of this frame's work, so presenting it need not wait for this one
                tex = self._acquire(w, h)
                shown = (tex, self._submit_present_copy(tex, prev.slot, w, h))
            frame = self._submit_frame(src, f, capacity, None, rows, slot)
            self.finish_frame(shown)  # the one before: waited for, checked, presented
            self._trim()  # what outgrew was the finished frame's
            self._in_flight = frame
        else:
            tex = None
            if self.surface is not None:
                tex = self._acquire(w, h)
            self._complete(self._submit_frame(src, f, capacity, tex, rows, 0), tex)
            if tex is not None:
                self._present()
        self.last_full_res = not thinned and (full_res or self.render_scale <= 1.0 or f.mode != "splats"
                                              or not f.has_render)
        if f.has_render and f.mode == "splats" and not full_res:
            ms = 1000.0 * (time.perf_counter() - t_render)
            if not thinned:  # the cost model is the whole model's at the adaptive resolution
                self._adapt(ms, f.rw * f.rh)
            if thin:
                self._adapt_moving(ms)
        pixels = None
        if not steady and (readback or (self.surface is None and self.readback_when_headless)):
            pixels = gpu.read(self.bufs.get("out0", 4 * w * h), np.uint32, count=w * h).reshape(h, w)
        # the camera of this frame's splats (the window reprojects a read-back frame with it)
        if f.mode == "splats" and f.has_render:
            w2c, fx, fy, cx, cy = self.view_camera(src, w, h)
            self.last_camera = (tuple(float(x) for x in np.asarray(w2c, np.float64).reshape(-1)),
                                (float(fx), float(fy), float(cx), float(cy)))
        else:
            self.last_camera = ((), ())
        self.frames += 1
        self.last_frame_ms = 1000.0 * (time.perf_counter() - t0)
        self.last_render_size = (f.rw, f.rh)
        return pixels

    @property
    def in_flight(self) -> bool:
        """A frame is submitted but not yet shown (:meth:`finish_frame` shows it)."""
        return self._in_flight is not None

    def finish_frame(self, shown: tuple | None = None) -> None:
        """Wait for the frame in flight, render it again if its lists were cut, and present
        it; nothing when none is in flight. ``shown``: (swapchain image, submission) of its
        copy into the swapchain, submitted already (render()); else it is made here. The
        present waits (polling) for that copy first: presenting holds the GIL until the
        queue's work before it is done."""
        fl, self._in_flight = self._in_flight, None
        if fl is None:
            return
        if (self.state.width, self.state.height) != (fl.width, fl.height):
            self._wait_frame(fl)  # the view was resized since: a frame of the new size follows
            return
        tex, copy_sid = shown if shown is not None else (None, None)
        if tex is None and self.surface is not None:
            tex = self._acquire(fl.width, fl.height)
        self._complete(fl, tex)  # a frame rendered again copies itself into tex
        if tex is not None:
            if copy_sid is None:
                copy_sid = self._submit_present_copy(tex, fl.slot, fl.width, fl.height)
            wait_polling(self.gpu, copy_sid)
            self._present()

    def _complete(self, fl: "_Submitted", tex) -> None:
        """Wait for a submitted frame and read its count; a frame whose lists were cut (its
        count outgrew the capacity, or a tile ran out behind the occlusion cut) is rendered
        again, exactly, into the same output (and ``tex``)."""
        counted, violated = self._wait_frame(fl)
        if counted is not None and (counted > fl.capacity or violated):
            self.overflows += counted > fl.capacity
            self.recuts += bool(violated) and counted <= fl.capacity
            if fl.cam_rows is not None:  # a later frame may have uploaded its own camera since
                self._upload_cam(fl.cam_rows)
            self._wait_frame(self._submit_frame(fl.src, fl.f, None, tex, None, fl.slot))

    def _upload_cam(self, rows: np.ndarray) -> None:
        """Upload the camera rows (viewport, render) in a submission of their own."""
        enc = self.gpu.encoder()
        enc.upload_buffer_data(self.cam, 0, rows)
        self.gpu.submit(enc)

    @property
    def last_intersections(self) -> int:
        """Tile/Gaussian intersections of the last splat render (0 before one)."""
        return self._last_count[1] if self._last_count is not None else 0

    def _trim(self) -> None:
        """Free outgrown scratch: called once every finished frame's work is done (a frame
        still in flight uses only what it was recorded with, never an outgrown buffer). Only
        when something outgrew: a trim drops every kernel's cached bindings, which the next
        frame would then rebuild."""
        self.bufs.trim()
        for r in self.rasters.values():
            if r.outgrown_bytes():
                r.trim()

    def _plan(self, src: ViewSource | None, readback: bool, full_res: bool) -> "_Frame":
        """What this frame draws and at which render size."""
        st = self.state
        w, h = st.width, st.height
        ci = st.camera
        dataset_view = (src is not None and ci is not None and 0 <= ci < len(src.cameras) and src.cams is not None)
        mode = st.mode if dataset_view else "splats"
        has_splats = src is not None and src.params is not None and src.n > 0
        draw_mesh = src is not None and src.mesh is not None and (st.show_mesh or not has_splats)
        has_splats = has_splats and not draw_mesh
        gt_buf = src.gt(ci) if (mode != "splats" and src.gt is not None) else None
        if mode != "splats" and gt_buf is None:
            mode = "splats"
        has_render = (has_splats or draw_mesh) and mode != "gt"
        if mode == "splats":  # the viewport camera at 1 / render_scale of the viewport size
            k = (1.0 if readback else self.refine_scale()) if full_res else self.render_scale
            rw, rh = max(1, round(w / k)), max(1, round(h / k))
            scale, offset = (w / rw, h / rh), (0.0, 0.0)
        else:  # a dataset camera at its own resolution, fitted into the viewport
            c = src.cameras[ci]
            rw, rh = c.width, c.height
            s = min(w / rw, h / rh)
            scale, offset = (s, s), ((w - rw * s) / 2, (h - rh * s) / 2)
        return _Frame(mode, ci, has_render, draw_mesh, gt_buf, rw, rh, scale, offset)

    def _capacity(self, src: ViewSource | None, f: "_Frame") -> int | None:
        """Intersection capacity of this frame's splat render from the last one's count
        (25% headroom), or None to count exactly (the first frame, a new model or size)."""
        if not f.has_render or f.draw_mesh or src is None:
            return None
        if self._last_count is None or self._last_count[0] != _count_key(src, f):
            return None
        last = self._last_count[1]
        r = self.rasterizer(src.max_sh_degree)
        cap = int(last * 1.25) + 4096
        return cap if cap <= r.max_intersections_per_pass else None

    def _submit_frame(self, src: ViewSource | None, f: "_Frame", capacity: int | None, tex,
                      cam_rows: np.ndarray | None, slot: int) -> "_Submitted":
        """Record the splat (or mesh) render, the compose into output ``slot`` (``out0`` or
        ``out1``), the frustums and the copy into the swapchain image ``tex`` (after the upload
        of ``cam_rows`` into the camera rows, when given), and submit (no wait:
        :meth:`_wait_frame`)."""
        st, gpu = self.state, self.gpu
        w, h = st.width, st.height
        image = final_t = r = None
        occ = self.occlusion
        if f.has_render and not f.draw_mesh:
            r = self.rasterizer(src.max_sh_degree)
            cams, view = (self.cam, View(1, f.rw, f.rh)) if f.mode == "splats" else (src.cams, View(f.camera, f.rw, f.rh))
            if occ is not None:
                occ.fit(view.tiles_x, view.tiles_y)
                occ.begin(capacity is not None)  # the exact path counts without a cut
            if capacity is None:
                count = r.prepare(src.params, src.n, cams, view, src.sh_degree, filter3d=src.filter3d, occlusion=occ)
                self._last_count = (_count_key(src, f), count)
            else:
                r.setup(src.params, src.n, cams, view, src.sh_degree, capacity=capacity, filter3d=src.filter3d,
                        occlusion=occ)
        enc = gpu.encoder()
        if cam_rows is not None:
            enc.upload_buffer_data(self.cam, 0, cam_rows)
        if r is not None and occ is not None and r.count_on_gpu:
            occ.record_cut(enc)
        if f.draw_mesh and f.has_render:
            mr = self.mesh_rasterizer()
            # row 1 is the render camera in splats mode; a dataset camera's own row otherwise
            cams, index = (self.cam, 1) if f.mode == "splats" else (src.cams, f.camera)
            mr.record(enc, src.mesh, cams, index, f.rw, f.rh, st.mesh_shading)
            image, final_t = mr.image, mr.final_t
        elif r is not None:
            r.record_prepare(enc)  # nothing when prepare() counted already
            r.record_forward(enc)
            if r.count_on_gpu:
                r.record_count_copy(enc, self._count_readbacks[slot], 0)
                if occ is not None:
                    gpu.copy(enc, self._count_readbacks[slot], 4, occ.violations, 0, 4)
            image = r.image
            try:
                final_t = r.bufs["final_T"]
            except (KeyError, AttributeError, TypeError):  # no transmittance: the splats over black
                final_t = None
        out = self.bufs.get(f"out{slot}", 4 * w * h)
        self.k_compose.dispatch(
            thread_count=[w, h, 1], command_encoder=enc, image=image if image is not None else self.dummy,
            final_T=final_t if final_t is not None else self.dummy, has_final_t=int(final_t is not None),
            gt=f.gt_buf if f.gt_buf is not None else self.dummy, out_image=out, out_w=w, out_h=h, src_w=f.rw,
            src_h=f.rh, scale=spy.float2(*f.scale), offset=spy.float2(*f.offset), mode=_MODE_ID[f.mode],
            has_render=int(f.has_render), has_gt=int(f.gt_buf is not None), error_gain=2.0,
            bg_top=spy.float3(*BG_TOP), bg_bottom=spy.float3(*BG_BOTTOM))
        if st.frustums and f.mode == "splats" and self.segments is not None and len(self.segments[0]):
            if self._seg_bufs is None:
                segs, cols = self.segments
                self._seg_bufs = (gpu.upload(segs, "viewer.segments"), gpu.upload(cols, "viewer.colors"), len(segs))
            sbuf, cbuf, count = self._seg_bufs
            samples = int(math.hypot(w, h)) + 2
            self.k_segments.dispatch(thread_count=[count * samples, 1, 1], command_encoder=enc, segs=sbuf,
                                     colors=cbuf, cams=self.cam, out_image=out, cam_index=0, num_segs=count,
                                     samples=samples, out_w=w, out_h=h)
        if tex is not None:
            self._record_present_copy(enc, tex, slot, w, h)
        sid = gpu.submit(enc)
        if r is not None and occ is not None:
            occ.ready = True  # this frame writes its map before any later frame reads it
        counted = r is not None and r.count_on_gpu
        return _Submitted(sid, slot, src, f, capacity if counted else None, w, h,
                          _count_key(src, f) if counted else None, occ is not None and occ.use_cut, cam_rows)

    def _wait_frame(self, fl: "_Submitted") -> tuple[int | None, int]:
        """Wait (polling) for a submitted frame. Returns its intersection count (None but in
        capacity mode) and its tiles that ran out behind the occlusion cut."""
        wait_polling(self.gpu, fl.sid)
        if fl.count_key is None:
            return None, 0
        words = self.gpu.read_finished(self._count_readbacks[fl.slot], np.uint32)
        count = int(words[0])
        self._last_count = (fl.count_key, count)
        return count, int(words[1]) if fl.cut else 0
