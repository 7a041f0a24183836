"""The one step schedule of a training run, driven by `spirula train` (spirula/engine/jobs/train.py,
through :meth:`Trainer.train`), the benchmarks (spirula/engine/cli/bench/commands.py) and the studio's
engine thread (spirula/engine/studio/training.py, in slices between viewer frames).

What a step is, and what it schedules itself, is :meth:`Trainer.train_step`'s: the refine
(ADC's densify or MCMC's relocate and grow), the opacity reset, the 3D filter update and
the loss log every ``log_interval`` steps, whose value is read a step late (the module
docstring of spirula/engine/splat/trainer.py says why). Between two steps, :class:`TrainingRun`
decides the rest:

- an evaluation every ``cfg.eval_interval`` steps and a checkpoint every
  ``cfg.checkpoint_every`` steps, neither at the last step (the job's end evaluates and
  saves), as the trainer's :class:`StepPlan` says (:func:`step_plan`, the one place that
  turns ``--steps`` into step numbers: the lr decay's end, MCMC's refine stop, the geometry
  phase's start, the appearance's window, the coarse-to-fine levels' end); each first waits for the steps in flight and reports their losses (both wait for
  the GPU anyway), so a checkpoint records every loss logged before it;
- otherwise the losses of the steps that have retired are reported, without a wait;
- the end: ``cfg.steps`` done, or ``should_stop()`` true before a step (``stopped_early``).

The drivers differ only in their hooks: ``on_progress(Progress)``, ``on_eval(step)`` and
``on_checkpoint(step)`` (None: never due), ``wait()`` before each wait for the GPU (the
studio polls there, so the window's thread keeps the GIL), and, for the studio, where a
slice yields: :meth:`TrainingRun.advance`'s ``pause()`` after a step, then
:meth:`TrainingRun.settle`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from .res_schedule import ResolutionSchedule
from .step_rate import StepRate


def at_fraction(fraction: float, steps: int) -> int:
    """The step at ``fraction`` of a run of ``steps`` steps, rounded: where a setting given as a
    fraction of the run lands (geometry_from, mcmc_refine_until; res_until's levels split
    ``until * steps`` evenly, spirula/engine/splat/res_schedule.py)."""
    return int(round(fraction * steps))


MCMC_REFINE_STOP = 25_000   # gsplat's refine_stop_iter: MCMC's relocation ends here unless mcmc_refine_until > 0
APPEARANCE_START = 500      # per-image appearance trains from this step, or a fifth of a shorter run


def geometry_start(steps: int, fraction: float) -> int:
    """First geometry step of a run of ``steps`` steps: ``fraction`` of them (2DGS starts
    its normal loss at 7,000 of 30,000). ValueError outside [0, 1]."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"geometry_from must be a fraction of the steps in [0, 1], not {fraction}")
    return at_fraction(fraction, steps)


def refine_stop_for(fraction: float, steps: int) -> int:
    """The step MCMC's relocation and growth stop at (McmcSettings.stop): ``fraction`` x
    ``steps`` (TrainConfig.mcmc_refine_until, the fast preset's 0.8) when positive, else
    gsplat's fixed 25,000 (its refine_stop_iter, whatever the run's length)."""
    if fraction > 0.0:
        return at_fraction(fraction, steps)
    return MCMC_REFINE_STOP


