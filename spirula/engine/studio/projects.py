"""The studio's project folders: where a new one goes, what one holds (describe_project:
the window's Resume / Restart / View), and how a stopped training is read back to
continue it (OpenProject)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from .. import checkpoint
from ..jobs import project_layout as _layout
from ..jobs.project_layout import checkpoint_path
from ..settings import from_saved
from . import protocol as M


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
    ``source`` (a video or photo folder: its run.json's input, spirula/engine/jobs/pipeline.py) and
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
    """The checkpoint of ``project`` (spirula/engine/jobs/project_layout.py find_checkpoint: the project's one
    path, or a layout of before while only that one is there)."""
    return _layout.find_checkpoint(project)


def training_folder(project: Path) -> Path:
    """Where a training of ``project`` writes its splats: train/ of a `spirula run` project (or
    a studio reconstruction: run.json), else the project itself (`spirula train`, the studio's
    training of a dataset)."""
    project = Path(project)
    return project / "train" if (project / _layout.RUN_FILE).is_file() else project


def _dataset_of_cli_run(project: Path, extra: dict) -> str:
    """The dataset a `spirula train` / `spirula run` checkpoint trained on: its record
    (``extra["dataset"]``), else (a checkpoint of before it was recorded) its train.json's,
    else a reconstruction's own folder; "" when unknown."""
    if extra.get("dataset"):
        return str(extra["dataset"])
    meta = training_folder(project) / "train.json"
    if meta.is_file():
        try:
            return str(json.loads(meta.read_text(encoding="utf-8")).get("dataset", ""))
        except (OSError, ValueError):
            pass
    if (project / _layout.RUN_FILE).is_file() and (project / "sparse").is_dir():
        return str(project)
    return ""


def command_of_cli_checkpoint(project: Path, config: dict, extra: dict) -> M.StartTraining:
    """The StartTraining that continues a checkpoint of `spirula train` / `spirula run` /
    a partition part in the studio: every setting as it ran (spirula/engine/settings.py from_saved),
    its dataset, the project's training folder, the held-out split of its eval_every rule.
    CheckpointError when its dataset is unknown or gone."""
    dataset = _dataset_of_cli_run(Path(project), extra)
    if not dataset or not Path(dataset).exists():
        raise checkpoint.CheckpointError(
            f"{project}: the dataset its checkpoint trained on is " + (f"gone ({dataset})" if dataset else "unknown")
            + f"; continue it with `spirula train <dataset> -o {project} --resume`")
    return M.StartTraining(dataset=dataset, project=str(training_folder(project)), **from_saved(config))


def read_project(project: Path):
    """(StartTraining, dataset, checkpoint) to continue ``project``'s training, whoever made
    it (:func:`read_resume`, then its dataset at its size; the studio's Resume loads it through
    the training job's loading instead, spirula/engine/studio/loading.py resume_load)."""
    from ..ingest import load_dataset

    cmd, ckpt = read_resume(project)
    return cmd, load_dataset(cmd.dataset, cmd.max_size, masks=getattr(cmd, "masks", None) or "auto"), ckpt


def read_resume(project: Path):
    """(StartTraining, checkpoint) to continue ``project``'s training, whoever made it (the
    studio, `spirula train`, `spirula run`; on the loader thread: no GPU here). A checkpoint
    of an older layout is first moved to the project's one path."""
    if not checkpoint.exists(find_checkpoint(project)):
        raise checkpoint.CheckpointError(f"{project}: no training checkpoint to continue from (expected "
                                         f"{checkpoint_path(project)})")
    path = _layout.adopt_checkpoint(project)  # read both layouts, write one
    try:
        ckpt = checkpoint.load_newest(path)  # its notes: the newest was bad, the previous one is used
    except checkpoint.CheckpointError as e:
        raise checkpoint.CheckpointError(f"{e}; Restart trains the project afresh") from e
    studio = ckpt.extra.get("studio")
    if not isinstance(studio, dict):  # `spirula train`, `spirula run`, a partition part
        cmd = command_of_cli_checkpoint(Path(project), ckpt.config, ckpt.extra)
        return replace(cmd, strategy=checkpoint.resumed_strategy(ckpt, cmd.strategy)), ckpt
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
    return cmd, ckpt


@dataclass(frozen=True)
class ProjectInfo:
    """What a project folder holds, read without loading it (the window's Resume / Restart /
    View choice): the studio checkpoint to resume (its step and total), the dataset and the
    settings to restart from, the trained splats and the mesh to view."""
    path: Path
    dataset: str = ""          # "" when unknown
    checkpoint: Path | None = None   # the checkpoint to resume, whoever wrote it (studio, train, run)
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
        if not isinstance(studio, dict) and meta.get("config"):  # `spirula train`, `spirula run`: resumes too
            try:
                studio = asdict(command_of_cli_checkpoint(project, meta["config"], meta.get("extra") or {}))
            except checkpoint.CheckpointError:
                studio = None  # its dataset is gone: nothing to resume on (Resume is not offered)
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
    # goes where the project's always goes (spirula/engine/jobs/project_layout.py checkpoint_path)
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
