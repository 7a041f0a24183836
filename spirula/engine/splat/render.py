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

Large path: the count is a 64-bit total (spirula/engine/splat/sort.py Scan: it cannot wrap), and
one pass bins at most :attr:`Rasterizer.max_intersections_per_pass` intersections (default
from the device's buffer and sort limits and a VRAM budget, spirula/engine/splat/intersections.py;
``$SPIRULA_MAX_INTERSECTIONS`` sets it). When the count (exact mode) or the capacity (capacity mode: :meth:`Rasterizer.setup`
then counts synchronously) exceeds it, the image is rendered in horizontal bands of tile
rows chosen from per-row counts (one small read-back) so that each fits: per band, counts
clipped to its rows, scan, emit, tile sort, ranges, forward raster. The backward bins each
band again identically (so last_index stays valid) and accumulates the screen-space
gradients band by band. A single row over the limit raises IntersectionLimitError. The
normal path records the same dispatches and the same one read as without the large path.

Scratch whose lifetime is one phase of a step comes from a phase arena (spirula/engine/profile/
arena.py): the depth sort's radix scratch (``depth_sort``), the tile keys and the tile
sort's scratch (``intersect``), the screen-space gradients (``backward``) and, when the
loss is given the same arena, the SSIM partials (``loss``).

Anti-aliasing (Mip-Splatting, TrainConfig.antialias): a render given ``filter3d`` (the
per-Gaussian 3D filter variances of spirula/engine/splat/antialias.py) runs the projection and its
backward specialised with ANTIALIAS = 1 (shaders/project/proj_math.slang: the 3D smoothing
filter and the 2D Mip filter); without it, the classic kernels, bound exactly as before.

