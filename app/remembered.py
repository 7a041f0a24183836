"""What the studio remembers between sessions (QSettings, organisation "Spirula",
application "Spirula Studio"): the recently opened projects, datasets and files, and the
settings last trained and meshed with, per kind of device (a software device's and a
GPU's differ)."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore

MAX_RECENT = 10


def store() -> QtCore.QSettings:
    return QtCore.QSettings("Spirula", "Spirula Studio")


def recent() -> list[str]:
    """Recently opened paths, newest first, those that still exist."""
    value = store().value("recent/paths", [])
    paths = [value] if isinstance(value, str) else list(value or [])
    return [p for p in paths if p and Path(p).exists()]


def add_recent(path: str | Path) -> None:
    p = str(Path(path).resolve())
    paths = [p] + [q for q in recent() if q != p]
    s = store()
    s.setValue("recent/paths", paths[:MAX_RECENT])
    s.sync()


def save_values(group: str, values: dict) -> None:
    s = store()
    s.setValue(group, {k: v for k, v in values.items() if isinstance(v, (int, float, str, bool))})
    s.sync()


def load_values(group: str) -> dict:
    value = store().value(group, {})
    return dict(value) if isinstance(value, dict) else {}
