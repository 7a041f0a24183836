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
