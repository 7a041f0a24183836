"""The 3DGS training loop: one camera per step, everything on the GPU.

Per step, one command buffer and no host read: project, depth sort, tile-count scan,
binning, tile sort, rasterize, L1 + D-SSIM loss, backward with Adam fused into it. The tile sort is sized
from earlier steps' intersection counts, read a step late (spirula/engine/splat/step_pipeline.py),
so the host records step s + 1 while the GPU runs step s. The loss is accumulated on the
GPU; every ``log_interval`` steps the step itself copies the sum to the host-visible ring and
clears it, and the host reads it when that step retires (:meth:`Trainer.collect_losses`), so
logging adds no wait either. Density control is the config's ``strategy``, one strategy
object called through the same hooks (:attr:`Trainer.densifier`): "adc" (3DGS's clone /
split / prune and opacity reset: spirula/engine/splat/adc.py), "mcmc" (relocation,
growth to an exact budget, per-step position noise and regularisers: spirula/engine/splat/mcmc.py)
or "auto" (:func:`spirula.engine.config.resolve_strategy`: mcmc, adc for runs too short for it; the
choice is :attr:`Trainer.strategy`); either waits for the GPU only on its refine steps.
With ``antialias`` (Mip-Splatting, spirula/engine/splat/antialias.py) every render uses the
per-Gaussian 3D filter, recomputed at the start and every ``densify_interval`` steps (after
the refine when one is due) in a submission of its own, with no wait. With ``appearance``
"affine" or "bilagrid" (spirula/engine/splat/appearance.py) the loss sees the render through the
training image's own colour transform, whose backward and Adam step join the same command
buffer (3 or 4 dispatches, no read); "off" records exactly the step above.
With ``geometry`` (spirula/engine/splat/geometry_phase.py), steps from ``geometry_from`` x steps on render
the surfel geometry too and add the depth-normal consistency loss (one clear and one dispatch,
its mean logged as ``geometry_loss``) and the flattening regulariser (in the fused Adam pass);
earlier steps, and every evaluation render, are the colour-only ones. With ``lambda_multiview``
> 0 a geometry step first renders the geometry of a neighbouring training view (forward only,
into the rasterizer's own buffers, which the step's render then reuses: only its [H, W] depth
is kept, in a buffer of the largest image's size) and adds the multi-view consistency loss's
gradient to the map's (four commands more, logged as ``multiview_loss``). That render is in
the same command buffer; only where the step is counted synchronously anyway (no count known
yet, or the large path) does it go in a submission of its own before the step's. Its
intersections get the step's capacity: when they outgrow it, its depth is all invalid and
the term is 0 for that step (the host is not told; the step itself is not skipped). With
``lambda_mvrgb`` > 0 a geometry step adds the multi-view photometric consistency loss (patches
of its training image warped by its rendered planes into the same kind of neighbour's training
image, 1 - NCC; three commands, no render; logged as ``mvrgb_loss``).
With masks (the dataset's ``masks`` mode, spirula/engine/splat/mask_targets.py): "ignore" uploads each
training image with its mask in the alpha byte, the loss weighs pixels by it and the step's
render skips the tiles whose every pixel is masked out (one dispatch more); "cutout" uploads
the background-filled target and records exactly the unmasked step.

What happens between two steps (evaluations, checkpoints, progress reports, the end) is
scheduled once, by :class:`spirula.engine.splat.schedule.TrainingRun`: :meth:`Trainer.train`,
`spirula train` and the studio's engine thread all drive it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..config import APPEARANCES, TrainConfig, resolve_strategy
from ..device import Gpu
from ..errors import DatasetError, NonFiniteError
from ..ingest.dataset import Dataset
from .adc import AdcDensifier
from .antialias import SmoothingFilter
from .appearance import Appearance, default_settings
from .camera_table import View, camera_table
from .geometry_phase import (LOSS_WORD, MV_LOSS_WORD, MVRGB_LOSS_WORD, DepthNormalLoss, GeometrySettings, MultiViewLoss,
                       Neighbours, PhotometricMultiViewLoss, neighbour_views)
from .guard import raise_if_flagged
from .init import gaussians_from_file, gaussians_from_points, initial_points, look_point
from .loss import PhotometricLoss
from .mask_targets import training_rgba
from .mcmc import McmcDensifier, McmcSettings, lr_means_final_for, noise_lr_for
from .model import GaussianModel
from .render import Rasterizer
from .res_schedule import level_camera_table, level_image, level_size
from .schedule import Progress, TrainingRun, step_plan
from .scene_scale import training_extent
from .step_pipeline import StepPipeline


@dataclass
class TrainState:
    step: int = 0
    history: list[dict] = field(default_factory=list)
    stopped_early: bool = False
    logged_step: int = 0      # step of the last loss read (the accumulator holds the steps since)
    in_step: bool = False     # True while a step is half done (an interrupt there leaves no checkpointable state)


def pack_rgba8(image: np.ndarray) -> np.ndarray:
    """[H, W, 3] uint8 -> [H, W] uint32 RGBA8 (r in the low byte, alpha 255)."""
    h, w, _ = image.shape
    rgba = np.empty((h, w, 4), np.uint8)
    rgba[..., :3] = image
    rgba[..., 3] = 255
    return rgba.view(np.uint32)[..., 0]


class Trainer:
    # scratch outgrown by at least this many bytes (0: any) is freed the step after it grew,
    # less at the next densify (train_step). Measured on the H200 (BENCHMARKS.md): 0 took 10M
    # Gaussians from 8,287 to 7,596 MiB peak (eighth session); on fox 30k, 256 MiB gave the
    # same s/1k and a peak 46 MiB lower, inside the run-to-run spread of 742-946 MiB (ninth)
    eager_trim_bytes = 0

    def __init__(self, gpu: Gpu, dataset: Dataset, train_idx: list[int], cfg: TrainConfig):
        if not train_idx:
            raise DatasetError(f"{dataset.root}: no training images (every image is held out)")
        self.gpu, self.dataset, self.cfg = gpu, dataset, cfg
        self.train_idx = list(train_idx)
        if cfg.adam_moments not in ("fp32", "bf16"):
            raise ValueError(f"adam_moments must be 'fp32' or 'bf16', not {cfg.adam_moments!r}")
        if cfg.appearance not in APPEARANCES:
            raise ValueError(f"appearance must be one of {', '.join(APPEARANCES)}, not {cfg.appearance!r}")
        gpu.check_gaussians(cfg.max_gaussians, "--max-gaussians")  # before anything is allocated
        self.rng = np.random.default_rng(cfg.seed)
        self.extent, self.warnings = training_extent(dataset)  # refuses degenerate camera sets
        self.has_points = dataset.points is not None and len(dataset.points) > 0  # else random init
        # every step number the run derives from its length (spirula/engine/splat/schedule.py, the one place)
        self.plan = step_plan(cfg)
        self.strategy = resolve_strategy(cfg.strategy, self.has_points, self.plan.steps)  # "auto" -> "adc" or "mcmc"
        mcmc = self.strategy == "mcmc"
        # the means' lr decays to this (x extent): MCMC's own end, ADC's 3DGS one
        self.lr_means_final = lr_means_final_for(cfg.mcmc_lr_means_final, self.has_points) if mcmc \
            else cfg.lr_means_final
        self.sh_start = 0  # the SH degree active at step 0 (an imported model's own degree)
        if cfg.init_file:  # fine-tuning a model made elsewhere (`spirula train --init`)
            rows, self.sh_start, notes = gaussians_from_file(cfg.init_file, cfg.sh_degree)
            self.warnings += notes
        else:
            pts, cols = initial_points(dataset, cfg.init_random_points, self.rng, self.train_idx, cfg.init_random)
            if mcmc:  # gsplat's simple_trainer MCMC start: opaque, small splats (the noise spreads them)
                rows = gaussians_from_points(pts, cols, cfg.sh_degree, cfg.mcmc_init_opacity, cfg.mcmc_init_scale)
            else:
                rows = gaussians_from_points(pts, cols, cfg.sh_degree, cfg.init_opacity)
        self.model = GaussianModel(gpu, rows, cfg.sh_degree, moments_bf16=cfg.adam_moments == "bf16")
        # the density control: one strategy object, called through its hooks (spirula/engine/splat/adc.py)
        if mcmc:
            settings = McmcSettings(start=cfg.densify_from, interval=cfg.densify_interval, noise_lr=noise_lr_for(cfg.mcmc_noise_lr, self.has_points),
                                    scale_reg=cfg.mcmc_scale_reg, stop=self.plan.mcmc_refine_stop)
            budget = min(cfg.mcmc_budget, cfg.max_gaussians)
            unit = self.world_unit()
            self.densifier = McmcDensifier(gpu, self.model, settings, budget, unit)
            if budget < len(rows):
                self.warnings.append(f"the MCMC budget ({budget:,}) is below the {len(rows):,} initial points: MCMC "
                                     f"relocates but never removes, so the run keeps {len(rows):,} Gaussians")
        else:
            self.densifier = AdcDensifier(self.model, cfg, self.extent)
        if self.plan.steps <= cfg.densify_from:
            self.warnings.append(f"the run ends at step {self.plan.steps:,}, before densification starts (step "
                                 f"{cfg.densify_from:,}): the {len(rows):,} initial Gaussians are all it will have")
        self.raster = Rasterizer(gpu, cfg.sh_degree, cfg.background)
        self.raster.geometry_alpha_grad = cfg.geometry_alpha_grad
        # masks: "ignore" when the dataset has them in that mode and a training image has one
        self.masks = dataset.masks if any(dataset.cameras[i].mask is not None for i in self.train_idx) else "off"
        self.loss = PhotometricLoss(gpu, arena=self.raster.arena, ssim_padding=cfg.ssim_padding,
                                    masked=self.masks == "ignore")
        self.geometry: GeometrySettings | None = None  # the geometry phase's settings (None: off)
        self.neighbours: Neighbours | None = None  # the multi-view term's neighbour views (None: off)
        if cfg.geometry:
            for name in ("lambda_multiview", "lambda_mvrgb"):
                if not getattr(cfg, name) >= 0:
                    raise ValueError(f"{name} must be >= 0, not {getattr(cfg, name)}")
            self.geometry = GeometrySettings(self.plan.geometry_start, cfg.lambda_normal,
                                             cfg.lambda_flat, cfg.lambda_multiview, cfg.lambda_mvrgb)
            self.geometry_loss = DepthNormalLoss(gpu)
            self.geometry_unit = self.world_unit()
            if cfg.lambda_multiview > 0:
                self.multiview_loss = MultiViewLoss(gpu)
                npix = max(dataset.cameras[i].width * dataset.cameras[i].height for i in self.train_idx)
                self._mv_depth = gpu.buffer(4 * npix, "geometry.multiview_depth")  # the neighbour's [H, W] depth
            if cfg.lambda_mvrgb > 0:  # the photometric term reads both training images: no render, no buffer
                self.mvrgb_loss = PhotometricMultiViewLoss(gpu)
            if cfg.lambda_multiview > 0 or cfg.lambda_mvrgb > 0:
                self.neighbours = Neighbours(neighbour_views(dataset.cameras, self.train_idx, self.geometry_unit),
                                             cfg.seed)
                if self.neighbours.coverage() < 1:
                    self.warnings.append(
                        f"the multi-view consistency terms have no neighbour view for "
                        f"{1 - self.neighbours.coverage():.0%} of the training cameras (none within 30 degrees "
                        "and a baseline of 0.02-1.5 x the cameras' distance): their steps train without it")
        # per-image colour transforms, one slot per source image (the faces of a wide image share
        # theirs: Dataset.appearance_slots; held-out ones stay identity)
        self.appearance = None
        self.appearance_slot, self.appearance_names = dataset.appearance_slots()
        if cfg.appearance != "off":
            settings = replace(default_settings(cfg.appearance), start=self.plan.appearance_start,
                               end=self.plan.appearance_end)
            self.appearance = Appearance(gpu, cfg.appearance, len(self.appearance_names), settings)
        self.cams = gpu.upload(camera_table(dataset.cameras), "cameras")
        self.gt = {i: gpu.upload(self._training_rgba(i), f"gt.{i}") for i in self.train_idx}
        self.res = self.plan.resolution
        self._level, self._level_cams, self._level_gt, self._sizes = 0, self.cams, self.gt, None
        self.filter = SmoothingFilter(gpu, self.model, self.cams, self.train_idx) if cfg.antialias else None
        if self.filter is not None:
            self.filter.update()
        # word 0: loss sum; words 1..3: Adam's NaN/Inf flags; word 4: the geometry loss sum (geometry.py)
        self.loss_sum = gpu.zeros(32, "loss_sum")
        self.pipeline = StepPipeline(gpu)
        self.state = TrainState()
        self._order: list[int] = []
        self.t_start = time.perf_counter()  # history's elapsed_s counts from here
        self._unreported: list[dict] = []   # history entries collect_losses has not returned yet
        # host wall time outside the pipelined steps (seconds, counts), what a benchmark's s/1k
        # holds beyond the GPU's step time; densify_wait_s: waiting for the steps in flight
        self.host_stats = {"densify_wait_s": 0.0, "densify_s": 0.0, "densifications": 0,
                           "eager_trim_s": 0.0, "eager_trims": 0}

    def world_unit(self) -> float:
        """gsplat's world unit, the cameras' median distance to their look point (spirula/engine/splat/
        init.py look_point): MCMC's noise and scale regulariser and the flattening weight count
        lengths in it. Cameras at (nearly) one point look at nothing: the extent then."""
        unit = look_point([self.dataset.cameras[i] for i in self.train_idx])[1]
        return unit if unit > 0.01 * self.extent else self.extent

    def _next_camera(self) -> int:
        if not self._order:
            self._order = list(self.rng.permutation(self.train_idx))
        return int(self._order.pop())

    def sh_degree_at(self, step: int) -> int:
        return min(self.cfg.sh_degree, max(self.sh_start, step // max(self.cfg.sh_degree_interval, 1)))

    def mean_lr(self, step: int) -> float:
        """Exponential decay from lr_means to :attr:`lr_means_final` over the run (x extent)."""
        t = min(step / max(self.plan.lr_decay_end, 1), 1.0)
        lr = math.exp((1 - t) * math.log(self.cfg.lr_means) + t * math.log(self.lr_means_final))
        return lr * self.extent

    def train_step(self, step: int) -> None:
        """One optimisation step (``step`` counts from 0)."""
        cfg, m = self.cfg, self.model
        level = self.res.level_at(step)
        if level != self._level:
            self._enter_level(level)
        ci = self._next_camera()
        cam = self.dataset.cameras[ci]
        width, height = self._sizes[ci] if self._sizes else (cam.width, cam.height)
        view = View(ci, width, height)
        cams, gt = self._level_cams, self._level_gt
        sh = self.sh_degree_at(step)
        pipe = self.pipeline
        capacity = pipe.capacity()
        geo = self.geometry is not None and self.geometry.active(step)
        nb = self.neighbours.pick(ci, step) if geo and self.neighbours is not None else None
        enc = self.gpu.encoder()
        if nb is not None and self.geometry.lambda_multiview > 0:
            # before the step's own render: the neighbour's uses the same buffers
            self._record_neighbour(enc, nb, capacity, sh)
        # masks' ignore mode: the tiles of this image with every pixel masked out are not rasterised
        self.raster.skip_masked = gt[ci] if self.masks == "ignore" else None
        if capacity is None:  # no count known yet: count this one exactly (one host read)
            self.drain()
            pipe.observe(self.raster.prepare(m.buf["params"], m.n, cams, view, sh, filter3d=self.filter3d,
                                             geometry=geo))
        else:
            self.raster.setup(m.buf["params"], m.n, cams, view, sh, capacity=capacity, filter3d=self.filter3d,
                              geometry=geo)
        m.set_learning_rates(self.mean_lr(step), cfg.lr_scales, cfg.lr_quats, cfg.lr_opacities, cfg.lr_sh0, cfg.lr_shN)
        if capacity is not None:
            self.raster.record_prepare(enc)
        self.raster.record_forward(enc, backward=True)
        app = self.appearance if self.appearance is not None and self.appearance.active(step) else None
        slot = self.appearance_slot[ci]  # the camera's image's (a wide image's faces share one)
        render = self.raster.image if app is None else app.record_forward(enc, self.raster.image, slot, width, height)
        self.loss.record(enc, render, gt[ci], width, height, self.raster.image_grad(),
                         self.loss_sum, cfg.lambda_dssim)
        if app is not None:  # dL/dI' -> dL/dI in place, and the image's own Adam step
            app.record_backward(enc, self.raster.image, self.raster.image_grad(), slot, width, height,
                                self.loss_sum, step, self.raster.overflow_guard())
        regs = dict(self.densifier.regularisers())
        if geo:  # depth-normal consistency into the geometry map's gradient; the flattening in Adam
            sx, sy = width / cam.width, height / cam.height  # the resolution level's intrinsics
            self.geometry_loss.record(enc, self.raster.geom_image, self.raster.final_T, gt[ci],
                                      self.raster.geom_image_grad(), self.loss_sum, width, height,
                                      (cam.fx * sx, cam.fy * sy, cam.cx * sx, cam.cy * sy), self.geometry.lambda_normal)
            # the multi-view terms after the depth-normal loss: it clears the map's gradient, they add
            if nb is not None and self.geometry.lambda_multiview > 0:
                self.multiview_loss.record(enc, self.raster.geom_image, self.raster.final_T, self._mv_depth, cams,
                                           ci, nb, width, height, self.raster.geom_image_grad(), self.loss_sum,
                                           self.geometry.lambda_multiview)
            if nb is not None and self.geometry.lambda_mvrgb > 0:
                # both training images; the grid of patch centres shifts with the step, so over
                # stride^2 steps of a camera every pixel can be a centre
                k = self.mvrgb_loss.stride
                self.mvrgb_loss.record(enc, self.raster.geom_image, self.raster.final_T, gt[ci], gt[nb], cams, ci, nb,
                                       width, height, self.raster.geom_image_grad(), self.loss_sum,
                                       self.geometry.lambda_mvrgb, offset=(step % k, step // k % k))
            regs["reg_flat"] = self.geometry.lambda_flat / self.geometry_unit
        # the projection backward applies Adam (no gradient buffer); Adam is also the NaN/Inf
        # guard, and both skip an overflowed step
        dens = self.densifier
        self.raster.record_backward(enc, None, m.buf["grad2d_sum"], m.buf["vis_count"],
                                    accumulate_stats=dens.accumulates_stats(step),
                                    optimizer=m.adam_args(flags=self.loss_sum, step=step, seed=cfg.seed, **regs))
        self.raster.skip_masked = None  # renders (evaluation, the viewer) show every tile
        dens.record_after_backward(enc, self.mean_lr(step), cfg.seed * 1_000_003 + step,
                                   *self.raster.overflow_guard())
        self.raster.record_count_copy(enc, pipe.readback, pipe.slot_offset())
        done = step + 1
        loss_tag = None
        if done % cfg.log_interval == 0 or done == self.plan.steps:
            # the mean loss since the last log comes back with this step's count, a step late
            loss_tag = {"step": done, "steps": done - self.state.logged_step, "num_gaussians": m.n}
            self.gpu.copy(enc, pipe.readback, pipe.loss_offset(), self.loss_sum, 0, pipe.LOSS_BYTES)
            self.gpu.clear(enc, self.loss_sum)
            self.state.logged_step = done  # the accumulator holds the steps since (checkpoints record it)
        pipe.submitted(self.gpu.submit(enc), ci, capacity, loss_tag)
        self._order.extend(pipe.retire())  # waits for the step before this one, not for this one
        outgrown = self.raster.outgrown_bytes() + self.loss.scratch.outgrown_bytes()
        if self.appearance is not None:
            outgrown += self.appearance.scratch.outgrown_bytes()
        if outgrown and outgrown >= self.eager_trim_bytes:
            # scratch replaced by growth goes as soon as the GPU is done with it, not at the
            # next densify, where it would sit on top of densify's temporary (10M Gaussians:
            # two checkpoint buffers, 880 MiB, H200); the drain costs one step's pipelining
            t = time.perf_counter()
            self.drain()
            self._trim_scratch()
            self.host_stats["eager_trim_s"] += time.perf_counter() - t
            self.host_stats["eager_trims"] += 1
        refine = dens.refine_due(done)
        if refine:
            t = time.perf_counter()
            self.drain()
            self.host_stats["densify_wait_s"] += time.perf_counter() - t
            t = time.perf_counter()
            self.raster.params = self.raster.filter3d = None  # densify may replace them: hold no old buffer
            before, after = dens.refine(cfg.seed * 1_000_003 + done, done)  # the GPU is idle
            pipe.rescale(after / max(before, 1))
            if loss_tag is not None:
                loss_tag["num_gaussians"] = after  # the logged count is the one after this step
            self._trim_scratch()  # densify waited for the GPU: outgrown scratch can go
            self.host_stats["densify_s"] += time.perf_counter() - t
            self.host_stats["densifications"] += 1
        dens.after_step(done)  # ADC's opacity reset
        if self.filter is not None and (refine or done % max(cfg.densify_interval, 1) == 0):
            self.filter.update()  # after a refine the rows moved (and may be more); otherwise the means did

    def _record_neighbour(self, enc, nb: int, capacity: int | None, sh: int) -> None:
        """Render camera ``nb``'s geometry forward and keep its plane depth in ``_mv_depth``,
        for the multi-view term of this step (module docstring). Recorded into ``enc``, or,
        where the step is counted synchronously anyway, submitted on its own first."""
        r, m = self.raster, self.model
        cam = self.dataset.cameras[nb]
        w, h = self._sizes[nb] if self._sizes else (cam.width, cam.height)
        view = View(nb, w, h)
        sync = capacity is None or capacity > r.max_intersections_per_pass
        e = self.gpu.encoder() if sync else enc
        if capacity is None:
            self.drain()
            r.prepare(m.buf["params"], m.n, self._level_cams, view, sh, filter3d=self.filter3d, geometry=True)
        else:
            r.setup(m.buf["params"], m.n, self._level_cams, view, sh, capacity=capacity, filter3d=self.filter3d,
                    geometry=True)
            r.record_prepare(e)
        r.record_forward(e)
        total, cap = r.overflow_guard()
        self.multiview_loss.record_depth(e, r.geom_image, r.final_T, self._level_cams, nb, w, h, self._mv_depth,
                                         isect_total=total, isect_capacity=cap)
        if sync:
            self.gpu.submit(e)

    def _training_rgba(self, i: int, level: int = 0) -> np.ndarray:
        """[H, W] uint32 packed RGBA8 target of camera ``i`` at resolution ``level``: the
        image, and with masks its weight in alpha (ignore) or its background-filled colours
        (cutout); spirula/engine/splat/mask_targets.py."""
        cam = self.dataset.cameras[i]
        image, mask = cam.image, cam.mask if self.masks != "off" else None
        if level:
            image = level_image(image, level)
            mask = level_image(mask, level) if mask is not None else None
        return training_rgba(image, mask, self.masks, self.cfg.background,
                             premultiplied=self.dataset.masks_source == "alpha")

    def _enter_level(self, level: int) -> None:
        """Train at ``level`` of the resolution schedule from now on: its camera table and
        downscaled images (full size: the dataset's own), the intersection counts forgotten."""
        self.drain()
        self.raster.cams = None  # the old level's table may go
        if level == 0:
            self._level_cams, self._level_gt, self._sizes = self.cams, self.gt, None
        else:
            cams = self.dataset.cameras
            self._level_cams = self.gpu.upload(level_camera_table(cams, level), f"cameras.l{level}")
            self._level_gt = {i: self.gpu.upload(self._training_rgba(i, level), f"gt.{i}.l{level}")
                              for i in self.train_idx}
            self._sizes = {i: level_size(cams[i].width, cams[i].height, level) for i in self.train_idx}
        self._level = level
        self.pipeline.forget_counts()

    @property
    def filter3d(self):
        """The 3D filter buffer [N] float32 of anti-aliased training, or None."""
        return None if self.filter is None else self.filter.buf

    def trained_slots(self) -> list[int]:
        """The appearance slots the training adjusts (those of the training cameras), sorted."""
        return sorted({self.appearance_slot[i] for i in self.train_idx})

    def recentre_appearance(self) -> bool:
        """With appearance on: the transforms' mean moves into the Gaussians' colours
        (:meth:`Appearance.recentre`), so the model alone shows the mean training appearance
        (held-out views, exports). Call between steps, before evaluating or exporting; a
        no-op otherwise. Returns whether anything changed. Waits for the GPU."""
        if self.appearance is None:
            return False
        self.drain()
        mean = self.appearance.recentre(self.trained_slots())
        if mean is None:
            return False
        self.model.transform_colours(mean)
        return True

    def release(self) -> None:
        """Finish the GPU work and let go of what the device's kernels still reference
        (their cached call-site arguments, spirula.engine.device.Kernel.record), so this trainer's
        buffers are freed once the object goes. Call when the trainer will not step again."""
        self.drain()
        self.gpu.wait_idle()
        self.raster.params = self.raster.cams = self.raster.filter3d = None
        self.gpu.forget_bindings()

    def drain(self) -> None:
        """Wait for every step in flight; cameras of overflowed (skipped) steps are queued
        again."""
        self._order.extend(self.pipeline.drain())

    def _trim_scratch(self) -> None:
        """Free the rasterizer's and the loss's outgrown scratch (only once the GPU is done
        with the steps that used it)."""
        self.raster.trim()
        self.loss.scratch.trim()
        if self.appearance is not None:
            self.appearance.scratch.trim()

    def collect_losses(self) -> list[dict]:
        """History entries ``{"step", "loss", "num_gaussians", "elapsed_s"}`` logged since the
        last call, in step order: one per ``log_interval`` steps whose step has retired (no
        wait; :meth:`drain` first for all of them). ``loss`` is the mean over the steps since
        the previous entry. Raises NonFiniteError when the guard flagged a NaN/Inf gradient or
        the loss is not finite."""
        self._convert_losses()
        out, self._unreported = self._unreported, []
        return out

    @staticmethod
    def _mean_loss(block: np.ndarray, steps: int) -> float:
        """Mean of a read-back loss block: word 0 is the float32 sum over ``steps`` steps."""
        return float(block[:1].view(np.float32)[0]) / max(steps, 1)

    def _convert_losses(self) -> None:
        blocks = self.pipeline.loss_blocks
        now = time.perf_counter()
        while blocks:
            tag, block = blocks.pop(0)
            raise_if_flagged(block)  # the guard's flags come back with the loss: no extra read
            loss = self._mean_loss(block, tag["steps"])
            if not math.isfinite(loss):
                raise NonFiniteError(f"training diverged at step {tag['step']}: loss is {loss}")
            entry = {"step": tag["step"], "loss": loss, "num_gaussians": tag["num_gaussians"],
                     "elapsed_s": now - self.t_start}
            if self.geometry is not None:  # the consistency loss's mean over the same steps (0 before its start)
                entry["geometry_loss"] = float(block[LOSS_WORD:LOSS_WORD + 1].view(np.float32)[0]) / max(tag["steps"], 1)
            if self.geometry is not None and self.geometry.lambda_mvrgb > 0:  # the photometric one's
                word = block[MVRGB_LOSS_WORD:MVRGB_LOSS_WORD + 1].view(np.float32)[0]
                entry["mvrgb_loss"] = float(word) / max(tag["steps"], 1)
            if self.geometry is not None and self.geometry.lambda_multiview > 0:  # the multi-view term's mean
                entry["multiview_loss"] = float(block[MV_LOSS_WORD:MV_LOSS_WORD + 1].view(np.float32)[0]) / max(tag["steps"], 1)
            self.state.history.append(entry)
            self._unreported.append(entry)

    def train(self, on_progress: Callable[[Progress], None] | None = None,
              on_eval: Callable[[int], None] | None = None, should_stop: Callable[[], bool] | None = None,
              on_checkpoint: Callable[[int], None] | None = None) -> TrainState:
        """Steps until the plan's ``steps`` through the one schedule (spirula/engine/splat/schedule.py):
        ``on_eval(step)`` every ``cfg.eval_interval`` steps and ``on_checkpoint(step)`` every
        ``cfg.checkpoint_every`` steps (neither at the last one), between two steps."""
        return TrainingRun(self, on_progress, on_eval, on_checkpoint).run(should_stop)

    # --- checkpoints (spirula/engine/checkpoint.py) ------------------------------------------------
    def state_dict(self) -> dict:
        """The whole training state between two steps, as host data (waits for the GPU):
        the model and Adam (:meth:`GaussianModel.state_dict`), the step, the RNG and the
        camera-order queue, the loss accumulator and the loss history; with antialias, the
        3D filter in force (``filter3d`` [N] float32: recomputed only on schedule); with appearance
        on, its transforms and their Adam state (``appearance``). Raises
        NonFiniteError when the guard saw a NaN/Inf gradient since the last loss read."""
        if self.state.in_step:
            raise RuntimeError("state_dict() in the middle of a step")
        self.drain()
        self.gpu.wait_idle()
        self._convert_losses()  # the history saved holds every logged step
        block = self.gpu.read(self.loss_sum, np.uint32, 8)  # the losses, the guard's flags, the geometry loss
        raise_if_flagged(block)
        out = {"step": self.state.step, "logged_step": self.state.logged_step, "model": self.model.state_dict(),
               "rng": self.rng.bit_generator.state, "order": [int(i) for i in self._order],
               "loss_sum": block, "history": list(self.state.history), "pipeline": self.pipeline.state_dict()}
        if self.filter is not None:
            out["filter3d"] = self.filter.read()
        if self.appearance is not None:
            out["appearance"] = self.appearance.state_dict()
        return out

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (:meth:`state_dict`, possibly of another process). An
        appearance state of another mode (or none) leaves the transforms at identity."""
        self.model.load_state_dict(state["model"])
        if self.filter is not None:  # a checkpoint without one (antialias was off): computed afresh
            f = state.get("filter3d")
            if f is not None and len(f) == self.model.n:
                self.filter.load(f)
            else:
                self.filter.update()
        if self.appearance is not None and "appearance" in state:
            self.appearance.load_state_dict(state["appearance"])
        self.rng.bit_generator.state = state["rng"]
        self._order = [int(i) for i in state["order"]]
        self.gpu.write(self.loss_sum, np.asarray(state["loss_sum"], np.uint32))
        self.pipeline.load_state_dict(state.get("pipeline", {}))  # older checkpoints: count afresh
        self.state = TrainState(step=int(state["step"]), history=list(state["history"]),
                                logged_step=int(state["logged_step"]))

    def depth_normal_consistency(self, index: int) -> float:
        """The depth-normal consistency (spirula/engine/splat/geometry_phase.py with lambda 1: the mean over
        the pixels of w_p (1 - n_d . n)) of the current model seen from dataset camera
        ``index`` (held out or not), against its image's edge weights; waits for the GPU.
        Whether or not this run trains geometry: a measure of how well depth and normals agree."""
        self.drain()
        cam, m = self.dataset.cameras[index], self.model
        self.raster.prepare(m.buf["params"], m.n, self.cams, View(index, cam.width, cam.height),
                            self.sh_degree_at(self.state.step), filter3d=self.filter3d, geometry=True)
        out = self.gpu.zeros(32, "geometry.view_loss")
        enc = self.gpu.encoder()
        self.raster.record_forward(enc)
        DepthNormalLoss(self.gpu).record(enc, self.raster.geom_image, self.raster.final_T,
                                         self.gpu.upload(pack_rgba8(cam.image)), self.raster.geom_image_grad(), out,
                                         cam.width, cam.height, (cam.fx, cam.fy, cam.cx, cam.cy), 1.0)
        self.gpu.submit(enc)
        return float(self.gpu.read(out, np.float32, 8)[LOSS_WORD])

    def multiview_consistency(self, index: int) -> float | None:
        """The share of camera ``index``'s opaque pixels (accumulated alpha >= 0.5) whose
        forward-backward reprojection error (spirula/engine/splat/geometry_phase.py MultiViewLoss) against
        its nearest training camera is below 1 px: how well the current model's plane depths
        of the two views agree (1: one surface). The neighbour follows :func:`neighbour_views`'
        rule among the training cameras (``index`` may be held out); None when there is none.
        Full-size renders; waits for the GPU."""
        others = [i for i in self.train_idx if i != index]
        near = neighbour_views(self.dataset.cameras, [index, *others], self.world_unit(), count=1).get(index, [])
        if not near:
            return None
        nb, m, r = near[0], self.model, self.raster
        loss = MultiViewLoss(self.gpu)
        self.drain()
        maps = {}
        for i in (nb, index):
            cam = self.dataset.cameras[i]
            r.prepare(m.buf["params"], m.n, self.cams, View(i, cam.width, cam.height), self.sh_degree_at(self.state.step),
                      filter3d=self.filter3d, geometry=True)
            enc = self.gpu.encoder()
            r.record_forward(enc)
            if i == nb:
                depth = self.gpu.buffer(4 * cam.width * cam.height, "geometry.view_depth")
                loss.record_depth(enc, r.geom_image, r.final_T, self.cams, nb, cam.width, cam.height, depth)
            else:
                loss.record(enc, r.geom_image, r.final_T, depth, self.cams, index, nb, cam.width, cam.height,
                            self.gpu.zeros(16 * cam.width * cam.height, "geometry.view_grad"),
                            self.gpu.zeros(32, "geometry.view_loss"), 1.0)
            self.gpu.submit(enc)
            maps[i] = cam
        cam = maps[index]
        opaque = int(np.count_nonzero(self.gpu.read(r.final_T, np.float32, cam.width * cam.height) <= 0.5))
        return int(self.gpu.read(loss.count, np.uint32, 4)[0]) / max(opaque, 1)

    def render(self, index: int) -> np.ndarray:
        """Render camera ``index`` of the dataset: [H, W, 3] float32 (waits for the GPU)."""
        cam = self.dataset.cameras[index]
        return self.raster.render(self.model.buf["params"], self.model.n, self.cams,
                                  View(index, cam.width, cam.height), self.sh_degree_at(self.state.step),
                                  filter3d=self.filter3d)
