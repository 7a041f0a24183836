"""MCMC densification (Kheradmand et al. 2024, "3D Gaussian Splatting as Markov Chain
Monte Carlo"), on the GPU (shaders/densify/mcmc.slang).

The Gaussians are treated as samples: nothing is cloned, split or pruned. Every
``interval`` steps from ``start`` to ``stop``:

1. *Relocation*: every dead Gaussian (opacity <= ``min_opacity``) is moved onto a live
   one drawn with probability proportional to opacity (with replacement). A Gaussian
   drawn k times and its k copies all get opacity 1 - (1 - o)^(1/(k+1)) and scales times
   the paper's eq. 9 factor, so together they render like the original; their Adam
   moments restart from zero.
2. *Growth*: min(budget, (1 + growth) N) - N new Gaussians are drawn the same way and
   appended. ``budget`` (TrainConfig.mcmc_budget, at most max_gaussians) is reached
   exactly and never passed.

Every step: each mean moves by Sigma z * sigmoid(-100 (1 - o - 0.995)) * lr_means *
``noise_lr`` (eq. 10; z ~ N(0, I), Sigma the Gaussian's covariance), recorded into the
step's command buffer; and the Adam step adds the gradients of ``opacity_reg`` * mean
opacity and ``scale_reg`` * mean scale over all Gaussians (the L1 regularisers of the
paper's sec. 4.3; project_backward_adam). Defaults are gsplat 1.5.3's MCMCStrategy and
its ``simple_trainer.py`` MCMC settings.

World units: the noise (Sigma: length^2, times the means' lr: length) and the scale
regulariser (an L1 norm of lengths) are not invariant to the dataset's units, and gsplat's
defaults hold in its normalised world, where the cameras' median distance to their look
point is 1. ``unit`` is that distance in our world (spirula/engine/splat/init.py:look_point), so
the noise's scaler is divided by unit^2 and scale_reg by unit: a dataset scaled by k trains
the same (the means' lr already scales with the scene extent). Before this, our worlds
(0.2-0.26 gsplat units per world unit on fox, mouse, office_chair) had 16-25x gsplat's
noise and a 4-5x stronger scale regulariser. Measured in normalised units (H200, 7k steps,
3 seeds each, BENCHMARKS.md): gsplat's noise_lr 5e5 gave fox (random init) 26.84 dB against
30.24 with 1e7 (about what the old units had), office_chair 31.30 vs 31.34; a scale_reg of
0.045 (the old units' strength) lost 0.5 dB on fox and 0.13 on office_chair. Hence noise_lr
1e7 from random points; with SfM points gsplat's 5e5 (mouse 24.04 dB with 5e5, 23.12 with 1e7;
office_chair a tie): :func:`noise_lr_for`. scale_reg is gsplat's 0.01.

As a strategy it has the hooks of ADC's (spirula/engine/splat/adc.py); the trainer calls those.

The sampling weights are opacities in fixed point (``quantum`` units, at least 1 for a
live Gaussian) so their prefix sum is an exact uint32 scan: ``quantum`` =
min(65536, (2^32 - 1) // N) is 4,095 units per opacity at N = 1M and 429 at 10M.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..device import Gpu
from .model import GaussianModel
from .schedule import MCMC_REFINE_STOP, refine_stop_for  # noqa: F401  (refine_stop_for: its old home)
from .sort import Scan

MAX_ROWS = 65_535 * 256  # 65,535 workgroups of 256 threads: the 1D dispatch limit Intel and lavapipe have


@dataclass
class McmcSettings:
    start: int = 500           # first refine after this many steps
    stop: int = MCMC_REFINE_STOP  # no refine from this step on (the noise continues; StepPlan.mcmc_refine_stop)
    interval: int = 100
    min_opacity: float = 0.005
    growth: float = 0.05       # new Gaussians per refine, fraction of N
    noise_lr: float = 5e5      # gsplat's; from random points 20x that (noise_lr_for)
    opacity_reg: float = 0.01
    scale_reg: float = 0.01


def lr_means_final_for(configured: float, has_points: bool) -> float:
    """Where an MCMC run's means' learning rate decays to (x the scene extent, from
    TrainConfig.lr_means 1.6e-4): ``configured`` when positive, else 1.6e-5 on SfM points
    and 5e-5 from random points. 3DGS's 1.6e-6 (a 100x decay, ADC's) stops the noise and the
    relocated splats' travel too early: H200, 200k budget, held-out PSNR (BENCHMARKS.md,
    2026-12-02): fox (random points) 7k 27.82 / 29.46 / 29.96 dB (3 seeds each) and 30k
    31.57 / 32.00 / 32.20 for 1.6e-6 / 1.6e-5 / 5e-5; office_chair 7k 31.68 / 32.07 / 31.86,
    mouse 7k 23.64 / 23.78 / 23.14 (1-3 seeds)."""
    if configured > 0.0:
        return float(configured)
    return 1.6e-5 if has_points else 5e-5


def noise_lr_for(configured: float, has_points: bool) -> float:
    """The noise_lr a run uses: ``configured`` when positive, else gsplat's 5e5 when the
    Gaussians start on SfM points and 1e7 when they start from random points, which need
    the noise to spread (measured, module docstring)."""
    if configured > 0.0:
        return float(configured)
    return 5e5 if has_points else 1e7


class McmcDensifier:
    """The MCMC refine step and per-step noise for one :class:`GaussianModel`."""

    def __init__(self, gpu: Gpu, model: GaussianModel, settings: McmcSettings, budget: int, unit: float = 1.0):
        """``unit``: the world length that counts as 1 for the noise and the scale regulariser
        (the cameras' median distance to their look point; see the module docstring)."""
        if budget < 1:
            raise ValueError(f"MCMC needs a Gaussian budget of at least 1, not {budget}")
        if budget > MAX_ROWS:  # its kernels dispatch one 1D grid of N threads
            raise ValueError(f"MCMC's Gaussian budget is at most {MAX_ROWS:,} (1D dispatches), not {budget:,}")
        if not (unit > 0.0 and np.isfinite(unit)):
            raise ValueError(f"MCMC's world unit must be a positive length, not {unit}")
        self.gpu, self.model, self.s, self.budget, self.unit = gpu, model, settings, int(budget), float(unit)
        consts = dict(MAX_SH_DEGREE=model.max_sh_degree, MOMENTS_BF16=int(model.moments_bf16))
        k = lambda entry: gpu.kernel("densify/mcmc", entry, **consts)
        self.k_weights, self.k_dead = k("mcmc_weights"), k("mcmc_dead_list")
        self.k_sample, self.k_write, self.k_update = k("mcmc_sample"), k("mcmc_write_targets"), k("mcmc_update_sources")
        self.k_noise = k("mcmc_noise")
        self.scan = Scan(gpu)
        self._totals = (gpu.buffer(16, "mcmc.weight_total"), gpu.buffer(16, "mcmc.dead_total"))
        self._rows = 0
        self.buf: dict = {}
        self.last = {"dead": 0, "relocated": 0, "added": 0}

    # --- the strategy hooks (the same as spirula/engine/splat/adc.py AdcDensifier's) --------------
    def accumulates_stats(self, step: int) -> bool:
        """MCMC needs no screen-space gradient statistic."""
        return False

    def record_after_backward(self, enc, lr_means: float, seed: int, isect_total, isect_capacity: int) -> None:
        """The step's position noise (:meth:`record_noise`)."""
        self.record_noise(enc, lr_means, seed, isect_total, isect_capacity)

    def after_step(self, done: int) -> None:
        """Nothing after the refine (no opacity reset)."""

    def refine_due(self, done: int) -> bool:
        """Whether a refine follows step ``done`` (counted from 1)."""
        s = self.s
        return s.start < done < s.stop and done % s.interval == 0

    def regularisers(self) -> dict:
        """Keyword arguments of GaussianModel.adam_args for the regularisers."""
        return {"reg_opacity": self.s.opacity_reg, "reg_scale": self.s.scale_reg / self.unit}

    def record_noise(self, enc, lr_means: float, seed: int, isect_total, isect_capacity: int) -> None:
        """Record the step's position noise (after its Adam update) into ``enc``."""
        m = self.model
        self.k_noise.record(enc, [max(m.n, 1), 1, 1], params=m.buf["params"], isect_total=isect_total,
                            isect_capacity=isect_capacity, n=m.n, scaler=float(lr_means * self.s.noise_lr / self.unit ** 2),
                            seed=int(seed) & 0xFFFFFFFF)

    def refine(self, seed: int, done: int | None = None) -> tuple[int, int]:
        """Relocate the dead, then grow towards the budget. Returns (before, after); waits
        for the GPU (one small read for the dead count). ``done`` (the step, as ADC's
        refine takes it) changes nothing here."""
        m = self.model
        before = m.n
        self._scratch(m.capacity)
        dead, relocated = self._relocate(seed)
        target = min(self.budget, int((1.0 + self.s.growth) * m.n))
        added = 0
        if target > m.n:
            m.reserve(target, self.budget)
            self._scratch(m.capacity)
            added = self._grow(target - m.n, seed ^ 0x5bd1e995)
        self.last = {"dead": dead, "relocated": relocated, "added": added}
        return before, m.n

    # --- internals ------------------------------------------------------------------------
    def _scratch(self, rows: int) -> None:
        if rows <= self._rows:
            return
        self.buf = {}
        for name in ("weights", "flags", "targets", "sources", "picks"):
            self.buf[name] = self.gpu.buffer(4 * rows, f"mcmc.{name}")
        enc = self.gpu.encoder()
        self.gpu.clear(enc, self.buf["picks"])
        self.gpu.submit(enc)
        self._rows = rows

    def _record_weights(self, enc) -> None:
        m, b = self.model, self.buf
        quantum = float(min(65536, (2**32 - 1) // max(m.n, 1)))
        self.k_weights.record(enc, [m.n, 1, 1], params=m.buf["params"], weights=b["weights"], dead=b["flags"],
                              n=m.n, min_opacity=self.s.min_opacity, quantum=quantum)
        self.scan.record(enc, b["weights"], b["weights"], m.n, total=self._totals[0])

    def _relocate(self, seed: int) -> tuple[int, int]:
        """(dead, relocated): every dead Gaussian moved onto a live one drawn by opacity."""
        m, b = self.model, self.buf
        enc = self.gpu.encoder()
        self._record_weights(enc)
        self.scan.record(enc, b["flags"], b["sources"], m.n, total=self._totals[1])
        self.k_dead.record(enc, [m.n, 1, 1], dead=b["flags"], dead_offsets=b["sources"], targets=b["targets"], n=m.n)
        self.gpu.submit(enc)
        live_weight, dead = (int(self.gpu.read(t, np.uint32, 1)[0]) for t in self._totals)
        if not (dead and live_weight):
            return dead, 0  # nothing to move, or nothing alive to move it onto
        self._move(dead, seed, listed=True, base=0)
        return dead, dead

    def _grow(self, count: int, seed: int) -> int:
        m = self.model
        enc = self.gpu.encoder()
        self._record_weights(enc)
        self.gpu.submit(enc)
        if not int(self.gpu.read(self._totals[0], np.uint32, 1)[0]):
            return 0  # nothing alive to draw from
        self._move(count, seed, listed=False, base=m.n)
        m.n += count
        return count

    def _move(self, count: int, seed: int, listed: bool, base: int) -> None:
        """Draw ``count`` sources, write them to the targets (listed, or rows base..), split the sources."""
        m, b = self.model, self.buf
        n = m.n
        moments = dict(exp_avg=m.buf["exp_avg"], exp_avg_sq=m.buf["exp_avg_sq"])
        enc = self.gpu.encoder()
        self.k_sample.record(enc, [count, 1, 1], offsets=b["weights"], totals=self._totals[0], sources=b["sources"],
                             picks=b["picks"], n=n, count=count, seed=int(seed) & 0xFFFFFFFF)
        self.k_write.record(enc, [count, 1, 1], params=m.buf["params"], **moments, targets=b["targets"],
                            sources=b["sources"], picks=b["picks"], count=count, target_base=base,
                            targets_listed=int(listed), min_opacity=self.s.min_opacity)
        self.k_update.record(enc, [n, 1, 1], params=m.buf["params"], **moments, picks=b["picks"], n=n,
                            min_opacity=self.s.min_opacity)
        self.gpu.submit(enc)
        self.gpu.wait_idle()
