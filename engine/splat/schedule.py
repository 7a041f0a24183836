"""The one step schedule of a training run, driven by `spirula train` (engine/jobs/train.py,
through :meth:`Trainer.train`), the benchmarks (engine/cli/bench/commands.py) and the studio's
engine thread (engine/studio/training.py, in slices between viewer frames).

What a step is, and what it schedules itself, is :meth:`Trainer.train_step`'s: the refine
(ADC's densify or MCMC's relocate and grow), the opacity reset, the 3D filter update and
the loss log every ``log_interval`` steps, whose value is read a step late (the module
docstring of engine/splat/trainer.py says why). Between two steps, :class:`TrainingRun`
decides the rest:

- an evaluation every ``cfg.eval_interval`` steps and a checkpoint every
  ``cfg.checkpoint_every`` steps, neither at the last step (the job's end evaluates and
  saves); each first waits for the steps in flight and reports their losses (both wait for
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

from .step_rate import StepRate


def at_fraction(fraction: float, steps: int) -> int:
    """The step at ``fraction`` of a run of ``steps`` steps, rounded: where a setting given as a
    fraction of the run lands (geometry_from, mcmc_refine_until; res_until's levels split
    ``until * steps`` evenly, engine/splat/res_schedule.py)."""
    return int(round(fraction * steps))


@dataclass
class Progress:
    """What the run reports every ``log_interval`` steps."""

    step: int
    steps: int
    loss: float
    num_gaussians: int
    steps_per_sec: float


class TrainingRun:
    """One pass of a :class:`engine.splat.trainer.Trainer` through its schedule (see the
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
        return self.trainer.state.step >= self.trainer.cfg.steps

    def due(self, step: int) -> tuple[bool, bool]:
        """(evaluation due, checkpoint due) after step ``step`` (counting from 1)."""
        cfg = self.trainer.cfg
        inside = step < cfg.steps
        eval_due = self.on_eval is not None and bool(cfg.eval_interval) and step % cfg.eval_interval == 0 and inside
        checkpoint_due = (self.on_checkpoint is not None and bool(cfg.checkpoint_every)
                          and step % cfg.checkpoint_every == 0 and inside)
        return eval_due, checkpoint_due

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
        while state.step < self.trainer.cfg.steps:
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
                self.on_progress(Progress(h["step"], tr.cfg.steps, h["loss"], h["num_gaussians"], steps_per_sec))

    def _drain(self) -> None:
        if self.wait is not None:
            self.wait()
        self.trainer.drain()
