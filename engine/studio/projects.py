"""The studio's project folders: where a new one goes, what one holds (describe_project:
the window's Resume / Restart / View), and how a stopped training is read back to
continue it (OpenProject)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .. import checkpoint
from ..jobs.layout import checkpoint_path, earlier_checkpoint
from ..settings import from_saved
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


def unfinished_reconstruction(source: str | Path, root: Path | None = None) -> Path | None:
    """The project under ``root`` (default :func:`projects_root`) that reconstructs
    ``source`` (a video or photo folder: its run.json's input, engine/jobs/pipeline.py) and
    whose training has not finished (no train/splat.ply): a cancelled or failed
    reconstruction, or one reviewed and not trained. Dropping the same input again goes on
    in it (its frames, SfM cache and finished stages kept); the newest run.json wins when
    several do. None when there is none (or ``root`` does not exist)."""
    root = Path(root) if root is not None else projects_root()
    wanted = {os.path.abspath(source), str(Path(source).resolve())}
    best: tuple[int, Path] | None = None
    for run in sorted(root.glob("*/run.json")) if root.is_dir() else ():
        try:
            record = json.loads(run.read_text(encoding="utf-8"))
            mtime = run.stat().st_mtime_ns
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("input") not in wanted:
            continue
        if (run.parent / "train" / "splat.ply").is_file():
            continue  # trained: dropping it again makes another project (the trained one stays)
        if best is None or mtime > best[0]:
            best = (mtime, run.parent)
    return best[1] if best else None


# StartTraining fields of studio checkpoints written before the settings table (renamed or gone)
_RENAMED = {"init_points": "init_random_points"}


def command_of_checkpoint(studio: dict) -> M.StartTraining:
    """The StartTraining a studio checkpoint recorded (its "studio" extra), names of older
    checkpoints mapped, fields it no longer has (its own checkpoint path) dropped."""
    known = {f.name for f in fields(M.StartTraining)}
    values = {_RENAMED.get(k, k): v for k, v in studio.items()}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in known}
    return M.StartTraining(**values)


def find_checkpoint(project: Path) -> Path:
    """The checkpoint of ``project`` (engine/jobs/layout.py checkpoint_path; a studio
    reconstruction's of before it, when only that one is there)."""
    return earlier_checkpoint(project) or checkpoint_path(project)


def read_project(project: Path):
    """(StartTraining, dataset, checkpoint) to continue ``project``'s studio training (on
    the loader thread: no GPU here)."""
    from ..ingest import load_dataset

    path = find_checkpoint(project)
    if not checkpoint.exists(path):
        raise checkpoint.CheckpointError(f"{project}: no training checkpoint to continue from (expected {path})")
    if path != checkpoint_path(project):  # a reconstruction's of before: moved where its run now checkpoints
        moved = checkpoint_path(project)
        moved.parent.mkdir(parents=True, exist_ok=True)
        for old, to in ((checkpoint.previous_path(path), checkpoint.previous_path(moved)), (path, moved)):
            if old.is_file():  # both generations
                old.replace(to)
        path = moved
    ckpt = checkpoint.load_newest(path)  # its notes: the newest was bad, the previous one is used
    studio = ckpt.extra.get("studio")
    if not isinstance(studio, dict):
        raise checkpoint.CheckpointError(f"{path}: written by `spirula run` or `spirula train`, not by the studio; "
                                         f"continue it with `spirula run {project}`")
    cmd = command_of_checkpoint(studio)
    # the project folder may have moved: what lay inside it is taken from where it is now
    old_root, new_root = Path(cmd.project), Path(project)
    if old_root.name == "train" and new_root.name != "train":
        old_root = old_root.parent   # a reconstruction's training folder: its project is the root

    def moved(p: str) -> str:
        q = Path(p)
        return str(new_root / q.relative_to(old_root)) if q == old_root or old_root in q.parents else p

    cmd = replace(cmd, dataset=moved(cmd.dataset), project=moved(cmd.project),
                  strategy=checkpoint.resumed_strategy(ckpt, cmd.strategy))
    return cmd, load_dataset(cmd.dataset, cmd.max_size, masks=getattr(cmd, "masks", None) or "auto"), ckpt


@dataclass(frozen=True)
class ProjectInfo:
    """What a project folder holds, read without loading it (the window's Resume / Restart /
    View choice): the studio checkpoint to resume (its step and total), the dataset and the
    settings to restart from, the trained splats and the mesh to view."""
    path: Path
    dataset: str = ""          # "" when unknown
    checkpoint: Path | None = None   # a studio checkpoint (a `spirula run` one resumes with `spirula run`)
    step: int = 0
    steps: int = 0
    saved: str = ""            # when the checkpoint was written
    splats: Path | None = None
    mesh: Path | None = None
    settings: dict = field(default_factory=dict)  # StartTraining fields of the run: every setting as it ran

    @property
    def choices(self) -> list[str]:
        return (["resume"] if self.checkpoint else []) + (["restart"] if self.dataset else []) + \
            (["view"] if self.splats or self.mesh else [])


def read_checkpoint_meta(path: Path) -> dict:
    """The metadata of a checkpoint (its one small member; the arrays stay on disk)."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as z:
            return json.loads(z["meta"].tobytes().decode("utf-8"))
    except checkpoint.READ_ERRORS as e:  # truncated, flipped bytes, no meta member
        raise checkpoint.CheckpointError(f"{path}: damaged checkpoint, not readable ({e})") from e


def describe_project(project: str | Path) -> ProjectInfo:
    """A :class:`ProjectInfo` of ``project`` (a studio or `spirula run` folder)."""
    project = Path(project)
    info: dict = {"path": project}
    ckpt = find_checkpoint(project)
    if checkpoint.exists(ckpt):
        try:
            meta = read_checkpoint_meta(ckpt)
        except checkpoint.CheckpointError:
            if not checkpoint.previous_path(ckpt).is_file():
                raise
            meta = read_checkpoint_meta(checkpoint.previous_path(ckpt))  # resuming uses it too (load_newest)
        studio = (meta.get("extra") or {}).get("studio")
        if isinstance(studio, dict):
            cmd = command_of_checkpoint(studio)
            # the settings it ran with (the checkpoint's config: every one, as resolved)
            ran = from_saved(meta.get("config") or {}) if meta.get("config") else M.settings_of(cmd)
            info.update(checkpoint=ckpt, step=int(meta.get("step", 0)), saved=str(meta.get("saved", "")),
                        steps=int(ran.get("steps") or 0), dataset=cmd.dataset,
                        settings=dict(ran, held_out=cmd.held_out, excluded=cmd.excluded))
    for folder in (project, project / "train"):
        if (folder / "splat.ply").is_file():
            info["splats"] = folder / "splat.ply"
            meta_file = folder / "train.json"
            if not info.get("dataset") and meta_file.is_file():
                try:
                    train = json.loads(meta_file.read_text(encoding="utf-8"))
                    info["dataset"] = str(train.get("dataset", ""))
                    info["settings"] = from_saved(train.get("config") or {})
                except (OSError, ValueError):
                    pass
            info["mesh"] = project_mesh(project, folder)
            break
    if not info.get("dataset") and (project / "run.json").is_file() and (project / "sparse").is_dir():
        info["dataset"] = str(project)  # a reconstruction not trained yet: its dataset is the project
    if info.get("dataset") and not Path(info["dataset"]).exists():
        info["dataset"] = ""  # moved or deleted: nothing to restart from
    info.setdefault("settings", {})
    # a restart trains where the run trained (train/ in a `spirula run` project); its checkpoint
    # goes where the project's always goes (engine/jobs/layout.py checkpoint_path)
    folder = Path(info["splats"]).parent if info.get("splats") else (
        project / "train" if (project / "run.json").is_file() else project)
    info["settings"] = dict(info["settings"], project=str(folder))
    return ProjectInfo(**info)


def project_mesh(project: Path, folder: Path) -> Path | None:
    """The textured mesh of a project: ``exports/mesh.glb`` of the project (`spirula run`, the
    studio's Export of a reconstruction) or of its training folder (the studio's Export of a
    dataset's training), else None."""
    for where in (Path(project), Path(folder)):
        glb = where / "exports" / "mesh.glb"
        if glb.is_file():
            return glb
    return None
