"""The backward of the tile rasterizer (spirula/engine/splat/render.py): dL/d(image) -> screen-space
gradients -> packed parameter gradients, or one Adam step on the parameters themselves.

In the backward phase of the rasterizer's arena (the screen-space gradients live only
there), after clear_screen_grads zeroes them, two kernels in turn:

* rasterize_backward (shaders/raster/raster.slang): the back-to-front replay of each tile's
  list into the screen-space gradient rows g_screen [N, 9] (spirula/engine/splat/screen_grad.py),
  accumulated; over the forward's sorted lists, or on the large path per band over the same
  lists binned again. After a forward that kept its checkpoints (``record_forward(
  backward=True)``), :attr:`backward_splits` workgroups share each tile.
* project_backward (shaders/project/project_backward.slang): those rows -> the packed
  gradient rows [N, D]; or, in the training step, project_backward_adam, which applies Adam
  to the parameters in the same pass (no [N, D] gradient buffer exists).

:class:`RasterBackward` is a mixin of :class:`spirula.engine.splat.render.Rasterizer`: it records
from that class's buffers, forward state and kernels (documented there).
"""

from __future__ import annotations

import numpy as np
import slangpy as spy

from ..device import dispatch_grid
from .camera_table import TILE
from .screen_grad import SCREEN_GRAD_STRIDE, split_screen_grads

BWD_WG = 64  # Gaussians per workgroup of project_backward_adam (BWD_WG in project_backward.slang)
# pixels per thread of rasterize_backward (PY in raster.slang), stacked in y: each splat's
# shared-memory loads and subgroup sum then serve that many pixels. On the H200 2 against 1:
# fox @15k 866 -> 837 us, mouse @7k 574 -> 540; 4 was slower (docs/benchmarks-history.md, seventh session)
BACKWARD_PIXELS_PER_THREAD = 2


