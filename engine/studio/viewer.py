"""The studio viewport, rendered on the engine thread.

A frame is the training rasterizer's forward pass (:class:`engine.splat.render.Rasterizer`,
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

import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import slangpy as spy

from ..device import Gpu
from ..splat.buffers import BufferSet
from ..splat.camera_table import CAM_FLOATS, View, camera_row
from ..splat.occlusion import Occlusion
from ..splat.render import Rasterizer
from .polling import wait_polling

log = logging.getLogger("spirula.viewer")

MODES = ("splats", "gt", "error")
_MODE_ID = {"splats": 0, "gt": 1, "error": 2}
BG_TOP = (0.16, 0.17, 0.20)
BG_BOTTOM = (0.05, 0.05, 0.06)


@dataclass
class ViewSource:
    """What the viewport shows: packed Gaussians on the GPU (see engine/splat/layout.py) and,
    for a dataset, its cameras (table on the GPU, host records, ground-truth images)."""

    params: spy.Buffer | None
    n: int
    max_sh_degree: int
    sh_degree: int
    cams: spy.Buffer | None = None            # camera table of the dataset (camera_table)
    cameras: list = field(default_factory=list)  # engine.ingest.Camera records
    gt: Callable[[int], spy.Buffer | None] | None = None  # packed RGBA8 image of a camera
    filter3d: spy.Buffer | None = None        # anti-aliased training's 3D filter [n] (engine/splat/antialias.py)
    mesh: object | None = None                # a triangle mesh on the GPU (engine/studio/mesh_raster.MeshGpu)


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


def _count_key(src: ViewSource, f: _Frame) -> tuple:
    """What a frame's intersection count is carried over between: the model and render size."""
    return id(src.params), src.n, f.rw, f.rh


class PresentError(RuntimeError):
    """Presenting into the window's surface failed; the viewer switched to readback."""


