"""engine.studio.viewer.wait_polling survives long GPU waits (found by `make package`: a cold software
Vulkan warm-up longer than ~5 s overflowed the back-off and the studio failed to start)."""

from types import SimpleNamespace

from engine.studio import viewer


def test_wait_polling_survives_thousands_of_polls(monkeypatch):
    sleeps = []
    monkeypatch.setattr(viewer.time, "sleep", sleeps.append)
    polls = {"n": 0}

    def finished(_submit_id):
        polls["n"] += 1
        return polls["n"] > 10_000

    gpu = SimpleNamespace(device=SimpleNamespace(is_submit_finished=finished))
    viewer.wait_polling(gpu, submit_id=1)
    assert len(sleeps) == 10_000 and max(sleeps) == 0.002 and sleeps[0] == 0
