"""The studio's log: every record with its traceback goes to a log file; the terminal gets
one line per warning or error (no tracebacks); the last traceback is kept for the error
dialog's "Show Details…" (spirula/app/window.py), which names the file.

    $SPIRULA_LOG_FILE, else $XDG_STATE_HOME/spirula/studio.log (~/.local/state/spirula/studio.log)
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_file() -> Path:
    if os.environ.get("SPIRULA_LOG_FILE"):
        return Path(os.environ["SPIRULA_LOG_FILE"])
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "spirula" / "studio.log"


class _OneLine(logging.Formatter):
    """The message alone: the traceback is in the log file."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


class LastTraceback(logging.Handler):
    """Keeps the newest record that carried a traceback, formatted."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.text = ""
        self.setFormatter(logging.Formatter(FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.text = self.format(record)


last_traceback = LastTraceback()


def setup(level: str = "WARNING") -> Path | None:
    """Log to the file (everything from ``level``, with tracebacks) and to the terminal (one
    line each). Returns the file, or None when it cannot be written (then only the terminal)."""
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if level.upper() == "DEBUG" else logging.INFO)  # the file gets info and up
    for h in root.handlers[:]:
        # `spirula`'s logging.basicConfig handler: with the level lowered for the file it would
        # print every info and warning a second time (subclasses, files and pytest's, stay)
        if type(h) is logging.StreamHandler:
            root.removeHandler(h)
    console = logging.StreamHandler()
    console.setLevel(logging.WARNING)
    console.setFormatter(_OneLine())
    root.addHandler(console)
    root.addHandler(last_traceback)
    path = log_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=2_000_000, backupCount=2, encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    return path


def details() -> str:
    """The error dialog's details: where the log is, and the last traceback."""
    head = f"Log file: {log_file()}"
    return f"{head}\n\n{last_traceback.text}" if last_traceback.text else head
