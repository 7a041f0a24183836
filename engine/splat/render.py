"""The differentiable tile rasterizer: project -> depth sort -> bin -> tile sort -> raster.

The tile sort's size is the number of tile/Gaussian intersections, known only after the
projection. Two ways to size it:

* exact (renders, evaluation, the viewer): :meth:`Rasterizer.prepare` records projection,
  the depth sort and the scan of tile counts, submits, and reads the count back (one host
  synchronisation); :meth:`record_forward` / :meth:`record_backward` then record into the
  caller's encoder.
* capacity (the training step): :meth:`Rasterizer.setup` takes a capacity chosen by the
  caller from earlier steps' counts; everything (:meth:`record_prepare`, forward, backward)
  goes into one command buffer, the kernels read the true count from the GPU, at most
  ``capacity`` intersections are binned, and :meth:`overflow_guard` lets the backward and
  the optimizer skip a step whose count outgrew the capacity. The caller reads the count
  a step late (:meth:`record_count_copy`) to size the next steps.

Scratch whose lifetime is one phase of a step comes from a phase arena (engine/profile/
arena.py): the depth sort's radix scratch (``depth_sort``), the tile keys and the tile
sort's scratch (``intersect``), the screen-space gradients (``backward``) and, when the
loss is given the same arena, the SSIM partials (``loss``).
"""

from __future__ import annotations

import math

import numpy as np
import slangpy as spy

from ..device import Gpu
from ..profile import IMAGE, SPLAT_X_IMAGE, PhaseArena
from .buffers import BufferSet
from .camera_table import TILE, View
from .layout import row_stride
from .sort import RadixSort, Scan


# Bits of the depth sort key (shaders/project/project.slang): 24 resolve 1.5e-5 of the depth
# in 3 radix passes (32 bits: 4 passes for precision no render can show).
DEPTH_KEY_BITS = 24


