"""Where a project keeps what: the two kinds of trained project folder.

    `spirula train <dataset> -o P`:  P/splat.ply, P/train.json (engine/jobs/train.py)
    `spirula run <input> -o P`:      P/run.json, P/train/splat.ply, P/train/train.json,
                                     P/exports/ (engine/jobs/pipeline.py, stages.py)
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SpirulaError

RUN_FILE = "run.json"   # the run record of `spirula run` (engine/jobs/pipeline.py)


def trained_folder(project: Path) -> Path:
    """The folder of ``project`` that holds the trained splat.ply and train.json: the
    project itself (`spirula train`) or its train/ (`spirula run`, engine/jobs/stages.py).
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
    """Where the training of a project checkpoints, whoever made it (`spirula run`, the
    studio, a studio reconstruction): ``<project>/checkpoints/train.npz``, outside train/
    (which a failed stage replaces), for the project itself or for its train/ folder."""
    return project_root(folder) / "checkpoints" / "train.npz"


def earlier_checkpoint(project: Path) -> Path | None:
    """A checkpoint a studio reconstruction wrote before its path was the project's one
    (``<project>/train/checkpoints/train.npz``), or None."""
    old = Path(project) / "train" / "checkpoints" / "train.npz"
    return old if old.is_file() and not checkpoint_path(project).is_file() else None
