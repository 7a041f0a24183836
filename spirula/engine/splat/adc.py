"""Adaptive density control (ADC), 3DGS's densification (Kerbl et al. 2023, sec. 5.2), as a
strategy beside MCMC's (spirula/engine/splat/mcmc.py): the trainer calls the same hooks on either,
knowing nothing of clone, split or relocate.

Every step before ``densify_until`` the backward accumulates each Gaussian's screen-space
gradient norm and visibility count (the densification statistic). Every
``densify_interval`` steps from ``densify_from`` to ``densify_until``: Gaussians whose mean
gradient exceeds ``grad_threshold`` grow (clone below ``clone_scale`` x the scene extent,
split above it), transparent ones (opacity below ``prune_opacity``) go, and, after the
first opacity reset, so do ones larger than ``prune_scale`` x the extent; at most ``max_gaussians`` remain (the largest gradients grow
first: GaussianModel.densify). Every ``opacity_reset_interval`` steps before
``densify_until`` the opacities are clamped to 0.01.

The strategy hooks, shared with :class:`spirula.engine.splat.mcmc.McmcDensifier`:
``accumulates_stats(step)`` and ``regularisers()`` (what the step's backward and Adam
record), ``record_after_backward(...)`` (recorded into the step's command buffer),
``refine_due(done)`` and ``refine(seed, done)`` (after the step, the GPU idle: returns the
count before and after), ``after_step(done)`` (after the refine).
"""

from __future__ import annotations

from .model import GaussianModel

NO_SCALE_PRUNE = 3.0e38  # prune_scale before the first opacity reset: nothing is too large
RESET_OPACITY = 0.01     # the opacity reset's ceiling


class AdcDensifier:
    """ADC for one :class:`GaussianModel` in a scene of size ``extent``. Its settings are
    the ADC fields of ``cfg`` (spirula/engine/config.py TrainConfig: densify_from, densify_until,
    densify_interval, grad_threshold, clone_scale, prune_opacity, prune_scale,
    opacity_reset_interval, max_gaussians), read at every call: a change between two
    steps counts (benchmarks/step_overhead.py turns densification off that way)."""

    def __init__(self, model: GaussianModel, cfg, extent: float):
        self.model, self.cfg, self.extent = model, cfg, float(extent)

    def accumulates_stats(self, step: int) -> bool:
        """Whether step ``step``'s backward accumulates the densification statistic."""
        return step < self.cfg.densify_until

    def regularisers(self) -> dict:
        """Keyword arguments of GaussianModel.adam_args: ADC adds none."""
        return {}

    def record_after_backward(self, enc, lr_means: float, seed: int, isect_total, isect_capacity: int) -> None:
        """Nothing to record after the backward (MCMC records its noise here)."""

    def refine_due(self, done: int) -> bool:
        """Whether a densify follows step ``done`` (counted from 1)."""
        c = self.cfg
        return c.densify_from < done < c.densify_until and done % c.densify_interval == 0

    def refine(self, seed: int, done: int) -> tuple[int, int]:
        """Clone / split / prune after step ``done``; returns (before, after). Waits for the GPU."""
        c = self.cfg
        prune_scale = c.prune_scale * self.extent if done > c.opacity_reset_interval else NO_SCALE_PRUNE
        return self.model.densify(c.grad_threshold, c.clone_scale * self.extent, c.prune_opacity, prune_scale,
                                  c.max_gaussians, seed=seed)

    def after_step(self, done: int) -> None:
        """The opacity reset on its schedule (after the step's refine)."""
        c = self.cfg
        if done < c.densify_until and c.opacity_reset_interval and done % c.opacity_reset_interval == 0:
            self.model.reset_opacity(RESET_OPACITY)
