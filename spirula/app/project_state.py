"""Which project the window shows, and what changes when it is another one.

A scene belongs to a project: the folder of a studio or `spirula run` project (a training
folder's project when it is the train/ of a reconstruction, a splat or mesh file's project
when it lies in one), else the dataset, file or folder itself. When a SceneLoaded names
another project than the one on show, every panel starts afresh (:meth:`ProjectState.reset`:
no previous export list, mesh box, curves, keyframes, stage list or error line), the Export
panel lists what the project was exported to before, and the project goes first in File > Open recent, one entry per project (spirula/app/remembered.py).

The review of a dataset and the training started from it are one piece of work: they keep
the panels (the mesh box set during the review stays for the training's mesh)."""

from __future__ import annotations

from pathlib import Path

from spirula.engine.studio import protocol as M


def project_folder(path: str | Path) -> Path:
    """The project ``path`` belongs to (absolute): the nearest folder at or above it (three
    levels at most: ``P/train/exports/mesh.glb``) that is a project (spirula/app/drops.py
    is_project), as its root (spirula/engine/jobs/project_layout.py project_root: ``P`` for ``P/train``);
    ``path`` itself when it lies in no project."""
    from spirula.engine.jobs.project_layout import RUN_FILE, project_root

    from .drops import is_project

    p = Path(path).resolve()
    for folder in [p, *p.parents][:4]:
        if folder.is_dir() and (is_project(folder) or (folder.name == "train" and (folder.parent / RUN_FILE).is_file())):
            return project_root(folder).resolve()
    return p


def scene_project(msg: M.SceneLoaded) -> str:
    """The project of a SceneLoaded (see the module's docstring)."""
    if msg.kind == "review" and msg.project:  # a reconstruction's review: the dataset is its project
        return str(project_folder(msg.path))
    return str(project_folder(msg.project or msg.path))


class ProjectState:
    """The window's project on show (``key``) and the reset of its panels on a switch."""

    def __init__(self, window):
        self.w = window
        self.key = ""
        self.kind = ""
        self.path = ""
        self.resets = 0          # how many switches reset the panels (tests read it)

    def scene_loaded(self, msg: M.SceneLoaded) -> bool:
        """Call first on every SceneLoaded: resets the panels when it is another project's
        (True then), and lists its project in Open recent."""
        from . import remembered

        page = getattr(self.w, "start_page", None)
        if page is not None:
            page.hide()  # something is on show (or on its way: a reconstruction)
        key = scene_project(msg)
        same_work = self.kind == "review" and msg.kind == "dataset" and msg.path == self.path
        switched = bool(self.key) and key != self.key and not same_work
        if switched:
            self.reset()
        if key != self.key and not same_work:
            self.w.export.show_exports(key)  # what it was exported to before
        if msg.kind != "empty" or msg.project:  # a reconstruction starting: its project folder
            remembered.add_recent(key, replaces=self.key if same_work else "")
        self.key, self.kind, self.path = key, msg.kind, msg.path
        return switched

    def reset(self) -> None:
        """Every panel as on a first launch, but for the settings (they are the user's)."""
        w = self.w
        self.resets += 1
        w.statusBar().clearMessage()           # an error line of the previous project
        w.stage_status.reset()
        w.training.clear()
        w.export.clear()
        w.video.clear_keyframes()
        w.profiler.clear()
        w.dataset.clear_history()
        crop = w.edit_tools.crop_dialog
        if crop is not None:
            crop.hide()
        w.resumed = None