class Viewer:
    def __init__(self, gpu: Gpu):
        self.gpu = gpu
        self.k_compose = gpu.kernel("view/viewer", "compose")
        self.k_segments = gpu.kernel("view/viewer", "draw_segments")
        self.bufs = BufferSet(gpu, "viewer")
        self.cam = gpu.zeros(2 * 4 * CAM_FLOATS, "viewer.camera")  # rows: viewport, render
        self.dummy = gpu.zeros(64, "viewer.dummy")
        self.rasters: dict[int, Rasterizer] = {}
        self.mesh_raster = None   # engine/studio/mesh_raster.MeshRasterizer, made for the first mesh
        self.state = ViewState()
        self.surface: spy.Surface | None = None
        self.surface_size = (0, 0)
        self._present_failures = 0
        self.readback_reason = "no window surface attached"
        self.segments: tuple[np.ndarray, np.ndarray] | None = None
        self._seg_bufs: tuple[spy.Buffer, spy.Buffer, int] | None = None
        self.frames = 0
        self.overflows = 0  # frames rendered twice: their intersections outgrew the capacity
        self.recuts = 0     # frames rendered twice: a tile ran out of splats behind the occlusion cut
        # occlusion culling (engine/splat/occlusion.py); $SPIRULA_VIEWER_OCCLUSION=0 turns it off
        self.occlusion = Occlusion(gpu) if os.environ.get("SPIRULA_VIEWER_OCCLUSION", "1") != "0" else None
        self._count_readback = gpu.readback_buffer(16, "viewer.count")  # intersections, occlusion violations
        self._last_count: tuple[tuple, int] | None = None  # (_count_key of the render, its count)
        self.last_frame_ms = 0.0
        self.last_render_size = (0, 0)
        self.last_full_res = True
        # dynamic resolution of the splat render (1 = viewport resolution)
        software = gpu.software
        self.target_ms = 120.0 if software else 12.0
        self.max_scale = 8.0
        self.render_scale = 2.0 if software else 1.0
        self.adaptive = True
        self.readback_when_headless = True  # benchmarks turn it off: render + compose only
        self._samples: list[tuple[float, float]] = []
        self._model: tuple[float, float] | None = None  # frame ms ~ a + b * pixels
        self.refine_ms = 1500.0  # a still view is re-rendered sharper, within this time
        fixed = os.environ.get("SPIRULA_VIEWER_SCALE")
        if fixed:  # a fixed render scale (benchmarks): 1 = full viewport resolution
            self.render_scale, self.adaptive = max(1.0, float(fixed)), False

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

    # --- surface ----------------------------------------------------------------------------
    @property
    def presenting(self) -> bool:
        return self.surface is not None

    def attach(self, platform: str, handle: tuple, width: int, height: int) -> str | None:
        """Create a swapchain on a native window. Returns None, or why it is not possible
        (the viewer then stays in readback mode)."""
        self.detach()
        try:
            if platform == "xcb":
                wh = spy.WindowHandle(int(handle[0]), int(handle[1]))
            elif platform == "windows":
                wh = spy.WindowHandle(int(handle[0]))  # type: ignore[call-arg]
            elif platform == "cocoa":
                wh = spy.WindowHandle(int(handle[0]))  # type: ignore[call-arg]
            else:
                return f"no Vulkan surface for the Qt platform '{platform}' in slangpy {spy.__version__}"
            surface = self.gpu.device.create_surface(wh)
            info = surface.info
            if spy.Format.bgra8_unorm not in list(info.formats):
                return f"the window surface offers {list(info.formats)}, not bgra8_unorm"
            if not (int(info.supported_usage) & int(spy.TextureUsage.copy_destination)):
                return "the window surface does not accept copies (copy_destination)"
        except Exception as exc:  # driver or platform refuses: readback
            return f"creating a Vulkan surface failed: {exc}".strip()
        self.surface = surface
        self.surface_size = (0, 0)
        try:
            self._configure(width, height)
        except Exception as exc:
            self.surface = None
            return f"configuring the swapchain failed: {exc}".strip()
        self.readback_reason = ""
        return None

    def detach(self) -> None:
        if self.surface is not None:
            wait_polling(self.gpu)
            try:
                self.surface.unconfigure()
            except Exception:  # the window may already be gone
                pass
            self.surface = None
            self.surface_size = (0, 0)

    def _configure(self, width: int, height: int) -> None:
        if self.surface is None or width <= 0 or height <= 0:
            return
        if self.surface_size != (width, height):
            wait_polling(self.gpu)
            self.surface.configure(width=width, height=height, format=spy.Format.bgra8_unorm,
                                   usage=spy.TextureUsage.copy_destination, desired_image_count=3, vsync=False)
            self.surface_size = (width, height)

    def resize(self, width: int, height: int) -> None:
        self.state.width, self.state.height = max(0, int(width)), max(0, int(height))

    # --- cameras ----------------------------------------------------------------------------
    def set_segments(self, segs: np.ndarray, colors: np.ndarray) -> None:
        self.segments = (segs, colors)
        self._seg_bufs = None

    def view_row(self, src: ViewSource | None, w: int, h: int) -> np.ndarray:
        """Camera row of the viewport at ``w`` x ``h`` pixels: the free camera (w2c, fov), or
        a dataset camera's pose and intrinsics with its image fitted (letterboxed) inside."""
        st = self.state
        ci = st.camera
        if src is not None and ci is not None and 0 <= ci < len(src.cameras):
            c = src.cameras[ci]
            s = min(w / c.width, h / c.height)
            ox, oy = (w - c.width * s) / 2, (h - c.height * s) / 2
            return camera_row(c.w2c, c.fx * s, c.fy * s, c.cx * s + ox, c.cy * s + oy, w, h)
        f = 0.5 * h / math.tan(math.radians(st.fov_y_deg) / 2)
        return camera_row(st.w2c, f, f, w / 2, h / 2, w, h)

    def _adapt(self, render_ms: float, pixels: int) -> None:
        """Dynamic resolution of the splat render. Cost is modelled as a + b * pixels from
        the last frames (a: projection, sorts and dispatch overhead; b: per pixel); the next
        scale fits ``target_ms``, or, when the fixed part alone exceeds it, spends no more
        on pixels than on the fixed part (a lower resolution would not be faster)."""
        if not self.adaptive or render_ms <= 0 or pixels <= 0:
            return
        self._samples.append((float(pixels), float(render_ms)))
        del self._samples[:-8]
        p = np.array([q for q, _ in self._samples])
        t = np.array([m for _, m in self._samples])
        if np.ptp(p) > 0.1 * p.max():
            b, a = np.polyfit(p, t, 1)
            if b <= 0:
                a, b = float(t.mean()), 1e-12
        else:
            a, b = 0.0, float(t.mean() / p.mean())
        a, b = max(a, 0.0), max(b, 1e-12)
        self._model = (a, b)
        full = self.state.width * self.state.height
        if a + b * full <= self.target_ms:
            want = 1.0
        else:
            budget = self.target_ms - a if a < 0.5 * self.target_ms else a
            want = math.sqrt(full / max(budget / b, 1.0))
        want = min(max(want, 1.0), self.max_scale)
        # move half way (in log scale) so noisy frames do not make it jump
        self.render_scale = min(max(math.sqrt(self.render_scale * want), 1.0), self.max_scale)
        if abs(self.render_scale - want) < 0.05:
            self.render_scale = want

    def refine_scale(self) -> float:
        """Scale of the sharper frame made once the view is still: full resolution, or as
        close as ``refine_ms`` allows by the cost model."""
        if self._model is None:
            return 1.0
        a, b = self._model
        full = self.state.width * self.state.height
        if a + b * full <= self.refine_ms:
            return 1.0
        pixels = max((self.refine_ms - a) / b, full / self.render_scale ** 2)
        return min(max(math.sqrt(full / max(pixels, 1.0)), 1.0), self.render_scale)

    # --- a frame ----------------------------------------------------------------------------
    def render(self, src: ViewSource | None, readback: bool = False, full_res: bool = False) -> np.ndarray | None:
        """Render, compose and present (or read back) one frame. Returns the [H, W] uint32
        BGRA pixels when ``readback`` or when not presenting, else None. Raises PresentError
        when the swapchain failed (the viewer has switched to readback).

        The splats go in one submission with no host wait inside (the rasterizer's capacity
        mode, engine/splat/render.py): the tile lists are sized from the last frame's
        intersection count, and the count is read once the frame has finished. A frame whose
        count outgrew that capacity is rendered again, exactly (the prepare/count path), before
        it is presented or read back, so a cut list never shows."""
        st = self.state
        w, h = st.width, st.height
        if w <= 0 or h <= 0:
            return None
        gpu = self.gpu
        wait_polling(gpu)  # training work queued earlier: wait for it without the GIL
        t0 = time.perf_counter()
        self._trim()
        f = self._plan(src, readback, full_res)
        rows = np.stack([self.view_row(src, w, h), self.view_row(src, f.rw, f.rh)]).reshape(-1)
        t_render = time.perf_counter()
        capacity = self._capacity(src, f)
        if capacity is None:  # the exact path projects and counts in a submission of its own first
            enc = gpu.encoder()
            enc.upload_buffer_data(self.cam, 0, rows)
            gpu.submit(enc)
            rows = None
        tex = None
        if self.surface is not None:
            try:
                tex = self._acquire(w, h)
            except Exception as exc:
                self._fail_present(None, exc)
        counted, violated = self._submit_frame(src, f, capacity, tex, rows)
        if counted is not None and (counted > capacity or violated):  # cut lists, or a cut too tight: again, exactly
            self.overflows += counted > capacity
            self.recuts += bool(violated) and counted <= capacity
            self._submit_frame(src, f, None, tex)
        self.last_full_res = full_res or self.render_scale <= 1.0 or f.mode != "splats" or not f.has_render
        if f.has_render and f.mode == "splats" and not full_res:
            self._adapt(1000.0 * (time.perf_counter() - t_render), f.rw * f.rh)
        if tex is not None:
            try:
                self.surface.present()
                self._present_failures = 0
            except Exception as exc:  # e.g. out of date after a resize: reconfigure next frame
                self._present_failures += 1
                self.surface_size = (0, 0)
                if self._present_failures >= 3:
                    self._fail_present(None, exc)
        pixels = None
        if readback or (self.surface is None and self.readback_when_headless):
            pixels = gpu.read(self.bufs.get("out", 4 * w * h), np.uint32, count=w * h).reshape(h, w)
        self.frames += 1
        self.last_frame_ms = 1000.0 * (time.perf_counter() - t0)
        self.last_render_size = (f.rw, f.rh)
        return pixels

    @property
    def last_intersections(self) -> int:
        """Tile/Gaussian intersections of the last splat render (0 before one)."""
        return self._last_count[1] if self._last_count is not None else 0

    def _trim(self) -> None:
        """Free outgrown scratch (the GPU is idle here). Only when something outgrew: a trim
        drops every kernel's cached bindings, which the next frame would then rebuild."""
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
                      cam_rows: np.ndarray | None = None) -> tuple[int | None, int]:
        """Record the splat (or mesh) render, the compose, the frustums and the copy into the
        swapchain image ``tex`` (after the upload of ``cam_rows`` into the camera rows, when
        given); submit and wait (polling). Returns the intersection count of
        a capacity-mode render (else None) and its tiles that ran out behind the occlusion cut."""
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
                r.record_count_copy(enc, self._count_readback, 0)
                if occ is not None:
                    gpu.copy(enc, self._count_readback, 4, occ.violations, 0, 4)
            image = r.image
            try:
                final_t = r.bufs["final_T"]
            except (KeyError, AttributeError, TypeError):  # no transmittance: the splats over black
                final_t = None
        out = self.bufs.get("out", 4 * w * h)
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
            try:
                enc.copy_buffer_to_texture(tex, 0, 0, spy.uint3(0, 0, 0), out, 0, 4 * w * h, 4 * w, spy.uint3(w, h, 1))
                enc.set_texture_state(tex, spy.ResourceState.present)
            except Exception as exc:
                self._fail_present(enc, exc)
        sid = gpu.submit(enc)
        wait_polling(gpu, sid)
        if r is not None and occ is not None:
            occ.ready = True  # the forward wrote this frame's map
        if r is None or not r.count_on_gpu:
            return None, 0
        words = gpu.read_finished(self._count_readback, np.uint32)
        count = int(words[0])
        self._last_count = (_count_key(src, f), count)
        return count, int(words[1]) if occ is not None and occ.use_cut else 0

    def _acquire(self, w: int, h: int):
        """The next swapchain image at w x h; one retry with a fresh swapchain (a window
        resized under us makes the old one out of date)."""
        for attempt in range(2):
            try:
                if attempt:
                    self.surface_size = (0, 0)
                self._configure(w, h)
                tex = self.surface.acquire_next_image()
                if tex is None or (tex.width, tex.height) != (w, h):
                    raise RuntimeError(f"swapchain image is {None if tex is None else (tex.width, tex.height)}, "
                                       f"expected {(w, h)}")
                return tex
            except Exception:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _fail_present(self, enc, exc: Exception) -> None:
        reason = f"presenting to the window failed: {exc}".strip()
        log.warning("%s; switching the viewport to readback", reason)
        if enc is not None:
            self.gpu.submit(enc)
        wait_polling(self.gpu)
        try:
            if self.surface is not None:
                self.surface.unconfigure()
        except Exception:
            pass
        self.surface = None
        self.readback_reason = reason
        raise PresentError(reason)
