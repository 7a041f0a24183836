"""Training speed for progress lines: steps per second of wall time."""

from __future__ import annotations

import time


class StepRate:
    """Training steps per second of wall time between successive :meth:`at` calls (the
    progress lines of the CLI and the studio)."""

    def __init__(self, step: int = 0):
        self.reset(step)

    def reset(self, step: int) -> None:
        """Count from ``step``, now (a start or a resume)."""
        self.t, self.step = time.perf_counter(), step

    def at(self, step: int) -> float:
        """Steps per second since the last call (or reset), which is now at ``step``."""
        now = time.perf_counter()
        rate = (step - self.step) / max(now - self.t, 1e-9)
        self.t, self.step = now, step
        return rate
