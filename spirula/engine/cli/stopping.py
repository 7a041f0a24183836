"""Stopping a command in order: Ctrl-C (SIGINT) and SIGTERM, one mechanism for every
`spirula` command (installed by spirula/engine/cli/main.py around the command).

- Inside :meth:`StopRequest.between_steps` (the commands whose work can stop at a step
  boundary: `train`, `run`, `mesh`, `partition train`), the first signal only asks the work
  to stop (``should_stop()`` turns true; the training checkpoints the step it has reached,
  the pipeline starts no later stage); a second signal interrupts at once
  (KeyboardInterrupt).
- Anywhere else the first signal interrupts at once (KeyboardInterrupt), SIGTERM as well
  as Ctrl-C: no C++ stack, no half-written file (the writers are atomic), one line.

The exit code is 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as shells
report a process ended by that signal.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class StopRequest:
    """The signal state of one command. Call it (``should_stop()``) to know whether a stop
    was asked; ``signum`` is the first signal received (None: none)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._cooperative = False
        self._say: Callable[[str], None] = lambda text: None
        self._old: dict[int, object] = {}

    def __call__(self) -> bool:
        if self._old and threading.current_thread() is threading.main_thread():
            # take the signals back: a native library imported since (pycolmap's glog sets a
            # SIGTERM handler that dumps a stack and ends the process) may have replaced ours
            for s in SIGNALS:
                signal.signal(s, self._handler)
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """128 + the signal (130 Ctrl-C, 143 SIGTERM); 130 when none was received."""
        return 128 + int(self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return NAMES.get(self.signum, f"signal {self.signum}") if self.signum else "Ctrl-C"

    def _handler(self, signum, frame) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        if first and self._cooperative:
            if signum == signal.SIGINT:  # someone at the terminal: say that it was heard
                self._say("stopping after this step (Ctrl-C again to interrupt at once)")
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def between_steps(self, say: Callable[[str], None] = lambda text: None) -> Iterator["StopRequest"]:
        """While inside, the first signal asks the work to stop at its next step boundary
        (``say`` acknowledges a Ctrl-C in one line); yields this StopRequest, the work's
        ``should_stop``."""
        before = self._cooperative, self._say
        self._cooperative, self._say = True, say
        try:
            yield self
        finally:
            self._cooperative, self._say = before

    def install(self) -> "StopRequest":
        """Take SIGINT and SIGTERM (main thread only; elsewhere nothing is installed)."""
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._old[s] = signal.signal(s, self._handler)
        return self

    def uninstall(self) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old.clear()


_current: StopRequest | None = None


@contextlib.contextmanager
def handle_signals() -> Iterator[StopRequest]:
    """Install a :class:`StopRequest` for the duration of one command (spirula/engine/cli/main.py)."""
    global _current
    outer, _current = _current, StopRequest().install()
    try:
        yield _current
    finally:
        _current.uninstall()
        _current = outer


def current() -> StopRequest:
    """The command's StopRequest; a fresh one without handlers when none is installed (a
    command function called directly, e.g. by a test)."""
    return _current if _current is not None else StopRequest()


def stopped_line(stop: StopRequest, step: int, checkpoint: str | None, checkpoint_step: int | None,
                 then: str, without: str = "rerun the same command to start again", where: str = "") -> str:
    """The one line a command prints when its training stopped on request: the step, the
    checkpoint of that step (or the last one, or none), and ``then`` (how to continue from
    the checkpoint; ``without`` when there is none). ``where``: e.g. " of the training"."""
    head = f"stopped at step {step}{where} ({stop.name})"
    if checkpoint and checkpoint_step == step:
        return f"{head}; checkpoint written to {checkpoint}; {then}"
    if checkpoint and checkpoint_step is not None:
        return (f"{head}; this step was not checkpointed, the last checkpoint (step {checkpoint_step}) is "
                f"{checkpoint}; {then}")
    return f"{head}; no checkpoint was written (--checkpoint-every 0, or the write failed: see above); {without}"
