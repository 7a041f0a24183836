"""Waiting for the GPU without holding the GIL (the studio's engine thread and the viewer).

slangpy's blocking waits hold the GIL, so a long GPU wait (training slices, software Vulkan)
would freeze the Qt thread: these poll ``is_submit_finished`` and sleep instead.
"""

from __future__ import annotations

import time

from ..device import Gpu


def wait_polling(gpu: Gpu, submit_id: int | None = None, timeout_s: float = 600.0) -> None:
    """Wait until the GPU queue has finished ``submit_id`` (default: everything submitted so
    far) without holding the GIL: poll and sleep instead of slangpy's blocking wait."""
    dev = gpu.device
    if submit_id is None:  # an empty submission after all earlier work (not via the profiler)
        submit_id = dev.submit_command_buffer(dev.create_command_encoder().finish())
    t0 = time.perf_counter()
    polls = 0
    while not dev.is_submit_finished(submit_id):
        waited = time.perf_counter() - t0
        if waited > timeout_s:
            raise TimeoutError(f"GPU work did not finish within {timeout_s:.0f} s")
        polls += 1
        # Sleep a tenth of the time waited so far (50 us to 2 ms): a wait ends at most ~10% late.
        # A back-off growing by 1.3x a poll woke a 3 ms viewer frame up to 0.8 ms late.
        time.sleep(0 if polls < 20 else min(max(0.1 * waited, 0.00005), 0.002))


def install_polling_waits(gpu: Gpu) -> None:
    """Make ``gpu``'s waiting helpers (read, wait_idle, upload, write, wait_for) poll first:
    slangpy's own waits hold the GIL, which would freeze the GUI thread while the GPU (or
    software Vulkan) works. Their blocking wait then finds the queue idle."""
    if getattr(gpu, "_polling_waits", False):
        return

    def wrap(name: str) -> None:
        inner = getattr(gpu, name, None)
        if inner is None:
            return

        def polled(*args, **kwargs):
            wait_polling(gpu)
            return inner(*args, **kwargs)

        polled.__doc__ = inner.__doc__
        setattr(gpu, name, polled)

    for name in ("read", "wait_idle", "upload", "write"):
        wrap(name)
    gpu.wait_for = lambda submit_id: wait_polling(gpu, submit_id)
    gpu._polling_waits = True
