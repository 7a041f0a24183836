"""spirula/engine/splat/schedule.py: the one step schedule, on a fake trainer (no GPU): what is due
after which step, the wait before an evaluation or a checkpoint, the stop, and that a run
driven in slices (the studio) makes the same calls in the same order as one run at once
(`spirula train`)."""

from types import SimpleNamespace

from spirula.engine.config import TrainConfig
from spirula.engine.splat.schedule import TrainingRun, step_plan
from spirula.engine.splat.trainer import TrainState


class FakeTrainer:
    def __init__(self, steps=10, eval_interval=4, checkpoint_every=3, log_interval=2):
        self.cfg = SimpleNamespace(steps=steps, eval_interval=eval_interval, checkpoint_every=checkpoint_every)
        self.plan = step_plan(TrainConfig(steps=steps, eval_interval=eval_interval, checkpoint_every=checkpoint_every))
        self.log_interval = log_interval
        self.state = TrainState()
        self.calls: list = []
        self.gpu = SimpleNamespace(wait_idle=lambda: self.calls.append("idle"))
        self._logged: list = []

    def train_step(self, step):
        assert self.state.in_step
        self.calls.append(("step", step))
        if (step + 1) % self.log_interval == 0:
            self._logged.append({"step": step + 1, "loss": 0.5, "num_gaussians": 7})

    def drain(self):
        self.calls.append("drain")

    def collect_losses(self):
        out, self._logged = self._logged, []
        return out


def _run(trainer, **hooks):
    calls = trainer.calls
    return TrainingRun(trainer, on_progress=lambda p: calls.append(("progress", p.step)),
                       on_eval=lambda s: calls.append(("eval", s)),
                       on_checkpoint=lambda s: calls.append(("checkpoint", s)), **hooks)


def test_evaluations_and_checkpoints_come_on_schedule_after_a_wait_never_at_the_last_step():
    t = FakeTrainer()
    state = _run(t).run()
    assert state.step == 10 and not state.stopped_early
    assert [c for c in t.calls if c[0] == "eval"] == [("eval", 4), ("eval", 8)]
    assert [c for c in t.calls if c[0] == "checkpoint"] == [("checkpoint", 3), ("checkpoint", 6), ("checkpoint", 9)]
    for due in (("eval", 4), ("checkpoint", 3)):  # the steps in flight are waited for and reported first
        i = t.calls.index(due)
        assert "drain" in t.calls[i - 2:i]
    assert t.calls.index(("progress", 4)) < t.calls.index(("eval", 4))
    assert t.calls[-2:] == ["drain", "idle"]


def test_no_hook_means_never_due_and_no_wait():
    t = FakeTrainer()
    TrainingRun(t).run()
    assert t.calls.count("drain") == 1  # only the end's


def test_should_stop_is_asked_before_each_step():
    t = FakeTrainer()
    asked = []
    state = _run(t).run(should_stop=lambda: asked.append(1) or len(asked) > 5)
    assert state.step == 5 and state.stopped_early and not state.in_step


def test_slices_make_the_same_calls_as_one_run():
    whole = FakeTrainer()
    _run(whole).run()
    sliced = FakeTrainer()
    waits = []
    run = _run(sliced, wait=lambda: waits.append(sliced.state.step))
    n = 0
    while not run.finished:
        budget = [3]
        run.advance(pause=lambda: budget.__setitem__(0, budget[0] - 1) or budget[0] == 0)
        run.settle()
        n += 1
    assert n == 4
    keep = lambda calls: [c for c in calls if c not in ("drain", "idle")]
    assert keep(sliced.calls) == keep(whole.calls)
    assert waits  # the studio's polling wait comes before every drain