class RasterBackward:
    """The backward half of :class:`spirula.engine.splat.render.Rasterizer` (module docstring)."""

    def set_backward_pixels_per_thread(self, py: int) -> None:
        """Specialise rasterize_backward for ``py`` pixels per thread (1, 2 or 4; PY in
        raster.slang): a workgroup of 16 x 16 / py threads per tile."""
        if py not in (1, 2, 4):
            raise ValueError(f"pixels per thread must be 1, 2 or 4, not {py}")
        self.backward_pixels_per_thread = py
        self.k_bwd = self.gpu.kernel("raster/raster", "rasterize_backward", PY=py)

    def record_backward(self, enc, grads: spy.Buffer | None, grad2d_sum: spy.Buffer, vis_count: spy.Buffer,
                        accumulate_stats: bool = True, optimizer: dict | None = None) -> None:
        """dL/d(image) (in :meth:`image_grad`) -> packed parameter gradients ``grads`` [N, D]
        (overwritten); densification statistics accumulated into grad2d_sum [N], vis_count [N].
        With ``optimizer`` (GaussianModel.adam_args) there is no ``grads``: the projection
        backward applies one Adam step to the parameters itself (project_backward_adam,
        specialised for the moments' storage the dict names)."""
        if (grads is None) == (optimizer is None):
            raise ValueError("record_backward() takes either grads or optimizer")
        n = self.n
        with self.arena.phase(enc, "backward") as s:  # screen-space gradients: this phase only
            g_screen = s.get("g_screen", 4 * SCREEN_GRAD_STRIDE * n)
            threads, groups_x = dispatch_grid(max(SCREEN_GRAD_STRIDE * n, 1), 256)  # one thread per float
            self.k_clear_grads.record(enc, threads, g_screen=g_screen, n=n, groups_x=groups_x)
            if self.geometry:
                self.gpu.clear(enc, self._b("g_geom", 4 * n))
            self._record_backward(enc, grads, grad2d_sum, vis_count, accumulate_stats, g_screen, optimizer)

    def screen_grads(self) -> dict[str, np.ndarray]:
        """Host copies of the last backward's screen-space gradients (tests and tools):
        g_rgb [N, 3], g_means2d [N, 2], g_conic [N, 3], g_opacity [N] float32 (read from
        the backward phase's arena slot: valid until another phase reuses it)."""
        return split_screen_grads(self.read("g_screen", np.float32, (self.n, SCREEN_GRAD_STRIDE)))

    def _record_raster_backward(self, enc, g_screen) -> None:
        """Back-to-front replay into the screen-space gradients (accumulated): over the
        forward's tile lists, or per band over the same lists binned again (large path)."""
        n, v = self.n, self.view
        npix = v.width * v.height
        if self.bands:
            passes = self._record_bins(enc)
        else:  # the forward's sorted list and ranges are still there
            passes = [(0, v.tiles_y, self._b("isect_ids", max(self.m, 1)), self._b("ranges", 2 * v.tiles_x * v.tiles_y))]
        splits = self.backward_splits if self._checkpointed else 1  # split only from a forward's checkpoints
        k, geo = self.k_bwd, {}
        if self.geometry:
            k = self.gpu.kernel("raster/raster", "rasterize_backward", PY=self.backward_pixels_per_thread, GEOMETRY=1,
                                **({} if self.geometry_alpha_grad else {"GEOMETRY_ALPHA_GRAD": 0}))
            geo = dict(geom=self._b("geom", 4 * n), geom_image=self.geom_image,
                       geom_checkpoints=self._geom_checkpoints(), g_geom_image=self.geom_image_grad(),
                       g_geom=self._b("g_geom", 4 * n))
        for row0, row1, isect_ids, ranges in passes:
            k.record(
                enc, [v.tiles_x * TILE, (row1 - row0) * (TILE // self.backward_pixels_per_thread) * splits, 1],
                "band" if self.bands else "", **geo,
                ranges=ranges, isect_ids=isect_ids,
                means2d=self._b("means2d", 2 * n), conic_opac=self._b("conic_opac", 4 * n),
                rgb=self._b("rgb", 3 * n), final_T=self._b("final_T", npix),
                last_index=self._b("last_index", npix), g_image=self.image_grad(),
                g_screen=g_screen, checkpoints=self._checkpoints(), image=self.image, splits=splits,
                width=v.width, height=v.height, tiles_x=v.tiles_x, background=self.background, row0=row0)

    def _record_backward(self, enc, grads, grad2d_sum, vis_count, accumulate_stats, g_screen,
                         optimizer=None) -> None:
        n, v = self.n, self.view
        isect_total, isect_capacity = self.overflow_guard()
        self._record_raster_backward(enc, g_screen)
        aa = self._antialias()
        if self.geometry:
            aa = {**aa, "g_geom": self._b("g_geom", 4 * n)}
        common = dict(**aa, params=self.params, cams=self.cams, radii=self._b("radii", 2 * n),
                      conic_opac=self._b("conic_opac", 4 * n), g_screen=g_screen,
                      grad2d_sum=grad2d_sum, vis_count=vis_count, n=n, cam_index=v.cam_index,
                      isect_total=isect_total, isect_capacity=isect_capacity,
                      sh_degree=self.sh_degree, accumulate_stats=int(accumulate_stats))
        if optimizer is None:
            k = self.gpu.kernel("project/project_backward", "project_backward", **self._project_constants()) if aa \
                else self.k_project_bwd
            k.record(enc, [max(n, 1), 1, 1], grads=grads, **common)
        else:
            args = dict(optimizer)
            k = self.gpu.kernel("project/project_backward", "project_backward_adam", **self._project_constants(),
                                MOMENTS_BF16=int(args.pop("moments_bf16")),
                                **self.adam_constants)  # compiled on first use, then cached
            threads, groups_x = dispatch_grid(n, BWD_WG)
            k.record(enc, threads, **common, **args, groups_x=groups_x)

    def _split_backward(self) -> bool:
        """The backward shares each tile among backward_splits workgroups: in one pass only
        (a band's checkpoints would not outlive the next band's forward), and up to a
        quarter of the per-pass intersection limit, so the 16-byte checkpoints stay within
        one storage buffer and the pass's memory plan (both sized at 4 bytes a limit unit)."""
        return self.backward_splits > 1 and not self.bands and self.m <= self.max_intersections_per_pass // 4
