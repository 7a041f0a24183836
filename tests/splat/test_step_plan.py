"""Issue 48 item 2: one place turns --steps into the schedule (spirula/engine/splat/schedule.py
step_plan). Every step number a run derives from its length scales with --steps from
there (the lr decay's end, MCMC's refine stop, the geometry phase's start, the per-image
appearance's window, the coarse-to-fine levels, the evaluation and checkpoint cadence and
the end), and the Trainer and TrainingRun take each of them from the plan, not from steps."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from spirula.engine.config import TrainConfig
from spirula.engine.splat.schedule import StepPlan, TrainingRun, step_plan

ENGINE_SPLAT = Path(__file__).resolve().parents[2] / "spirula" / "engine" / "splat"


def _cfg(steps: int, **kw) -> TrainConfig:
    base = dict(steps=steps, geometry=True, geometry_from=0.6, mcmc_refine_until=0.8, res_levels=3, res_until=0.5,
                eval_interval=250, checkpoint_every=400)
    return TrainConfig(**{**base, **kw})


@pytest.mark.parametrize("steps", [1_000, 3_000, 40_000])
def test_every_derived_step_number_scales_with_steps(steps):
    p = step_plan(_cfg(steps))
    assert p.steps == p.lr_decay_end == steps
    assert p.mcmc_refine_stop == round(0.8 * steps)
    assert p.geometry_start == round(0.6 * steps)
    assert (p.appearance_start, p.appearance_end) == (min(500, steps // 5), steps)
    # coarse-to-fine: level 2 for the first quarter, level 1 to half the run, full size from there
    r = p.resolution
    assert [r.level_at(s) for s in (0, steps // 4 - 1, steps // 4, steps // 2 - 1, steps // 2, steps - 1)] == \
        [2, 2, 1, 1, 0, 0]
    assert [k for k in range(1, steps + 1) if p.checkpoint_due(k)] == list(range(400, steps, 400))
    assert [k for k in range(1, steps + 1) if p.evaluation_due(k)] == list(range(250, steps, 250))


def test_settings_given_in_steps_or_off_stay_as_given():
    p = step_plan(_cfg(10_000, mcmc_refine_until=0.0, geometry=False, eval_interval=0, checkpoint_every=0))
    assert p.mcmc_refine_stop == 25_000          # gsplat's fixed stop when no fraction is set
    assert p.geometry_start == 0 and not any(p.evaluation_due(k) or p.checkpoint_due(k) for k in range(1, 10_001))
    with pytest.raises(ValueError, match="geometry_from"):
        step_plan(_cfg(100, geometry_from=1.5))


def test_no_splat_module_but_the_schedule_reads_the_runs_length():
    """The one place: no module of spirula/engine/splat but schedule.py turns cfg.steps into numbers."""
    readers = sorted(f.name for f in ENGINE_SPLAT.glob("*.py")
                     if re.search(r"\bcfg\.steps\b", re.sub(r'"""[\s\S]*?"""|#.*', "", f.read_text(encoding="utf-8"))))
    assert readers == ["schedule.py"], readers


def test_the_trainer_and_the_run_take_every_number_from_the_plan(gpu, monkeypatch):
    """A plan with numbers of its own (none of them what the settings would give) is what
    the Trainer's density control, geometry phase, appearance, lr decay, resolution
    schedule and TrainingRun's cadence and end use."""
    import spirula.engine.splat.trainer as trainer_module
    from spirula.engine.splat.trainer import Trainer
    from tests.splat.scenes import tiny_dataset

    cfg = _cfg(1_000, strategy="mcmc", appearance="exposure", lambda_multiview=0.0, lambda_mvrgb=0.0)
    odd = replace(step_plan(cfg), steps=7, lr_decay_end=50, mcmc_refine_stop=123, geometry_start=77,
                  appearance_start=5, appearance_end=999, eval_every=3, checkpoint_every=2)
    odd = replace(odd, resolution=replace(odd.resolution, steps=40))
    assert isinstance(odd, StepPlan)
    monkeypatch.setattr(trainer_module, "step_plan", lambda c: odd)
    ds = tiny_dataset(seed=48, n_cams=4, w=32, h=24, n_points=200)
    t = Trainer(gpu, ds, [1, 2, 3], cfg)
    try:
        assert t.plan is odd and t.densifier.s.stop == 123 and t.geometry.start == 77
        assert (t.appearance.settings.start, t.appearance.settings.end) == (5, 999)
        assert math.isclose(t.mean_lr(50), t.lr_means_final * t.extent, rel_tol=1e-9)
        assert t.mean_lr(50) == t.mean_lr(500)   # decayed to its end at the plan's step
        assert t.res is odd.resolution and t.res.level_at(19) == 1 and t.res.level_at(20) == 0
        run = TrainingRun(t, on_eval=lambda s: None, on_checkpoint=lambda s: None)
        assert [run.due(k) for k in (2, 3, 6, 7)] == [(False, True), (True, False), (True, True), (False, False)]
        assert not run.finished
        t.state.step = 7
        assert run.finished
    finally:
        t.release()
