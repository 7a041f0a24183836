"""The studio's training yields to a moving camera (spirula/engine/studio/training.py yields_to_view):
only while the camera moved within MOVING_HOLD_S, only when one step and one frame would not
fit in 1/60 s, and never for longer than TRAIN_EVERY_S; SPIRULA_TRAIN_YIELD=0 turns it off. No GPU: the engine is a stand-in, and the clock
(time.perf_counter, read by both modules) is a stand-in too: a loaded machine pausing the
test between two lines cannot move a hold past its end."""

import time
from types import SimpleNamespace

import pytest

from spirula.engine.studio.training import TRAIN_EVERY_S, Training
from spirula.engine.studio.viewport import MOVING_HOLD_S, Viewport


@pytest.fixture(autouse=True)
def _frozen_clock(monkeypatch):
    """time.perf_counter() stands still at 1000 s (spirula/engine/studio/training.py and viewport.py
    read it through the time module)."""
    monkeypatch.setattr(time, "perf_counter", lambda: 1000.0)


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
    assert t.steps_beside_frame() is None
    assert not t.yields_to_view()  # no step timed yet
    t.step_ms = 20.0
    assert not t.yields_to_view()  # the camera never moved
    vp.moved_at = time.perf_counter()
    assert vp.camera_moving() and not t.yields_to_view()  # no slice for TRAIN_EVERY_S: one is due
    t.slice_ended = time.perf_counter()
    assert t.yields_to_view()  # 20 + 3 ms > 16.7
    assert t.steps_beside_frame() == 1
    t.step_ms = 9.0
    assert not t.yields_to_view()  # 9 + 3 ms fit in 3/4 of 16.7 ms: training goes on beside the frames
    assert t.steps_beside_frame() == 1  # one step a slice: two would overrun the frame
    t.step_ms = 4.0
    assert t.steps_beside_frame() == 2
    t.step_ms = 11.0
    assert t.yields_to_view()  # 11 + 3 ms leave the loop too little of 16.7 ms
    t.slice_ended = time.perf_counter() - 1.1 * TRAIN_EVERY_S
    assert not t.yields_to_view()  # a long drag still gives training a slice every TRAIN_EVERY_S
    t.slice_ended = time.perf_counter()
    vp.moved_at = time.perf_counter() - 1.1 * MOVING_HOLD_S
    assert not vp.camera_moving() and not t.yields_to_view()  # the camera stopped: training resumes
    assert t.steps_beside_frame() is None  # and its slices are no longer bounded


def test_training_does_not_wait_when_a_frame_alone_misses_60hz(monkeypatch):
    """Software Vulkan: a 17 ms frame misses 1/60 s whatever training does, so it goes on."""
    t = _training(monkeypatch, frame_ms=17.0)
    t.step_ms, t.slice_ended = 20.0, time.perf_counter()
    t.e.viewport.moved_at = time.perf_counter()
    assert not t.yields_to_view() and t.steps_beside_frame() is None


def test_training_yield_can_be_turned_off(monkeypatch):
    t = _training(monkeypatch, frame_ms=3.0, setting="0")
    t.step_ms = 50.0
    t.e.viewport.moved_at = time.perf_counter()
    assert not t.yields_to_view()


def test_on_a_slow_device_no_step_runs_while_the_camera_moves(monkeypatch):
    """Software Vulkan (issue 50): a 900 ms step and a 60 ms frame exceed INPUT_LATENCY_MS, so
    training waits for the whole drag (not only TRAIN_EVERY_S) and goes on once it stops."""
    from spirula.engine.studio.training import INPUT_LATENCY_MS

    t = _training(monkeypatch, frame_ms=60.0)
    vp = t.e.viewport
    t.step_ms = 900.0
    assert not t.yields_to_view()  # the camera never moved
    vp.moved_at = time.perf_counter()
    t.slice_ended = time.perf_counter() - 10 * TRAIN_EVERY_S
    assert t.yields_to_view()  # a long drag: still no slice
    t.step_ms = INPUT_LATENCY_MS - 60.0 - 1.0
    assert not t.yields_to_view()  # a step and a frame fit the latency: the 60 Hz rule's (the frame misses it)
    t.step_ms = 900.0
    vp.moved_at = time.perf_counter() - 1.1 * MOVING_HOLD_S
    assert not t.yields_to_view()  # the camera stopped: training resumes


def test_a_step_longer_than_a_slice_makes_the_slice_one_step(monkeypatch):
    """Steps are recorded ahead of the GPU, so a slice's clock cannot bound them: on a slow
    device (a step longer than the slice's budget) a slice records one step, so a camera move
    waits for one step, not for all those recorded behind it. The frozen clock never ends a
    slice; the stand-in run records steps until pause() says to yield (at most 10)."""
    import queue

    t = _training(monkeypatch, frame_ms=60.0)
    e = t.e
    e.s = SimpleNamespace(commands=queue.Queue())
    e.viewport.view_frame_due = lambda: False
    state = SimpleNamespace(step=5)

    def advance(pause):
        for _ in range(10):
            state.step += 1
            if pause():
                return

    run = SimpleNamespace(advance=advance, settle=lambda: None, finished=False)
    t.scene = SimpleNamespace(trainer=SimpleNamespace(state=state), run=run, t_train=0.0)
    assert t.steps_in_slice(0.1) is None  # no step timed yet: as the clock allows
    t.step_ms = 2000.0  # software Vulkan's step at 150k Gaussians
    assert t.steps_in_slice(0.1) == 1
    t.slice(0.1)
    assert state.step == 6
    t.step_ms = 13.0  # a GPU's: the slice's clock bounds it, as before
    assert t.steps_in_slice(0.1) is None
    t.slice(0.1)
    assert state.step == 16
