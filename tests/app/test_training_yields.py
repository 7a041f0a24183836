"""The studio's training yields to a moving camera (engine/studio/training.py yields_to_view):
only while the camera moved within MOVING_HOLD_S, only when one step and one frame would not
fit in 1/60 s, and never for longer than TRAIN_EVERY_S; SPIRULA_TRAIN_YIELD=0 turns it off. No GPU: the engine is a stand-in."""

import time
from types import SimpleNamespace

from engine.studio.training import TRAIN_EVERY_S, Training
from engine.studio.viewport import MOVING_HOLD_S, Viewport


def _training(monkeypatch, frame_ms: float, setting: str | None = None) -> Training:
    if setting is None:
        monkeypatch.delenv("SPIRULA_TRAIN_YIELD", raising=False)
    else:
        monkeypatch.setenv("SPIRULA_TRAIN_YIELD", setting)
    engine = SimpleNamespace()
    engine.viewport = Viewport(engine)
    engine.viewport.viewer = SimpleNamespace(last_frame_ms=frame_ms)
    return Training(engine)


def test_training_yields_only_to_a_moving_camera_when_a_step_and_a_frame_overrun_a_60hz_frame(monkeypatch):
    t = _training(monkeypatch, frame_ms=3.0)
    vp = t.e.viewport
    assert not t.yields_to_view()  # no step timed yet
    t.step_ms = 20.0
    assert not t.yields_to_view()  # the camera never moved
    vp.moved_at = time.perf_counter()
    assert vp.camera_moving() and not t.yields_to_view()  # no slice for TRAIN_EVERY_S: one is due
    t.slice_ended = time.perf_counter()
    assert t.yields_to_view()  # 20 + 3 ms > 16.7
    t.step_ms = 12.0
    assert not t.yields_to_view()  # 12 + 3 ms fit: training goes on beside the frames
    vp.viewer.last_frame_ms = 5.0
    assert t.yields_to_view()  # 12 + 5 ms do not
    t.slice_ended = time.perf_counter() - 1.1 * TRAIN_EVERY_S
    assert not t.yields_to_view()  # a long drag still gives training a slice every TRAIN_EVERY_S
    t.slice_ended = time.perf_counter()
    vp.moved_at = time.perf_counter() - 1.1 * MOVING_HOLD_S
    assert not vp.camera_moving() and not t.yields_to_view()  # the camera stopped: training resumes


def test_training_yield_can_be_turned_off(monkeypatch):
    t = _training(monkeypatch, frame_ms=3.0, setting="0")
    t.step_ms = 50.0
    t.e.viewport.moved_at = time.perf_counter()
    assert not t.yields_to_view()
