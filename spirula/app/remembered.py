"""What the studio remembers between sessions (QSettings, organisation "Spirula",
application "Spirula Studio"): the recently opened projects (one entry per project; a
dataset or file that belongs to none stands for itself), and the
settings last trained and meshed with, per kind of device (a software device's and a
GPU's differ)."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore

MAX_RECENT = 10


def store() -> QtCore.QSettings:
    return QtCore.QSettings("Spirula", "Spirula Studio")


def recent() -> list[str]:
    """Recently opened projects, newest first, one entry each (a file or a training folder
    remembered inside a project counts as its project: spirula/app/project_state.py
    project_folder), those that still exist."""
    from .project_state import project_folder

    value = store().value("recent/paths", [])
    paths = [value] if isinstance(value, str) else list(value or [])
    out: list[str] = []
    for p in paths:
        if p and Path(p).exists():
            q = str(project_folder(p))
            if q not in out:
                out.append(q)
    return out


def add_recent(path: str | Path, replaces: str | Path = "") -> None:
    """``path`` first in the recent list (``replaces``: an entry it takes the place of, a
    reviewed dataset whose training is now a project)."""
    p = str(Path(path).resolve())
    gone = {p, str(Path(replaces).resolve())} if replaces else {p}
    paths = [p] + [q for q in recent() if q not in gone]
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
