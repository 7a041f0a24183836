"""What the window opens and starts (a mixin of StudioWindow): File > Open, drops and
`spirula gui PATH` all come to :meth:`Opening.open_paths`, which asks spirula/app/drops.py what a
path is and does one thing with it. A dataset is reviewed first (the Dataset panel shows
its cameras and split, the Training panel its settings) and trains on Start; while a job
runs nothing else opens and the panels stay as they are."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtWidgets

from spirula.engine.studio import protocol as M

from .drops import ACTIONS, GLTF_EXTS, MESH_FORMATS, SPLAT_FORMATS, VIDEO_EXTS, Drop, classify_many


class Opening:
    # --- File menu -------------------------------------------------------------------------------
    def _ask_dataset(self) -> None:
        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Open a dataset, project or photo folder")
        if path:
            self.open_paths([path])

    def _ask_ply(self) -> None:
        kinds = " ".join(f"*{ext}" for ext in dict.fromkeys((*SPLAT_FORMATS, *MESH_FORMATS, *GLTF_EXTS)))
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Open 3D Gaussians or a mesh", "",
                                                        f"Splats and meshes ({kinds})")
        if path:
            self.open_paths([path])

    def _ask_video(self) -> None:
        exts = " ".join(f"*{e}" for e in sorted(VIDEO_EXTS))
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Open a video", "", f"Videos ({exts})")
        if path:
            self.open_paths([path])

    def _ask_photos(self) -> None:
        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Open a folder of photos")
        if path:
            self.open_paths([path])

    # --- one entry for every input -------------------------------------------------------------
    def open_paths(self, paths) -> list[Drop]:
        """What a drop (or File > Open, or `spirula gui PATH`) does; returns the decisions.
        One thing opens at a time; while a job runs nothing else opens (the panels stay)."""
        drops = classify_many(paths)
        d = next((d for d in drops if d.action in ACTIONS), drops[0] if drops else None)
        if d is None:
            return drops
        if d.action in ACTIONS and self.busy():
            self.refuse(f"Cannot open {d.path.name} while {self.busy()}: stop it first (Stop && save), "
                        "or wait for it to finish. Nothing was changed.".replace("&&", "&"))
            return drops
        if d.action == "project":
            self.open_project(d.path)
        elif d.action == "dataset":
            self.review(d.path)
        elif d.action == "splats":
            self.session.send(M.OpenPly(str(d.path)))
            self.note(f"Opening {d.path.name}…")
        elif d.action == "mesh":
            self.session.send(M.OpenMesh(str(d.path)))
            self.note(f"Opening the mesh {d.path.name}…")
        elif d.action in ("video", "photos"):
            project, self.next_project = str(getattr(self, "next_project", None) or ""), None
            self.reconstruct(d.path, project, d.kind)
        else:
            self.refuse(d.reason)
        return drops

    def reconstruct(self, source: Path, project: str = "", kind: str = "") -> None:
        """A video or photo folder to frames, SfM and undistortion, then its review; into
        ``project`` ("" : the engine's choice, the unfinished project of the same input when
        there is one: spirula/engine/studio/projects.py unfinished_reconstruction). The
        dataset settings the panel holds (the All options editor's projection, wide lens,
        masks ...) go with it: the reconstruction reads them. ``kind`` "360": the drop's
        2:1 video (spirula/app/drops.py), said in the note unless the projection says otherwise."""
        from spirula.engine import settings as table

        what = "video" if source.is_file() else "photo folder"
        held = self.training.settings()
        dataset = {s.name: held[s.name] for s in table.named("dataset") if held.get(s.name) is not None}
        dataset.update(max_size=self.training.max_size.value(), eval_every=self.dataset.every.value())
        self.session.send(M.StartPipeline(str(source), project=project, drop_sfm_cache=self.sfm_cache.drop_after_run,
                                          **dataset))
        if kind == "360" and dataset.get("projection", "auto") != "perspective":
            what = "360-degree video"
            how = "frames, SfM on their cube faces, undistortion; All options > Projection: perspective if it is not 360"
        else:
            how = "frames, SfM, undistortion"
        self.note(f"Reconstructing the {what} {source.name} ({how}); then review it and Start")

    def busy(self) -> str:
        """What the engine is doing that another input would disturb ('' when nothing)."""
        if self.job_state in ("running", "paused", "stopping"):
            return f"training {self.scene.name if self.scene else ''}".strip()
        if self.job_state == "loading":
            return "loading"
        if self.job_state == "meshing":
            return "making a mesh"
        if self.job_state == "rendering":
            return "rendering a video"
        return ""

    def review(self, path: Path) -> None:
        """Show the dataset (cameras, thumbnails, notes, split); Start trains it."""
        self.session.send(M.ReviewDataset(str(path), self.training.max_size.value(), self.dataset.every.value()))
        self.note(f"Reading {path.name}: review its images and settings, then Start")

    # --- projects --------------------------------------------------------------------------------
    def _ask_new_project(self) -> None:
        from spirula.engine.studio.projects import projects_root

        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "New project: its folder",
                                                        str(projects_root() / "untitled"))
        if path:
            self.new_project(Path(path))

    def new_project(self, path: Path) -> None:
        """The next training (or reconstruction) goes into ``path``; the window empties."""
        if self.busy():
            self.refuse(f"Cannot start a new project while {self.busy()}")
            return
        if path.exists() and any(path.iterdir()):
            self.refuse(f"{path} is not empty: a new project needs a new or empty folder (open it as a project instead)")
            return
        self.next_project = path
        self.training.set_dataset(None)
        self.note(f"New project {path.name}: drop a video, photos or a dataset; it trains into {path}")

    def _ask_project(self) -> None:
        from spirula.engine.studio.projects import projects_root

        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Open a project folder", str(projects_root()))
        if path:
            self.open_paths([path])

    def _fill_recent(self) -> None:
        from . import remembered

        self.recent_menu.clear()
        paths = remembered.recent()
        for p in paths:
            self.recent_menu.addAction(p, lambda p=p: self.open_paths([p]))
        if not paths:
            self.recent_menu.addAction("(nothing yet)").setEnabled(False)

    def open_project(self, path: Path) -> None:
        """Resume, Restart or View, as the user chooses in a ProjectDialog (``self.project_dialog``)."""
        from spirula.engine.errors import SpirulaError
        from spirula.engine.studio.projects import describe_project

        from .project_dialog import ProjectDialog

        try:
            info = describe_project(path)
        except SpirulaError as exc:
            self.refuse(str(exc))
            return
        if not info.choices and _run_input(path) is not None:  # a reconstruction cancelled early: on with it
            self.reconstruct(_run_input(path), str(path))
            return
        if not info.choices:
            self.refuse(f"{path}: a project folder with no checkpoint to resume, no dataset to restart from "
                        "and no splats to view")
            return
        dlg = self.project_dialog = ProjectDialog(info, self)
        dlg.chosen.connect(lambda choice: self.project_chosen(info, choice))
        dlg.open()

    def project_chosen(self, info, choice: str) -> None:
        from . import remembered

        if self.busy():
            self.refuse(f"Cannot open {info.path.name} while {self.busy()}")
            return
        remembered.add_recent(info.path)
        if choice == "resume":
            self.session.send(M.OpenProject(str(info.path)))
            self.note(f"Continuing the training of {info.path.name} from step {info.step:,}…")
        elif choice == "restart":
            settings = dict(info.settings)
            self.training.restore(settings)
            self.training.reset_curves(int(settings.get("steps", self.training.steps.value())))
            self.session.send(M.StartTraining(info.dataset, **settings))
            self.note(f"Training {info.path.name} again from the start…")
            self.docks["Training"].raise_()
        elif info.splats is not None:  # its mesh (or splats), cameras and curves, as the dialog says
            self.session.send(M.ViewProject(str(info.path)))
            self.note(f"Opening {info.path.name} to view…")
        else:
            self.session.send(M.OpenMesh(str(info.mesh)))

    def start_training(self) -> None:
        """Start: train the dataset on show with the Training panel's settings and the
        Dataset panel's split."""
        if self.busy():
            self.refuse(f"Cannot start while {self.busy()}")
            return
        if not self.training.dataset:
            self.refuse("Open a dataset first (drop its folder on the window)")
            return
        s = self.training.settings()
        if self.scene is not None and self.scene.kind == "review" and self.scene.path == self.training.dataset:
            s.update(self.dataset.split_names())
            if self.scene.project:  # a reconstruction trains inside its project
                s["project"] = self.scene.project
        if getattr(self, "next_project", None) is not None and "project" not in s:
            s["project"], self.next_project = str(self.next_project), None
        from . import remembered

        remembered.save_values(f"training/{self.device_kind}", self.training.values())
        self.training.reset_curves(s["steps"])
        self.session.send(M.StartTraining(self.training.dataset, **s))
        self.docks["Training"].raise_()

    def export_mesh(self, cmd: M.ExportMesh) -> None:
        """The Export panel's textured mesh: the mesh stage on the engine thread."""
        if self.busy():
            self.refuse(f"Cannot make a mesh while {self.busy()}: stop it first, or wait for it to finish")
            return
        from . import remembered

        remembered.save_values(f"mesh/{self.device_kind}", self.export.values())
        self.session.send(cmd)
        self.export.mesh_started()
        self.docks["Export"].raise_()

    def export_video(self, output: str) -> None:
        """The Video panel's export to ``output`` (.mp4): render_video on the engine thread."""
        if self.busy():
            self.refuse(f"Cannot render a video while {self.busy()}: stop it first, or wait for it to finish")
            return
        from . import remembered

        remembered.save_values(f"video/{self.device_kind}", self.video.values())
        self.video.stop_preview()
        self.session.send(self.video.render_command(output))
        self.video.started()
        self.docks["Video"].raise_()

    def _ask_export_video(self) -> None:
        folder = Path(self.scene.project) / "exports" if self.scene and self.scene.project else Path(".")
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export video", str(folder / "video.mp4"),
                                                        "H.264 video (*.mp4)")
        if path:
            self.export_video(path if path.lower().endswith(".mp4") else path + ".mp4")

    def _ask_export_ply(self) -> None:
        from spirula.engine.io.formats import EXTENSIONS

        from .export_formats import FILTERS, default_name

        fmt = self.export.current_format() or "ply"
        start = default_name(self.scene.project if self.scene else "", fmt)
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export Gaussians", start, FILTERS[fmt])
        if path:
            if not path.lower().endswith(EXTENSIONS[fmt]):
                path += EXTENSIONS[fmt]
            self.session.send(M.ExportPly(path, fmt))

    def _ask_screenshot(self) -> None:
        start = str(Path(self.scene.project) / "screenshot.png") if self.scene and self.scene.project else "screenshot.png"
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save screenshot", start, "PNG (*.png)")
        if path:
            self.session.send(M.SaveScreenshot(path))


def _run_input(project: Path) -> Path | None:
    """The video or photo folder a reconstruction project was made from (its run.json's
    input), when it still exists; else None."""
    import json

    try:
        source = json.loads((Path(project) / "run.json").read_text(encoding="utf-8")).get("input")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(source) if source and Path(source).exists() else None
