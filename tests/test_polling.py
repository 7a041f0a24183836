"""spirula.engine.studio.polling.wait_polling survives long GPU waits (found by `make package`: a cold software
Vulkan warm-up longer than ~5 s overflowed the back-off and the studio failed to start)."""

from types import SimpleNamespace

from spirula.engine.studio import polling


def test_wait_polling_survives_thousands_of_polls(monkeypatch):
    sleeps = []
    monkeypatch.setattr(polling.time, "sleep", sleeps.append)
    polls = {"n": 0}

    def finished(_submit_id):
        polls["n"] += 1
        return polls["n"] > 10_000

    gpu = SimpleNamespace(device=SimpleNamespace(is_submit_finished=finished))
    polling.wait_polling(gpu, submit_id=1)
    assert len(sleeps) == 10_000 and sleeps[0] == 0 and 0.00005 <= min(sleeps[20:]) and max(sleeps) <= 0.002


def test_wait_polling_sleeps_a_tenth_of_the_time_waited(monkeypatch):
    """A frame's wait wakes up at most ~10% (and 2 ms) after the GPU finished."""
    clock = {"t": 0.0}
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        clock["t"] += s

    monkeypatch.setattr(polling.time, "sleep", sleep)
    monkeypatch.setattr(polling.time, "perf_counter", lambda: clock["t"])
    gpu = SimpleNamespace(device=SimpleNamespace(is_submit_finished=lambda _sid: clock["t"] >= 0.010))
    polling.wait_polling(gpu, submit_id=1)
    assert 0.010 <= clock["t"] <= 0.011 + 0.00005  # the old 1.3x back-off woke at 11.4 ms
    clock["t"], sleeps[:] = 0.0, []
    gpu.device.is_submit_finished = lambda _sid: clock["t"] >= 1.0
    polling.wait_polling(gpu, submit_id=1)
    assert max(sleeps) == 0.002 and clock["t"] <= 1.002
