"""Ctrl-C in the commands that train (`spirula train`, `spirula partition train`): the first
asks the work to stop cleanly, a second interrupts at once."""

from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def clean_stop_on_ctrl_c(say):
    """The first Ctrl-C asks the training to stop after the current step (the state is
    checkpointed and the PLY written); a second one interrupts at once."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop.is_set
        return

    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        say("stopping after this step (Ctrl-C again to interrupt at once)")

    old = signal.signal(signal.SIGINT, handler)
    try:
        yield stop.is_set
    finally:
        signal.signal(signal.SIGINT, old)
