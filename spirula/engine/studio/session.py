"""The window's handle on the studio's engine thread, which owns the GPU device, runs
training (and the pipeline), renders the viewport, and talks to the GUI only through
messages.

    session = Session().start()          # the engine thread creates the device, compiles
    session.send(StartTraining(path))    # GUI -> engine: control queue (spirula/engine/studio/protocol.py)
    for msg in session.poll(): ...       # engine -> GUI: typed messages, drained on a timer
    frame = session.preview.take()       # latest-value slot: the newest PreviewFrame or None
    session.close()                      # Shutdown (saves a checkpoint if training), join

Training checkpoints (spirula/engine/checkpoint.py) go where ``spirula run``'s train stage puts
them, ``<project>/checkpoints/train.npz`` (spirula/engine/jobs/project_layout.py checkpoint_path), every
``checkpoint_every`` steps and whenever the training stops with save (Cancel(save=True),
Shutdown(save=True)), which the engine answers with CheckpointSaved(stopped=True). Besides
the training state, a studio checkpoint records the StartTraining that began the run, so
OpenProject(<project>) continues it; a run that finishes all its steps deletes it.

The thread's loop routes each command to its handler (spirula/engine/studio/engine_thread.py):
the viewport (viewport.py), the training (training.py: slices of the one step schedule,
spirula/engine/splat/schedule.py), loads on a worker thread (loading.py), the profiler
(profiling.py).

Nothing here imports Qt: the GUI (spirula/app/) and the tests drive a session the same way. The
thread never blocks in a slangpy wait for long while holding the GIL (slangpy's waits do):
before GPU calls that read back, it polls ``is_submit_finished`` and sleeps, so the GUI
thread keeps running while the GPU (or the CPU doing software Vulkan) works.
"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path

from . import protocol as M
from .engine_thread import EngineThread


class LatestValue:
    """A one-slot mailbox that overwrites: the producer never waits, the consumer gets the
    newest value (or None)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._value = None
        self.count = 0

    def put(self, value) -> None:
        with self._lock:
            self._value = value
            self.count += 1

    def take(self):
        with self._lock:
            v, self._value = self._value, None
            return v

    def put_unless(self, value, keep) -> bool:
        """Put ``value`` unless ``keep(current)`` says the unread current value must stay."""
        with self._lock:
            if self._value is not None and keep(self._value):
                return False
            self._value = value
            self.count += 1
            return True


class Session:
    """The GUI's handle on the engine thread (see the module docstring)."""

    def __init__(self, backend: str | None = None, projects: str | os.PathLike | None = None,
                 warmup: bool = True, viewer: bool = True):
        self.backend = backend
        self.projects = Path(projects) if projects is not None else None
        self.warmup = warmup
        self.with_viewer = viewer
        self.commands: queue.SimpleQueue = queue.SimpleQueue()
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.preview = LatestValue()
        # Cancel, also out of band: a stage that holds the engine thread (the mesh) asks this
        self.cancel_requested = threading.Event()
        self.thread = threading.Thread(target=self._main, name="spirula-engine", daemon=True)

    def start(self) -> "Session":
        self.thread.start()
        return self

    def send(self, command) -> None:
        """Queue a command for the engine thread (never blocks)."""
        if isinstance(command, M.Cancel):
            self.cancel_requested.set()
        elif isinstance(command, (M.RenderVideo, M.TrainPartition)):  # a Cancel sent after it, even before it starts, stops it
            self.cancel_requested.clear()
        self.commands.put(command)

    def poll(self, limit: int = 100_000) -> list:
        """Messages the engine sent since the last call (never blocks)."""
        out = []
        while len(out) < limit:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                break
        return out

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def close(self, save: bool = True, timeout: float = 60.0) -> bool:
        """Ask the engine to stop (saving a checkpoint when ``save`` and training) and wait
        for its thread; True if it ended."""
        if self.thread.is_alive():
            self.send(M.Shutdown(save=save))
            self.thread.join(timeout)
        return not self.thread.is_alive()

    def _main(self) -> None:
        lower_priority()
        EngineThread(self).run()


def lower_priority(nice: int = 5) -> None:
    """Let the GUI thread win the CPU over the engine thread and the threads it starts
    (software Vulkan's workers inherit it): only the calling thread's nice value changes."""
    if os.environ.get("SPIRULA_ENGINE_NICE") is not None:
        nice = int(os.environ["SPIRULA_ENGINE_NICE"])
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    except (OSError, AttributeError):
        pass
