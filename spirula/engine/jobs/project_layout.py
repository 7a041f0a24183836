"""Where a project keeps what: the two kinds of trained project folder.

    `spirula train <dataset> -o P`:  P/splat.ply, P/train.json (spirula/engine/jobs/train.py)
    `spirula run <input> -o P`:      P/run.json, P/train/splat.ply, P/train/train.json,
                                     P/exports/ (spirula/engine/jobs/pipeline.py, stages.py)
    either, and the studio's:        P/checkpoints/train.npz (+ train.prev.npz), the training's
                                     checkpoint (checkpoint_path, the one place that says so)
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SpirulaError

RUN_FILE = "run.json"   # the run record of `spirula run` (spirula/engine/jobs/pipeline.py)


def trained_folder(project: Path) -> Path:
    """The folder of ``project`` that holds the trained splat.ply and train.json: the
    project itself (`spirula train`) or its train/ (`spirula run`, spirula/engine/jobs/stages.py).
    SpirulaError naming the folder and what is missing when it is neither."""
    project = Path(project)
    for folder in (project, project / "train"):
        if (folder / "splat.ply").is_file() and (folder / "train.json").is_file():
            return folder
    if (project / "splat.ply").is_file():
        raise SpirulaError(f"{project / 'train.json'}: not found (run `spirula train <dataset> -o {project}` first)")
    if (project / RUN_FILE).is_file():
        raise SpirulaError(f"{project}: a `spirula run` project without a finished training "
                           f"({project / 'train' / 'splat.ply'} or train.json not found); run "
                           f"`spirula run <video | photos | dataset> -o {project}` to go on with it")
    raise SpirulaError(f"{project}: neither a `spirula train` project (splat.ply, train.json) nor a `spirula run` "
                       f"project (run.json, train/splat.ply); run `spirula train <dataset> -o {project}` or "
                       f"`spirula run <video | photos> -o {project}` first")


def project_root(folder: Path) -> Path:
    """The project a training folder belongs to: the `spirula run` project of its train/
    (run.json beside it: the studio's reconstructions too), else the folder itself."""
    folder = Path(folder)
    if folder.name == "train" and (folder.parent / RUN_FILE).is_file():
        return folder.parent
    return folder


def checkpoint_path(folder: Path) -> Path:
    """Where the training of a project checkpoints, whoever made it (`spirula train`,
    `spirula run`, a partition part, the studio, a studio reconstruction):
    ``<project>/checkpoints/train.npz``, outside train/ (which a failed stage replaces), for
    the project itself or for its train/ folder. The one path every writer uses; readers
    take :func:`adopt_checkpoint`'s (which also finds the layouts of before)."""
    return project_root(folder) / "checkpoints" / "train.npz"


def earlier_checkpoint(folder: Path) -> Path | None:
    """A checkpoint of ``folder``'s project written where it went before the project's one
    path (:func:`checkpoint_path`), when the one path has none: ``<folder>/checkpoint.npz``
    (`spirula train`, a partition part) or ``<project>/train/checkpoints/train.npz`` (a studio
    reconstruction); either generation counts (spirula/engine/checkpoint.py exists). None otherwise."""
    from .. import checkpoint

    if checkpoint.exists(checkpoint_path(folder)):
        return None
    folder = Path(folder)
    root = project_root(folder)
    for old in (folder / "checkpoint.npz", root / "train" / "checkpoints" / "train.npz"):
        if checkpoint.exists(old):
            return old
    return None


def find_checkpoint(folder: Path) -> Path:
    """The checkpoint to read for ``folder``'s project (without moving anything): the one
    path, or a layout of before while only that one is there (:func:`earlier_checkpoint`)."""
    return earlier_checkpoint(folder) or checkpoint_path(folder)


def adopt_checkpoint(folder: Path) -> Path:
    """The project's one checkpoint path (:func:`checkpoint_path`), with a checkpoint of a
    layout of before (:func:`earlier_checkpoint`) moved there first, both generations (read
    both, write one): a project of an older version resumes, and its next checkpoint goes
    where every other one goes. OSError when the move fails."""
    from .. import checkpoint

    path = checkpoint_path(folder)
    old = earlier_checkpoint(folder)
    if old is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        for frm, to in ((checkpoint.previous_path(old), checkpoint.previous_path(path)), (old, path)):
            if frm.is_file():
                frm.replace(to)
    return path
