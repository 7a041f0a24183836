"""The profiler panel's data on the engine thread: per-kernel profiling (SetProfiling says
whether the window wants it; it is on while a training runs, off between trainings, and
the profiler then sends its own snapshots), and a VRAM-only snapshot about once a second
while it is off and the GPU is busy."""

from __future__ import annotations

import time

from . import protocol as M

VRAM_INTERVAL = 1.0   # s between VRAM-only ProfilerSnapshots while profiling is off


class Profiling:
    def __init__(self, engine):
        self.e = engine
        self.on = False
        self.wanted = False       # the window's choice: per-kernel timestamps while training
        self.unsubscribe = None
        self.last_vram = 0.0

    def set(self, cmd: M.SetProfiling) -> None:
        self.wanted = cmd.on
        self.follow_training()

    def follow_training(self) -> None:
        """On while a training runs and the window wants it; off otherwise."""
        self.switch(self.wanted and self.e.training.unfinished() is not None)

    def switch(self, on: bool) -> None:
        try:
            from .. import profile
        except Exception as exc:  # the profiler is optional for the studio
            self.e.emit(M.Warning(f"profiler unavailable: {exc}"))
            return
        if on and not self.on:
            profile.enable(text=False, at_exit=False)
            self.unsubscribe = profile.subscribe(self.e.emit, 1.0)
            self.on = True
        elif not on and self.on:
            if self.unsubscribe:
                self.unsubscribe()
            profile.disable()
            self.on = False

    def vram_tick(self) -> None:
        """A VRAM-only ProfilerSnapshot about once a second while the GPU is busy and the
        per-kernel profiler is off (the profiler sends full snapshots itself)."""
        e = self.e
        now = time.perf_counter()
        if self.on or now - self.last_vram < VRAM_INTERVAL or e.gpu is None:
            return
        if not (e.training.running or e.viewport.view_dirty or self.last_vram == 0.0):
            return
        self.last_vram = now
        try:
            from .. import profile

            data = profile.snapshot(e.gpu)
        except Exception:
            return
        e.emit(M.ProfilerSnapshot(data))
