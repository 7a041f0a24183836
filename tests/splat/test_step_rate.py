"""spirula/engine/splat/step_rate.py: steps per second between progress reports, on a fake clock."""

from spirula.engine.splat import step_rate
from spirula.engine.splat.step_rate import StepRate


def test_rate_between_reports_and_after_a_reset(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(step_rate.time, "perf_counter", lambda: now[0])
    rate = StepRate(40)
    now[0] = 102.0
    assert rate.at(140) == 50.0  # 100 steps in 2 s
    now[0] = 102.5
    assert rate.at(190) == 100.0  # from the last report, not the start
    now[0] = 160.0  # paused for a minute, then resumed at step 190
    rate.reset(190)
    now[0] = 161.0
    assert rate.at(220) == 30.0