def appearance_window(steps: int | None) -> tuple[int, int]:
    """(start, end) of the per-image appearance of a run of ``steps`` steps: it trains from
    APPEARANCE_START (or a fifth of a shorter run, which would otherwise end with every
    transform at identity), its lr decaying to its final value at the run's end; (500, 0)
    when the length is unknown (no decay)."""
    if steps is None:
        return APPEARANCE_START, 0
    return min(APPEARANCE_START, max(int(steps) // 5, 1)), int(steps)


@dataclass(frozen=True)
class StepPlan:
    """Every step number a run derives from its length (--steps): the one place that turns
    ``steps`` into the schedule (:func:`step_plan`; the Trainer and :class:`TrainingRun` read
    them here). Settings given in steps (the densification window, the SH and refine
    intervals) stay as given; those given as fractions of the run land here."""

    steps: int                  # the run ends after this many steps
    lr_decay_end: int           # the means' lr reaches its final value here (Trainer.mean_lr)
    mcmc_refine_stop: int       # MCMC: no relocation or growth from this step on
    geometry_start: int         # the geometry phase's first step (with geometry on)
    appearance_start: int       # the per-image appearance trains from this step
    appearance_end: int         # its lr decays to its final value here
    resolution: ResolutionSchedule  # coarse-to-fine: the level of each step, full size from res_until x steps
    eval_every: int             # a held-out evaluation after every this many steps (0: at the end only)
    checkpoint_every: int       # a checkpoint after every this many steps (0: none on the way)

    def evaluation_due(self, done: int) -> bool:
        """An evaluation after step ``done`` (counting from 1); the last step's is the job's end's."""
        return bool(self.eval_every) and done % self.eval_every == 0 and done < self.steps

    def checkpoint_due(self, done: int) -> bool:
        """A checkpoint after step ``done`` (counting from 1); the last step's is the job's end's."""
        return bool(self.checkpoint_every) and done % self.checkpoint_every == 0 and done < self.steps


def step_plan(cfg) -> StepPlan:
    """The :class:`StepPlan` of the training settings ``cfg`` (spirula/engine/config.py TrainConfig, or
    anything with its fields). ValueError for a geometry_from outside [0, 1], a res_until outside
    (0, 1] or res_levels below 1."""
    steps = int(cfg.steps)
    start, end = appearance_window(steps)
    return StepPlan(steps=steps, lr_decay_end=steps,
                    mcmc_refine_stop=refine_stop_for(cfg.mcmc_refine_until, steps),
                    geometry_start=geometry_start(steps, cfg.geometry_from) if cfg.geometry else 0,
                    appearance_start=start, appearance_end=end,
                    resolution=ResolutionSchedule(cfg.res_levels, cfg.res_until, steps),
                    eval_every=int(cfg.eval_interval), checkpoint_every=int(cfg.checkpoint_every))


@dataclass
class Progress:
    """What the run reports every ``log_interval`` steps."""

    step: int
    steps: int
    loss: float
    num_gaussians: int
    steps_per_sec: float


class TrainingRun:
    """One pass of a :class:`spirula.engine.splat.trainer.Trainer` through its schedule (see the
    module docstring). Starts the trainer's clock (history's ``elapsed_s``) and the step
    rate of the progress reports now."""

    def __init__(self, trainer, on_progress: Callable[[Progress], None] | None = None,
                 on_eval: Callable[[int], None] | None = None, on_checkpoint: Callable[[int], None] | None = None,
                 wait: Callable[[], None] | None = None):
        self.trainer = trainer
        self.on_progress, self.on_eval, self.on_checkpoint, self.wait = on_progress, on_eval, on_checkpoint, wait
        self.rate = StepRate(trainer.state.step)  # reset it after a pause (the studio)
        trainer.t_start = time.perf_counter()

    @property
    def finished(self) -> bool:
        """Every step of the run is done."""
        return self.trainer.state.step >= self.trainer.plan.steps

    def due(self, step: int) -> tuple[bool, bool]:
        """(evaluation due, checkpoint due) after step ``step`` (counting from 1): the trainer's
        :class:`StepPlan`'s, when there is a hook for it."""
        plan = self.trainer.plan
        return (self.on_eval is not None and plan.evaluation_due(step),
                self.on_checkpoint is not None and plan.checkpoint_due(step))

    def step(self) -> None:
        """One training step, then what is due after it."""
        tr = self.trainer
        state = tr.state
        state.in_step = True
        tr.train_step(state.step)
        state.step += 1
        state.in_step = False
        eval_due, checkpoint_due = self.due(state.step)
        if eval_due or checkpoint_due:
            self._drain()  # both wait for the GPU anyway: report this step's loss first
        self.report()
        if eval_due:
            self.on_eval(state.step)
        if checkpoint_due:
            self.on_checkpoint(state.step)

    def advance(self, should_stop: Callable[[], bool] | None = None,
                pause: Callable[[], bool] | None = None) -> None:
        """Steps until the last one, until ``should_stop()`` (asked before each step) ends the
        run early, or until ``pause()`` (asked after each step) says to yield; the steps
        may still be in flight then (:meth:`settle`)."""
        state = self.trainer.state
        while state.step < self.trainer.plan.steps:
            if should_stop is not None and should_stop():
                state.stopped_early = True
                break
            self.step()
            if pause is not None and pause():
                break

    def settle(self) -> None:
        """Wait for the steps in flight (cameras of skipped steps are queued again) and
        report their losses."""
        self._drain()
        self.report()

    def run(self, should_stop: Callable[[], bool] | None = None):
        """The whole run at once (`spirula train`, the benchmarks): :meth:`advance` until the
        end or a stop (Ctrl-C too: ``stopped_early``), then wait for the GPU and report.
        Returns the trainer's TrainState."""
        tr = self.trainer
        try:
            self.advance(should_stop=should_stop)
        except KeyboardInterrupt:
            tr.state.stopped_early = True
        self._drain()
        tr.gpu.wait_idle()
        self.report()
        return tr.state

    def report(self) -> None:
        """``on_progress`` for each loss read back since the last report (no wait;
        Trainer.collect_losses raises NonFiniteError for a NaN/Inf)."""
        tr = self.trainer
        for h in tr.collect_losses():
            steps_per_sec = self.rate.at(h["step"])
            if self.on_progress is not None:
                self.on_progress(Progress(h["step"], tr.plan.steps, h["loss"], h["num_gaussians"], steps_per_sec))

    def _drain(self) -> None:
        if self.wait is not None:
            self.wait()
        self.trainer.drain()