class Rasterizer:
    """Renders packed Gaussians (see engine/splat/layout.py) and back-propagates image
    gradients to the packed parameter gradients.

    Buffers (device, float32 unless noted), N Gaussians, H x W pixels:
      means2d [N, 2] px, conic_opac [N, 4] (conic a b c, sigmoid opacity), rgb [N, 3],
      depths [N], radii [N, 2] int32 (screen half-extent x, y in px; 0 = culled), image [H, W, 3], final_T [H, W],
      last_index [H, W] uint32; gradients g_means2d, g_conic, g_opacity, g_rgb alike.
    """

    _IMAGE_BUFS = frozenset(("image", "g_image", "final_T", "last_index"))

    def __init__(self, gpu: Gpu, max_sh_degree: int = 3, background=(0.0, 0.0, 0.0),
                 arena: PhaseArena | None = None):
        self.gpu = gpu
        self.max_sh_degree = max_sh_degree
        self.stride = row_stride(max_sh_degree)
        self.background = spy.float3(*[float(v) for v in background])
        self.bufs = BufferSet(gpu, "raster", category=SPLAT_X_IMAGE)
        self.arena = arena if arena is not None else PhaseArena(gpu, "raster")
        self.scan = Scan(gpu)
        self.sort = RadixSort(gpu)
        k = lambda mod, e: gpu.kernel(mod, e, MAX_SH_DEGREE=max_sh_degree)
        self.k_project = gpu.kernel("project/project", "project_forward", MAX_SH_DEGREE=max_sh_degree,
                                    DEPTH_KEY_BITS=DEPTH_KEY_BITS)
        self.k_project_bwd = k("project/project", "project_backward")
        self.k_gather = gpu.kernel("raster/raster", "gather_counts")
        self.k_emit = gpu.kernel("raster/raster", "emit_intersections")
        self.k_ranges = gpu.kernel("raster/raster", "tile_ranges")
        self.k_fwd = gpu.kernel("raster/raster", "rasterize_forward")
        self.k_bwd = gpu.kernel("raster/raster", "rasterize_backward")
        self.k_clear_grads = gpu.kernel("raster/raster", "clear_screen_grads")
        self.n = 0
        self.m = 0
        self.count_on_gpu = False  # capacity mode (setup): m is a capacity, the count lives in "total"
        self.view: View | None = None

    def _b(self, name: str, count: int, itemsize: int = 4):
        return self.bufs.get(name, count * itemsize, IMAGE if name in self._IMAGE_BUFS else None)

    # --- pass 1: projection, depth order, tile counts ------------------------------------
    def prepare(self, params: spy.Buffer, n: int, cams: spy.Buffer, view: View, sh_degree: int) -> int:
        """Project ``n`` Gaussians for ``view`` and count intersections; returns that count
        (the one host synchronisation of a step)."""
        self.setup(params, n, cams, view, sh_degree, capacity=None)
        enc = self.gpu.encoder()
        self.record_prepare(enc)
        self.gpu.submit(enc)
        self.m = int(self.gpu.read(self._b("total", 4), np.uint32, 1)[0])
        return self.m

    def setup(self, params: spy.Buffer, n: int, cams: spy.Buffer, view: View, sh_degree: int,
              capacity: int | None) -> None:
        """Set the render's inputs without recording anything. ``capacity``: the number of
        intersections the buffers and dispatches are sized for (capacity mode, see the
        module docstring); ``None`` for :meth:`prepare`'s exact mode."""
        self.n, self.view, self.params, self.cams, self.sh_degree = n, view, params, cams, sh_degree
        self.count_on_gpu = capacity is not None
        self.m = int(capacity) if capacity is not None else 0

    def overflow_guard(self) -> tuple[spy.Buffer, int]:
        """(uint32 buffer, capacity) for kernels that must skip a step whose intersection
        count (buffer[0]) outgrew the capacity; in exact mode the capacity never binds."""
        return self._b("total", 4), (self.m if self.count_on_gpu else 0xFFFFFFFF)

    def record_count_copy(self, enc, dst: spy.Buffer, offset: int) -> None:
        """Record a copy of this render's intersection count (uint32) to ``dst[offset]``
        (e.g. a host-visible read-back buffer, read once the submission has finished)."""
        self.gpu.copy(enc, dst, offset, self._b("total", 4), 0, 4)

    def record_prepare(self, enc) -> None:
        n, v = self.n, self.view
        self.k_project.record(
            enc, [max(n, 1), 1, 1], params=self.params, cams=self.cams, means2d=self._b("means2d", 2 * n),
            conic_opac=self._b("conic_opac", 4 * n), rgb=self._b("rgb", 3 * n),
            depths=self._b("depths", n), radii=self._b("radii", 2 * n),
            tiles_touched=self._b("tiles_touched", n), depth_keys=self._b("depth_keys", n),
            depth_ids=self._b("depth_ids", n), n=n, cam_index=v.cam_index,
            sh_degree=self.sh_degree, tiles_x=v.tiles_x, tiles_y=v.tiles_y)
        with self.arena.phase(enc, "depth_sort") as s:
            self.sort.record(enc, self._b("depth_keys", n), self._b("depth_ids", n), n, DEPTH_KEY_BITS, scratch=s, site="depth")
        self.k_gather.record(
            enc, [max(n, 1), 1, 1], order=self._b("depth_ids", n),
            tiles_touched=self._b("tiles_touched", n), counts_sorted=self._b("counts_sorted", n), n=n)
        self.scan.record(enc, self._b("counts_sorted", n), self._b("offsets", n), n, total=self._b("total", 4), site="counts")

    # --- pass 2: binning, tile sort, compositing ---------------------------------------
    def record_forward(self, enc) -> None:
        n, m, v = self.n, self.m, self.view
        ntiles = v.tiles_x * v.tiles_y
        npix = v.width * v.height
        isect_ids = self._b("isect_ids", max(m, 1))
        ranges = self._b("ranges", 2 * ntiles)
        # the tile keys and the tile sort's scratch are dead once the tile ranges are known
        with self.arena.phase(enc, "intersect") as s:
            if m > 0:
                isect_tiles = s.get("isect_tiles", 4 * m)
                self.k_emit.record(
                    enc, [max(n, 1), 1, 1], order=self._b("depth_ids", n),
                    offsets=self._b("offsets", n), tiles_touched=self._b("tiles_touched", n),
                    means2d=self._b("means2d", 2 * n), radii=self._b("radii", 2 * n),
                    isect_tiles=isect_tiles, isect_ids=isect_ids,
                    n=n, tiles_x=v.tiles_x, tiles_y=v.tiles_y, capacity=m)
                bits = max(1, math.ceil(math.log2(max(ntiles, 2))))
                count = self._b("total", 4) if self.count_on_gpu else None
                self.sort.record(enc, isect_tiles, isect_ids, m, bits, scratch=s, count=count, site="tile")
            self.gpu.clear(enc, ranges)
            if m > 0:
                self.k_ranges.record(enc, [m, 1, 1], isect_tiles=isect_tiles, ranges=ranges,
                                     count=self._b("total", 4), m=m, count_from_buf=int(self.count_on_gpu))
        self.k_fwd.record(
            enc, [v.tiles_x * TILE, v.tiles_y * TILE, 1],
            ranges=ranges, isect_ids=isect_ids, means2d=self._b("means2d", 2 * n),
            conic_opac=self._b("conic_opac", 4 * n), rgb=self._b("rgb", 3 * n),
            image=self.image, final_T=self._b("final_T", npix), last_index=self._b("last_index", npix),
            width=v.width, height=v.height, tiles_x=v.tiles_x, background=self.background)

    @property
    def image(self) -> spy.Buffer:
        """The rendered image [H, W, 3] float32 of the current view."""
        v = self.view
        return self._b("image", 3 * v.width * v.height)

    def image_grad(self) -> spy.Buffer:
        """Buffer [H, W, 3] float32 the loss writes dL/d(image) into."""
        v = self.view
        return self._b("g_image", 3 * v.width * v.height)

    # --- backward ------------------------------------------------------------------------
    def record_backward(self, enc, grads: spy.Buffer | None, grad2d_sum: spy.Buffer, vis_count: spy.Buffer,
                        accumulate_stats: bool = True, optimizer: dict | None = None,
                        moments_bf16: bool = False) -> None:
        """dL/d(image) (in :meth:`image_grad`) -> packed parameter gradients ``grads`` [N, D]
        (overwritten); densification statistics accumulated into grad2d_sum [N], vis_count [N].
        With ``optimizer`` (GaussianModel.adam_args) there is no ``grads``: the projection
        backward applies one Adam step to the parameters itself (project_backward_adam;
        ``moments_bf16`` selects the moments' storage)."""
        if (grads is None) == (optimizer is None):
            raise ValueError("record_backward() takes either grads or optimizer")
        n = self.n
        with self.arena.phase(enc, "backward") as s:  # screen-space gradients: this phase only
            gc, gr = s.get("g_conic", 12 * n), s.get("g_rgb", 12 * n)  # largest first (arena slots)
            g2, go = s.get("g_means2d", 8 * n), s.get("g_opacity", 4 * n)
            self.k_clear_grads.record(enc, [max(n, 1), 1, 1], g_means2d=g2,
                                      g_conic=gc, g_opacity=go, g_rgb=gr, n=n)
            self._record_backward(enc, grads, grad2d_sum, vis_count, accumulate_stats, g2, gc, go, gr,
                                  optimizer, moments_bf16)

    def _record_backward(self, enc, grads, grad2d_sum, vis_count, accumulate_stats, g2, gc, go, gr,
                         optimizer=None, moments_bf16=False) -> None:
        n, m, v = self.n, self.m, self.view
        npix = v.width * v.height
        isect_total, isect_capacity = self.overflow_guard()
        self.k_bwd.record(
            enc, [v.tiles_x * TILE, v.tiles_y * TILE, 1],
            ranges=self._b("ranges", 2 * v.tiles_x * v.tiles_y), isect_ids=self._b("isect_ids", max(m, 1)),
            means2d=self._b("means2d", 2 * n), conic_opac=self._b("conic_opac", 4 * n),
            rgb=self._b("rgb", 3 * n), final_T=self._b("final_T", npix),
            last_index=self._b("last_index", npix), g_image=self.image_grad(),
            g_means2d=g2, g_conic=gc, g_opacity=go, g_rgb=gr,
            width=v.width, height=v.height, tiles_x=v.tiles_x, background=self.background)
        common = dict(params=self.params, cams=self.cams, radii=self._b("radii", 2 * n),
                      conic_opac=self._b("conic_opac", 4 * n), g_means2d=g2, g_conic=gc, g_opacity=go, g_rgb=gr,
                      grad2d_sum=grad2d_sum, vis_count=vis_count, n=n, cam_index=v.cam_index,
                      isect_total=isect_total, isect_capacity=isect_capacity,
                      sh_degree=self.sh_degree, accumulate_stats=int(accumulate_stats))
        if optimizer is None:
            self.k_project_bwd.record(enc, [max(n, 1), 1, 1], grads=grads, **common)
        else:
            k = self.gpu.kernel("project/project", "project_backward_adam", MAX_SH_DEGREE=self.max_sh_degree,
                                MOMENTS_BF16=int(moments_bf16))  # compiled on first use, then cached
            k.record(enc, [max(n, 1), 1, 1], **common, **optimizer)

    # --- convenience for eval and tests ---------------------------------------------------
    def render(self, params: spy.Buffer, n: int, cams: spy.Buffer, view: View, sh_degree: int) -> np.ndarray:
        """Forward render to a host array [H, W, 3] float32 (waits for the GPU)."""
        self.prepare(params, n, cams, view, sh_degree)
        enc = self.gpu.encoder()
        self.record_forward(enc)
        self.gpu.submit(enc)
        return self.gpu.read(self.image, np.float32, shape=(view.height, view.width, 3))

    def read(self, name: str, dtype=np.float32, shape=None) -> np.ndarray:
        """Host copy of an internal buffer (tests and debugging). A phase buffer (e.g.
        ``g_means2d``) is read from the arena slot it had in its phase: after the phase it
        may hold another phase's data (or poison), by design."""
        try:
            buf = self.bufs[name]
        except KeyError:
            buf = next(d[name] for d in self.arena._last.values() if name in d)
        return self.gpu.read(buf, dtype, shape=shape)

    def release(self) -> None:
        """Free every scratch buffer (only after waiting for the GPU); the next render
        allocates them again. Densification calls it so that its temporary [N, D] buffer
        does not stack on a step's scratch at the memory high-water mark."""
        self.gpu.forget_bindings()
        self.arena.release()
        self.bufs.release()
        self.sort.release()
        self.scan.release()

    def trim(self) -> None:
        """Free scratch outgrown since the last call (only after waiting for the GPU)."""
        self.gpu.forget_bindings()  # cached kernel arguments would keep outgrown buffers alive
        self.arena.trim()
        self.bufs.trim()
        self.sort.trim()
        self.scan.trim()