Geometry (the geometry phase of training, spirula/engine/splat/geometry_phase.py): a render set up with
``geometry=True`` specialises the projection, both raster kernels and the projection backward
with GEOMETRY = 1: each visible splat's surfel (camera-space normal facing the camera, plane
offset) is composited into :attr:`Rasterizer.geom_image` [H, W, 4], and the gradient the
caller writes into :meth:`Rasterizer.geom_image_grad` flows back to the means and rotations.
Without it, the colour-only kernels, bound exactly as before.
"""

from __future__ import annotations

import numpy as np
import slangpy as spy

from ..device import Gpu, dispatch_grid
from ..profile import IMAGE, SPLAT_X_IMAGE, PhaseArena
from .buffers import BufferSet
from .camera_table import TILE, View
from .param_layout import row_stride
from .occlusion import PROJECT_GROUP_SPLATS
from .intersections import default_max_intersections, split_bands
from .render_backward import BACKWARD_PIXELS_PER_THREAD, BWD_WG, RasterBackward  # noqa: F401 - BWD_WG re-exported
from .screen_grad import SCREEN_GRAD_STRIDE, pack_screen_grads, split_screen_grads  # noqa: F401 - re-exported
from .sort import RadixSort, Scan, read_total


RASTER_BLOCK = 256  # splats per shared-memory batch of the raster kernels (BLOCK in raster.slang)
# Bits of the depth sort key (shaders/project/project.slang): 24 resolve 1.5e-5 of the depth
# in 3 radix passes (32 bits: 4 passes for precision no render can show).
DEPTH_KEY_BITS = 24

class Rasterizer(RasterBackward):
    """Renders packed Gaussians (see spirula/engine/splat/param_layout.py) and back-propagates image
    gradients to the packed parameter gradients (the backward's recording: the
    :class:`~spirula.engine.splat.render_backward.RasterBackward` mixin).

    Buffers (device, float32 unless noted), N Gaussians, H x W pixels:
      means2d [N, 2] px, conic_opac [N, 4] (conic a b c, sigmoid opacity), rgb [N, 3],
      depths [N], radii [N, 2] int32 (screen half-extent x, y in px; 0 = culled), image [H, W, 3], final_T [H, W],
      last_index [H, W] uint32; the screen-space gradients in one buffer g_screen [N, 9]
      (spirula/engine/splat/screen_grad.py: rgb, means2d, conic, opacity; :meth:`screen_grads`).

    ``filter3d`` (:meth:`setup`): None for the classic projection, or a [N] float32 buffer of
    3D filter variances (world units^2) for the anti-aliased one.

    ``max_intersections_per_pass`` (int, settable): the most intersections one pass bins;
    a render over it takes the banded large path (module docstring), whose bands are in
    ``bands`` [(row0, row1, count)] after :meth:`prepare` / :meth:`setup` ([] otherwise).
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
        self.k_project_bwd = k("project/project_backward", "project_backward")
        self.k_gather = gpu.kernel("raster/binning", "gather_counts")
        self.k_rows = gpu.kernel("raster/binning", "count_rows")
        self.k_band_counts = gpu.kernel("raster/binning", "band_counts")
        self.k_emit = gpu.kernel("raster/binning", "emit_intersections")
        self.k_ranges = gpu.kernel("raster/binning", "tile_ranges")
        self.k_fwd = gpu.kernel("raster/raster", "rasterize_forward")
        self.set_backward_pixels_per_thread(BACKWARD_PIXELS_PER_THREAD)
        self.k_clear_grads = gpu.kernel("raster/raster", "clear_screen_grads")
        self.k_skip_masked = gpu.kernel("raster/mask", "skip_masked_tiles")
        # masks' "ignore" mode (spirula/engine/splat/mask_targets.py): the training image's packed RGBA8
        # buffer [H, W] whose alpha-0 pixels are out of the loss; its tiles with no other pixel
        # are left empty after binning (shaders/raster/mask.slang). None: every tile renders
        self.skip_masked: spy.Buffer | None = None
        # workgroups per tile in the backward (1: one walks the whole list). 8 measured
        # fastest with 4 (benchmarks/step_overhead.py --splits, docs/benchmarks-history.md, sixth session):
        # the backward 18-46% faster than 1 on fox, office_chair and mouse (H200)
        self.backward_splits = 8
        # extra link-time constants of project_backward_adam (benchmarks compare variants)
        self.adam_constants: dict[str, int] = {}
        self.n = 0
        self.m = 0
        self.count_on_gpu = False  # capacity mode (setup): m is a capacity, the count lives in "total"
        self.capacity: int | None = None  # capacity mode: the caller's capacity (the overflow guard's)
        self.view: View | None = None
        self.filter3d: spy.Buffer | None = None  # anti-aliased projection's 3D filter (setup)
        self.geometry = False  # the render composites surfel geometry too (setup)
        # geometry renders: the geometry map's gradient also reaches the splats' alphas
        # (raster.slang GEOMETRY_ALPHA_GRAD; TrainConfig.geometry_alpha_grad)
        self.geometry_alpha_grad = True
        self.max_intersections_per_pass = default_max_intersections(gpu, self.sort)
        self.bands: list[tuple[int, int, int]] = []  # large path: (row0, row1, count); [] = one pass
        self._prepared = False  # the projection and count of this render are recorded already
        self._checkpointed = False  # the recorded forward kept what a split backward replays from
        self._band_scratch = BufferSet(gpu, "raster.band")  # large path's binning (outlives arena phases)

    def _b(self, name: str, count: int, itemsize: int = 4):
        return self.bufs.get(name, count * itemsize, IMAGE if name in self._IMAGE_BUFS else None)

    # --- pass 1: projection, depth order, tile counts ------------------------------------
    def prepare(self, params: spy.Buffer, n: int, cams: spy.Buffer, view: View, sh_degree: int,
                filter3d: spy.Buffer | None = None, geometry: bool = False, occlusion=None) -> int:
        """Project ``n`` Gaussians for ``view`` and count intersections; returns that count
        (Python int, 64-bit exact; the one host synchronisation of a step, two on the large
        path). ``geometry``: as :meth:`setup`'s."""
        self.setup(params, n, cams, view, sh_degree, capacity=None, filter3d=filter3d, geometry=geometry,
                   occlusion=occlusion)
        return self._count()

    def _count(self) -> int:
        """Record the projection and count, submit, read the count; over the per-pass limit,
        plan the bands (large path)."""
        enc = self.gpu.encoder()
        self.record_prepare(enc)
        self.gpu.submit(enc)
        self._prepared = True
        self.count_on_gpu = False
        self.m = read_total(self.gpu, self._b("total", 4))
        if self.m > self.max_intersections_per_pass:
            self.bands = self._plan_bands()
        return self.m

    def _plan_bands(self) -> list[tuple[int, int, int]]:
        """Per-tile-row counts (one small read-back, 64-bit) -> bands of at most the per-pass
        limit; :attr:`m` becomes their sum."""
        per_row = self.row_counts()
        total = int(per_row.sum(dtype=np.uint64))
        # both count the same tiles; past 2^32 the scan's total may be a lower bound
        if total != self.m and self.m < 1 << 32:
            raise RuntimeError(f"tile rows hold {total} intersections, the scan counted {self.m}")
        self.m = total
        return split_bands(per_row, self.max_intersections_per_pass)

    def row_counts(self) -> np.ndarray:
        """Intersections per tile row of the projected view, [tiles_y] uint64 (counted on
        the GPU with 64-bit sums, then read back: waits for the GPU)."""
        v = self.view
        rows = self._b("row_counts", 2 * v.tiles_y)
        enc = self.gpu.encoder()
        self.gpu.clear(enc, rows)
        self.k_rows.record(enc, [max(self.n, 1), 1, 1], tiles_touched=self._b("tiles_touched", self.n),
                           means2d=self._b("means2d", 2 * self.n), radii=self._b("radii", 2 * self.n),
                           conic_opac=self._b("conic_opac", 4 * self.n), rows=rows, n=self.n, tiles_x=v.tiles_x, tiles_y=v.tiles_y)
        self.gpu.submit(enc)
        w = self.gpu.read(rows, np.uint32, 2 * v.tiles_y).astype(np.uint64)
        return w[0::2] | (w[1::2] << np.uint64(32))

    def setup(self, params: spy.Buffer, n: int, cams: spy.Buffer, view: View, sh_degree: int,
              capacity: int | None, filter3d: spy.Buffer | None = None, geometry: bool = False,
              occlusion=None) -> None:
        """Set the render's inputs without recording anything. ``capacity``: the number of
        intersections the buffers and dispatches are sized for (capacity mode, see the
        module docstring); ``None`` for :meth:`prepare`'s exact mode. A capacity over
        :attr:`max_intersections_per_pass` takes the large path: the projection and count
        run here, synchronously, and :meth:`record_prepare` then records nothing.
        ``filter3d``: [n] float32 3D filter variances for the anti-aliased projection
        (None: classic). ``geometry``: composite the surfel geometry too (module docstring).
        ``occlusion``: an spirula/engine/splat/occlusion.Occlusion fitted to the view (the viewer): bin
        behind its cut when its ``use_cut`` is set (not on the large path), and write its map."""
        self.gpu.check_gaussians(n, "rendering")
        if filter3d is not None and filter3d.size < 4 * n:
            raise ValueError(f"the 3D filter holds {filter3d.size // 4} values for {n} Gaussians")
        self.n, self.view, self.params, self.cams, self.sh_degree = n, view, params, cams, sh_degree
        self.filter3d = filter3d
        self.geometry = bool(geometry)
        if occlusion is not None and occlusion.use_cut and (capacity is None or capacity > self.max_intersections_per_pass):
            raise ValueError("an occlusion cut needs a capacity within one pass (the large path counts without it)")
        self.occlusion = occlusion
        self.capacity = None if capacity is None else int(capacity)
        self.count_on_gpu = capacity is not None
        self.m = int(capacity) if capacity is not None else 0
        self.bands, self._prepared, self._checkpointed = [], False, False
        if capacity is not None and capacity > self.max_intersections_per_pass:
            self._count()  # exact from here on; the guard still compares with the capacity

    def overflow_guard(self) -> tuple[spy.Buffer, int]:
        """(uint32 buffer, capacity) for kernels that must skip a step whose intersection
        count (buffer[0], saturating) outgrew the capacity; in exact mode the capacity never
        binds. On the large path in capacity mode every intersection is binned, but a count
        over the caller's capacity still skips the step, as the caller (spirula/engine/splat/
        step_pipeline.py) expects of an overflow."""
        return self._b("total", 4), (self.capacity if self.capacity is not None else 0xFFFFFFFF)

    def record_count_copy(self, enc, dst: spy.Buffer, offset: int) -> None:
        """Record a copy of this render's intersection count (uint32, saturating at 2^32 - 1)
        to ``dst[offset]`` (e.g. a host-visible read-back buffer, read once the submission
        has finished)."""
        self.gpu.copy(enc, dst, offset, self._b("total", 4), 0, 4)

    def record_prepare(self, enc) -> None:
        """Record projection, depth sort and the scan of tile counts (total in "total",
        see spirula/engine/splat/sort.py Scan.record)."""
        if self._prepared:  # the large path's setup recorded and counted it already
            return
        n, v = self.n, self.view
        aa = self._antialias()
        k = self.gpu.kernel("project/project", "project_forward", **self._project_constants(),
                            DEPTH_KEY_BITS=DEPTH_KEY_BITS) if aa or self.geometry or self.occlusion else self.k_project
        geo = {"geom": self._b("geom", 4 * n)} if self.geometry else {}
        occ = self.occlusion
        groups = occ.project_groups(n) if occ is not None else 0
        if occ is not None:  # the viewer's projection: PROJECT_GROUP_SPLATS splats a workgroup, marking the kept
            geo.update(kept_mask=self._b("kept_mask", 32 * groups), group_kept=self._b("group_kept", groups))
        threads = groups * 256 if occ is not None else max(n, 1)
        k.record(
            enc, [threads, 1, 1], **aa, **geo, **self._occlusion_args("project"), params=self.params, cams=self.cams, means2d=self._b("means2d", 2 * n),
            conic_opac=self._b("conic_opac", 4 * n), rgb=self._b("rgb", 3 * n),
            depths=self._b("depths", n), radii=self._b("radii", 2 * n),
            tiles_touched=self._b("tiles_touched", n), depth_keys=self._b("depth_keys", n),
            depth_ids=self._b("depth_ids", n), n=n, cam_index=v.cam_index,
            sh_degree=self.sh_degree, tiles_x=v.tiles_x, tiles_y=v.tiles_y)
        inputs, kept = None, None
        if occ is not None:  # sort only the splats left with a tile, from their compacted copy
            inputs, kept = (self._b("kept_keys", n), self._b("kept_ids", n)), occ.kept
            occ.record_compaction(enc, self.scan, n, self._b("depth_keys", n), geo["kept_mask"], geo["group_kept"],
                                  group_offsets=self._b("group_offsets", groups), keys_out=inputs[0], ids_out=inputs[1])
        with self.arena.phase(enc, "depth_sort") as s:
            self.sort.record(enc, self._b("depth_keys", n), self._b("depth_ids", n), n, DEPTH_KEY_BITS, scratch=s,
                             count=kept, site="depth", inputs=inputs)
        k = self.gpu.kernel("raster/binning", "gather_counts", OCCLUSION=1) if occ is not None else self.k_gather
        k.record(
            enc, [max(n, 1), 1, 1], **self._occlusion_args("gather"), order=self._b("depth_ids", n),
            tiles_touched=self._b("tiles_touched", n), counts_sorted=self._b("counts_sorted", n), n=n)
        self.scan.record(enc, self._b("counts_sorted", n), self._b("offsets", n), n, total=self._b("total", 4),
                         site="counts", count=kept)  # the viewer: the kept splats only

    # --- pass 2: binning, tile sort, compositing ---------------------------------------
    def record_forward(self, enc, backward: bool = False) -> None:
        """Bin, tile-sort and composite the view into :attr:`image` [H, W, 3], final_T [H, W]
        and last_index [H, W] (per band on the large path). ``backward``: a
        :meth:`record_backward` follows, so the forward also keeps the per-pixel state a split
        backward replays from (16 bytes an intersection; renders alone skip it)."""
        v = self.view
        npix = v.width * v.height
        self._checkpointed = backward and self._split_backward()
        k = self.gpu.kernel("raster/raster", "rasterize_forward", **self._raster_constants()) \
            if self.geometry or self.occlusion else self.k_fwd
        geo = dict(geom=self._b("geom", 4 * self.n), geom_image=self.geom_image,
                   geom_checkpoints=self._geom_checkpoints()) if self.geometry else {}
        geo.update(self._occlusion_args("raster"))
        for row0, row1, isect_ids, ranges in self._record_bins(enc):
            k.record(
                enc, [v.tiles_x * TILE, (row1 - row0) * TILE, 1], "band" if self.bands else "", **geo,
                ranges=ranges, isect_ids=isect_ids, means2d=self._b("means2d", 2 * self.n),
                conic_opac=self._b("conic_opac", 4 * self.n), rgb=self._b("rgb", 3 * self.n),
                image=self.image, final_T=self._b("final_T", npix), last_index=self._b("last_index", npix),
                checkpoints=self._checkpoints(), write_checkpoints=int(self._checkpointed),
                width=v.width, height=v.height, tiles_x=v.tiles_x, background=self.background, row0=row0)

    def _checkpoints(self, name: str = "checkpoints") -> spy.Buffer:
        """The forward's per-pixel (C, T) before each tile batch after the first, float4 per
        slot, (intersections / 256 + 1) * 256 slots (raster.slang checkpoint_index); a
        placeholder when the forward keeps none. ``geom_checkpoints``: the composited
        geometry at the same slots (geometry renders)."""
        slots = (self.m // RASTER_BLOCK + 1) * RASTER_BLOCK if self._checkpointed else 1
        return self._b(name, 4 * slots)

    def _geom_checkpoints(self) -> spy.Buffer:
        """The composited geometry at the checkpoints' slots: only the backward that sends
        the geometry's gradient to the alphas reads it (a placeholder otherwise)."""
        return self._checkpoints("geom_checkpoints") if self.geometry_alpha_grad else self._b("geom_checkpoints", 4)

    def _record_bins(self, enc):
        """Record the binning of the whole view (normal path) or of each band in turn (large
        path); yields (row0, row1, isect_ids, ranges) once a pass's sorted list and tile
        ranges [(row1 - row0) * tiles_x, 2] are recorded, for the raster kernels to follow
        before the next band reuses the buffers."""
        n, v = self.n, self.view
        if not self.bands:
            m = self.m
            isect_ids = self._b("isect_ids", max(m, 1))
            ranges = self._b("ranges", 2 * v.tiles_x * v.tiles_y)
            # the tile keys and the tile sort's scratch are dead once the tile ranges are known
            with self.arena.phase(enc, "intersect") as s:
                self._record_bin(enc, s, m, 0, v.tiles_y, isect_ids, ranges, "")
            yield 0, v.tiles_y, isect_ids, ranges
            return
        # large path: per band, its clipped counts and their offsets in the whole view's
        # buffers; scratch from a set of its own, as the backward re-bins while its arena
        # phase is open
        isect_ids = self._b("isect_ids", max(c for _, _, c in self.bands))
        ranges = self._b("ranges", 2 * v.tiles_x * v.tiles_y)
        for row0, row1, m in self.bands:
            k = self.gpu.kernel("raster/binning", "band_counts", OCCLUSION=1) if self.occlusion else self.k_band_counts
            k.record(
                enc, [max(n, 1), 1, 1], "band", **self._occlusion_args("gather"), order=self._b("depth_ids", n), tiles_touched=self._b("tiles_touched", n),
                means2d=self._b("means2d", 2 * n), radii=self._b("radii", 2 * n),
                conic_opac=self._b("conic_opac", 4 * n), counts_sorted=self._b("counts_sorted", n), n=n, tiles_x=v.tiles_x, tiles_y=v.tiles_y,
                row0=row0, row1=row1)
            self.scan.record(enc, self._b("counts_sorted", n), self._b("offsets", n), n, scratch=self._band_scratch,
                             site="band")
            self._record_bin(enc, self._band_scratch, m, row0, row1, isect_ids, ranges, "band")
            yield row0, row1, isect_ids, ranges

    def _record_bin(self, enc, scratch, m: int, row0: int, row1: int, isect_ids, ranges, site: str) -> None:
        """emit -> tile sort -> tile ranges of tile rows [row0, row1) with m intersections
        (a capacity when the count is on the GPU); the offsets are the scan of that range's
        per-Gaussian counts in depth order."""
        n, v = self.n, self.view
        if m > 0:
            isect_tiles = scratch.get("isect_tiles", 4 * m)
            k = self.gpu.kernel("raster/binning", "emit_intersections", OCCLUSION=1) if self.occlusion else self.k_emit
            k.record(
                enc, [max(n, 1), 1, 1], site, **self._occlusion_args("emit"), order=self._b("depth_ids", n),
                offsets=self._b("offsets", n), tiles_touched=self._b("tiles_touched", n),
                means2d=self._b("means2d", 2 * n), radii=self._b("radii", 2 * n),
                conic_opac=self._b("conic_opac", 4 * n), isect_tiles=isect_tiles, isect_ids=isect_ids,
                n=n, tiles_x=v.tiles_x, tiles_y=v.tiles_y, capacity=m, row0=row0, row1=row1)
            bits = ((row1 - row0) * v.tiles_x).bit_length()  # tile ids up to the filler past the last tile
            count = self._b("total", 4) if self.count_on_gpu else None
            self.sort.record(enc, isect_tiles, isect_ids, m, bits, scratch=scratch, count=count, site=site + "tile")
        self.gpu.clear(enc, ranges)
        if m > 0:
            threads, groups_x = dispatch_grid(m, 256)  # one thread per intersection: 2D past 16.7M
            self.k_ranges.record(enc, threads, site, isect_tiles=isect_tiles, ranges=ranges,
                                 count=self._b("total", 4), m=m, count_from_buf=int(self.count_on_gpu),
                                 groups_x=groups_x, tiles=(row1 - row0) * v.tiles_x)
        if self.skip_masked is not None and m > 0:
            self.k_skip_masked.record(enc, [v.tiles_x * TILE, (row1 - row0) * TILE, 1], site, gt=self.skip_masked,
                                      ranges=ranges, width=v.width, height=v.height, tiles_x=v.tiles_x, row0=row0)

    @property
    def image(self) -> spy.Buffer:
        """The rendered image [H, W, 3] float32 of the current view."""
        v = self.view
        return self._b("image", 3 * v.width * v.height)

    def image_grad(self) -> spy.Buffer:
        """Buffer [H, W, 3] float32 the loss writes dL/d(image) into."""
        v = self.view
        return self._b("g_image", 3 * v.width * v.height)

    @property
    def geom_image(self) -> spy.Buffer:
        """Geometry renders: the composited surfel geometry [H, W, 4] float32 of the view,
        (N, d) = sum_i a_i T_i (n_i, d_i) with n_i the splat's camera-space unit normal
        facing the camera and d_i = n_i . p_i its plane's offset (world units; OpenCV axes)."""
        v = self.view
        return self._b("geom_image", 4 * v.width * v.height)

    @property
    def final_T(self) -> spy.Buffer:
        """The transmittance left after the splats [H, W] float32 of the current view."""
        v = self.view
        return self._b("final_T", v.width * v.height)

    def geom_image_grad(self) -> spy.Buffer:
        """Buffer [H, W, 4] float32 of dL/d(:attr:`geom_image`) for the backward of a
        geometry render (the caller writes it)."""
        v = self.view
        return self._b("g_geom_image", 4 * v.width * v.height)

    def _antialias(self) -> dict:
        """The projection kernels' extra argument of an anti-aliased render ({} when classic)."""
        return {} if self.filter3d is None else {"filter3d": self.filter3d}

    def _occlusion_args(self, stage: str) -> dict:
        """The occlusion kernels' extra arguments ({} without occlusion)."""
        return {} if self.occlusion is None else self.occlusion.args(stage, self._b("depths", self.n))

    def _raster_constants(self) -> dict:
        geometry = {"GEOMETRY": 1, **({} if self.geometry_alpha_grad else {"GEOMETRY_ALPHA_GRAD": 0})}
        return {**(geometry if self.geometry else {}), **({"OCCLUSION": 1} if self.occlusion else {})}

    def _project_constants(self) -> dict:
        """Link-time constants of the projection kernels for this render (ANTIALIAS and
        GEOMETRY only when set, so the classic kernels are the ones compiled before they existed)."""
        return dict(MAX_SH_DEGREE=self.max_sh_degree, **({"ANTIALIAS": 1} if self.filter3d is not None else {}),
                    **({"GEOMETRY": 1} if self.geometry else {}),
                    **({"OCCLUSION": 1, "PROJECT_GROUP_SPLATS": PROJECT_GROUP_SPLATS} if self.occlusion else {}))

    # --- convenience for eval and tests ---------------------------------------------------
    def render(self, params: spy.Buffer, n: int, cams: spy.Buffer, view: View, sh_degree: int,
               filter3d: spy.Buffer | None = None) -> np.ndarray:
        """Forward render to a host array [H, W, 3] float32 (waits for the GPU)."""
        self.prepare(params, n, cams, view, sh_degree, filter3d=filter3d)
        enc = self.gpu.encoder()
        self.record_forward(enc)
        self.gpu.submit(enc)
        return self.gpu.read(self.image, np.float32, shape=(view.height, view.width, 3))

    def buffer(self, name: str):
        """An internal buffer (tests, benchmarks). A phase buffer (e.g. ``g_screen``) is the
        arena slot it had in its phase: after the phase it may hold another phase's data (or
        poison), by design."""
        try:
            return self.bufs[name]
        except KeyError:
            return next(d[name] for d in self.arena._last.values() if name in d)

    def read(self, name: str, dtype=np.float32, shape=None) -> np.ndarray:
        """Host copy of :meth:`buffer` ``name`` (tests and debugging)."""
        return self.gpu.read(self.buffer(name), dtype, shape=shape)

    def trim(self) -> None:
        """Free scratch outgrown since the last call (only after waiting for the GPU)."""
        self.gpu.forget_bindings()  # cached kernel arguments would keep outgrown buffers alive
        self.arena.trim()
        self.bufs.trim()
        self._band_scratch.trim()
        self.sort.trim()
        self.scan.trim()

    def outgrown_bytes(self) -> int:
        """Bytes of the scratch replaced by growth, held until :meth:`trim`."""
        return sum(s.outgrown_bytes() for s in (self.arena, self.bufs, self._band_scratch, self.sort, self.scan))
