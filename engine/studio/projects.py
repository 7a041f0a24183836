"""The studio's project folders: where a new one goes, and how a stopped training is read
back to continue it (OpenProject)."""

from __future__ import annotations

import os
import re
from dataclasses import fields, replace
from pathlib import Path

from .. import checkpoint
from ..jobs.stages import train_checkpoint_path
from . import messages as M


def projects_root() -> Path:
    """Where new projects go: $SPIRULA_PROJECTS or ~/Spirula."""
    return Path(os.environ.get("SPIRULA_PROJECTS") or (Path.home() / "Spirula"))


def new_project_dir(name: str, root: Path | None = None) -> Path:
    """A fresh folder ``<root>/<name>`` (``-2``, ``-3``, ... when taken)."""
    root = Path(root) if root is not None else projects_root()
    base = re.sub(r"[^\w.-]+", "_", name).strip("._") or "project"
    path, k = root / base, 1
    while path.exists():
        k += 1
        path = root / f"{base}-{k}"
    return path


def read_project(project: Path):
    """(StartTraining, dataset, checkpoint) to continue ``project``'s studio training (on
    the loader thread: no GPU here)."""
    from ..ingest import load_dataset

    path = train_checkpoint_path(project)
    if not path.is_file():
        raise checkpoint.CheckpointError(f"{project}: no training checkpoint to continue from (expected {path})")
    ckpt = checkpoint.load(path)
    studio = ckpt.extra.get("studio")
    if not isinstance(studio, dict):
        raise checkpoint.CheckpointError(f"{path}: written by `spirula run` or `spirula train`, not by the studio; "
                                         f"continue it with `spirula run {project}`")
    known = {f.name for f in fields(M.StartTraining)}
    cmd = M.StartTraining(**{k: v for k, v in studio.items() if k in known})
    # the project folder may have moved: what lay inside it is taken from where it is now
    old_root, new_root = Path(cmd.checkpoint or path).parent.parent, Path(project)

    def moved(p: str) -> str:
        q = Path(p)
        return str(new_root / q.relative_to(old_root)) if q == old_root or old_root in q.parents else p

    cmd = replace(cmd, dataset=moved(cmd.dataset), project=moved(cmd.project), checkpoint=str(path),
                  strategy=checkpoint.resumed_strategy(ckpt, cmd.strategy))
    return cmd, load_dataset(cmd.dataset, cmd.max_size), ckpt
