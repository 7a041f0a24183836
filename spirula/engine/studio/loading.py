"""What the engine thread loads on its worker thread (CPU only: the engine thread keeps
drawing and listening meanwhile): a dataset to train (after the memory preflight), a
project to continue, a PLY to view, a video or photo folder to reconstruct (spirula/engine/jobs/
pipeline.py up to undistortion); and what follows when the load is done."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..config import run_config as settings_config
from ..errors import SpirulaError
from . import protocol as M
from .framing import camera_centers, framing
from .projects import new_project_dir, read_resume, unfinished_reconstruction
from .scenes import MeshScene, PlyScene, Scene, run_config


class Loads:
    """The engine thread's one load at a time (``pending``: (kind, future, command))."""

    def __init__(self, engine):
        self.e = engine
        self.pool: ThreadPoolExecutor | None = None
        self.pending: tuple[str, Future, Any] | None = None
        self.pipeline_stop = threading.Event()
        self.reviewed: tuple | None = None   # (dataset path, max_size, Dataset) last reviewed: Start reuses it
        self.after_pipeline: dict[str, dict] = {}  # reconstructed dataset -> where its training goes

    def start(self) -> None:
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="spirula-load")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # --- commands ----------------------------------------------------------------------------
    def start_training(self, cmd: M.StartTraining) -> None:
        e = self.e
        if self._refused(f"cannot start training on {cmd.dataset}"):
            return
        cmd = after_reconstruction(cmd, self.after_pipeline.get(_key(cmd.dataset)))
        e.state("loading", cmd.dataset)
        e.emit(M.StageStarted("load", None, cmd.dataset))
        r = self.reviewed
        ds_cfg = run_config(cmd, e.gpu.backend).dataset
        size = ds_cfg.max_size
        cached = r[2] if r is not None and r[0] == _key(cmd.dataset) and r[1] == size else None
        if cached is not None and ds_cfg.masks not in ("auto", cached.masks):
            cached = None  # the review read the masks as "auto" found them: another mode reads them again
        fut = self.pool.submit(checked_load, cmd, e.gpu, e.emit, cached)
        self.pending = ("train", fut, cmd)

    def review(self, cmd: M.ReviewDataset) -> None:
        from ..ingest import load_dataset

        if self._refused(f"cannot open {cmd.dataset}"):
            return
        self.e.state("loading", f"{cmd.dataset}: reading the dataset")
        self.pending = ("review", self.pool.submit(load_dataset, cmd.dataset, cmd.max_size), cmd)

    def open_project(self, cmd: M.OpenProject) -> None:
        if self._refused(f"cannot open {cmd.path}"):
            return
        self.e.state("loading", f"{cmd.path}: reading its checkpoint")
        self.e.emit(M.StageStarted("load", None, cmd.path))
        self.pending = ("resume", self.pool.submit(resume_load, Path(cmd.path), self.e.gpu, self.e.emit), cmd)

    def view_project(self, cmd: M.ViewProject) -> None:
        """A trained project as it ended: mesh or splats, cameras, curves (read_view)."""
        if self._refused(f"cannot open {cmd.path}"):
            return
        self.e.state("loading", f"{cmd.path}: reading the project")
        self.pending = ("view", self.pool.submit(read_view, Path(cmd.path)), cmd)

    def open_ply(self, cmd: M.OpenPly) -> None:
        from ..io.formats import open_splat_file

        if self._refused(f"cannot open {cmd.path}"):
            return
        self.e.state("loading", cmd.path)
        self.pending = ("ply", self.pool.submit(open_splat_file, cmd.path, warn=False), cmd)

    def open_mesh(self, cmd: M.OpenMesh) -> None:
        if self._refused(f"cannot open {cmd.path}"):
            return
        self.e.state("loading", cmd.path)
        self.pending = ("mesh", self.pool.submit(read_mesh_and_splats, Path(cmd.path)), cmd)

    def start_pipeline(self, cmd: M.StartPipeline) -> None:
        """Decode / select or import, SfM and undistortion through spirula.engine.jobs.pipeline on the
        loader thread, then the studio's own training on the reconstructed dataset, with the
        live viewport."""
        import importlib.util

        e = self.e
        if importlib.util.find_spec("spirula.engine.jobs.pipeline") is None:
            e.emit(M.Warning(f"{cmd.source}: videos and photo folders need the reconstruction pipeline "
                             "(spirula/engine/jobs/pipeline.py), which is coming; open a COLMAP or nerfstudio dataset folder "
                             "or a .ply meanwhile"))
            return
        if self._refused(f"cannot start on {cmd.source}"):
            return
        from ..jobs.pipeline import PipelineConfig, run_pipeline

        src = Path(cmd.source)
        # the same input dropped again after a cancel: its project goes on (frames, SfM cache kept)
        earlier = None if cmd.project else unfinished_reconstruction(src, e.s.projects)
        project = Path(cmd.project) if cmd.project else earlier or new_project_dir(
            src.stem if src.is_file() else src.name, e.s.projects)
        stop = threading.Event()
        self.pipeline_stop = stop
        cfg = PipelineConfig(run=settings_config(M.settings_of(cmd), device=e.gpu.backend))

        def reconstruct():
            from ..jobs.lock import ProjectBusyError, acquire

            try:  # one writer per project (spirula/engine/jobs/lock.py)
                lock = acquire(project, "spirula studio (reconstruction)", on_note=lambda t: e.emit(M.Warning(t)))
            except ProjectBusyError as exc:
                e.emit(M.Error(str(exc), str(project)))  # run_pipeline reports its own errors; this one is not its
                raise
            try:
                return run_pipeline(src, project, cfg, emit=e.emit, should_stop=stop.is_set, until_stage="undistort")
            finally:
                lock.release()

        # the viewport empties while it reconstructs: what it showed is not what comes
        e.set_scene(Scene())
        e.emit(M.SceneLoaded("empty", src.name, str(src), 0, (0.0, 0.0, 0.0), 1.0, (0.0, -1.0, 0.0),
                             project=str(project)))
        e.state("loading", f"reconstructing {src.name} -> {project}"
                + (" (going on with its earlier run: the finished stages are kept)" if earlier else ""))
        self.pending = ("pipeline", self.pool.submit(reconstruct), (cmd, project))

    def cancel(self) -> bool:
        """Cancel the load under way; False when there is none."""
        if self.pending is None:
            return False
        if self.pending[0] == "pipeline":
            self.pipeline_stop.set()  # run_pipeline stops at its next check; check() reports
            self.e.state("stopping", "cancelling the reconstruction")
            return True
        self.pending[1].cancel()
        self.pending = None
        self.e.state("idle", "loading cancelled")
        return True

    def _refused(self, what: str) -> bool:
        """True, with the warning '<what>: <why>', while a load or a training is under way."""
        busy = self.busy_reason()
        if busy:
            self.e.emit(M.Warning(f"{what}: {busy}"))
        return bool(busy)

    def busy_reason(self) -> str | None:
        if self.pending is not None:
            return f"still loading {self.pending[2]}"
        if self.e.training.unfinished() is not None:
            return "training is under way: stop it first"
        return None

    # --- a load done -------------------------------------------------------------------------
    def check(self) -> None:
        """When the load under way is done: what follows it (training, viewing), or its error."""
        e = self.e
        if self.pending is None:
            return
        kind, fut, cmd = self.pending
        if not fut.done():
            return
        self.pending = None
        exc = fut.exception()
        if kind == "pipeline" and exc is not None:
            # run_pipeline has reported a stage's error itself (and records it in run.json)
            cancelled = isinstance(exc, KeyboardInterrupt)
            if not isinstance(exc, SpirulaError) and not cancelled:
                e.emit(M.Error(f"reconstruction failed: {type(exc).__name__}: {exc}"))
            e.state("idle" if cancelled else "failed", "reconstruction cancelled" if cancelled else str(exc))
            return
        if exc is not None:
            e.state("failed", str(exc))
            e.fail(exc, command_path(cmd))
            return
        if kind == "pipeline":
            pcmd, project = cmd
            if pcmd.drop_sfm_cache:
                from .caches import drop

                drop(e, project, "the reconstruction finished")
            # reviewed, then trained where `spirula run` would (either continues the other's checkpoint)
            self.after_pipeline[_key(project)] = dict(project=str(project / "train"), input_kind=fut.result()["kind"],
                                                      appearance=pcmd.appearance)
            ds = settings_config(M.settings_of(pcmd)).dataset
            self.review(M.ReviewDataset(str(project), ds.max_size, ds.eval_every))
            return
        try:
            if kind == "review":
                self._show_review(cmd, fut.result())
            elif kind == "train":
                dataset, split = fut.result()
                e.training.begin(cmd, dataset, split=split)
            elif kind == "resume":
                again, dataset, ckpt, split = fut.result()
                for note in ckpt.notes:  # the newest checkpoint was bad: the previous one is used
                    e.emit(M.Warning(note))
                e.training.begin(again, dataset, ckpt, split=split)
            elif kind == "mesh":
                self._show_mesh(cmd, *fut.result())
            elif kind == "view":
                self._show_view(fut.result())
            else:
                self._show_splats(cmd, fut.result())
        except Exception as exc:
            ends = e.training.unfinished()
            if ends is None:
                e.state("failed", str(exc))
            e.fail(exc, command_path(cmd), ends=ends)

    def _show_review(self, cmd: M.ReviewDataset, dataset) -> None:
        from .review import ReviewScene

        e = self.e
        scene = ReviewScene(e.gpu, dataset, cmd.dataset, cmd.eval_every)
        self.reviewed = (_key(cmd.dataset), cmd.max_size, dataset)
        e.set_scene(scene)
        e.emit(scene.scene_message(self.after_pipeline.get(_key(cmd.dataset), {}).get("project", "")))
        e.state("review", f"{scene.name}: {len(dataset.cameras)} images; check them and the settings, then Start")

    def _show_mesh(self, cmd: M.OpenMesh, mesh, splats) -> None:
        """A mesh to view, its triangles drawn (and its project's splats to switch to)."""
        e = self.e
        scene = MeshScene(e.gpu, Path(cmd.path), mesh, splats)
        e.set_scene(scene)
        center, radius = mesh.bounds()
        e.emit(M.SceneLoaded("mesh", scene.name, cmd.path, scene.n, tuple(float(x) for x in center), radius,
                             (0.0, -1.0, 0.0), project=str(trained_project(Path(cmd.path)) or ""),
                             sh_degree=scene.degree, faces=mesh.n, **framing(mesh.vertices, center, radius)))
        for note in mesh.notes[1:]:
            e.emit(M.Warning(note))
        e.state("idle", f"viewing {scene.name} ({mesh.n:,} triangles"
                + (f"; M shows the {scene.n:,} splats)" if scene.n else ")"))

    def _show_view(self, v: "ProjectView") -> None:
        """A project to view: its mesh (M switches to its splats) or its splats, its dataset's
        cameras when the dataset is still there, then its curves as the training sent them."""
        from .scenes import up_vector

        e = self.e
        if v.mesh is not None:
            scene = MeshScene(e.gpu, v.mesh_path, v.mesh, v.splats)
            center, radius = v.mesh.bounds()
        else:
            scene = PlyScene(e.gpu, v.splats_path, v.splats)
            center, radius = _splat_bounds(v.splats)
        up = (0.0, -1.0, 0.0)
        if v.dataset is not None:
            from ..splat.init import scene_bounds

            center, _ = scene_bounds(v.dataset)
            radius = float(v.dataset.scene_extent()[1])
            up = tuple(float(x) for x in up_vector(v.dataset.cameras))
        e.set_scene(scene)
        e.emit(M.SceneLoaded(scene.kind, scene.name, str(v.mesh_path or v.splats_path), scene.n,
                             tuple(float(x) for x in center), float(radius), up, v.cameras, str(v.folder),
                             tuple(v.notes), sh_degree=scene.degree, faces=v.mesh.n if v.mesh is not None else 0,
                             **framing(v.mesh.vertices if v.mesh is not None else v.splats.means, center, radius,
                                       camera_centers(v.dataset.cameras) if v.dataset is not None else None)))
        for note in v.notes:
            e.emit(M.Warning(note))
        e.emit(M.ProjectViewed(str(v.project), v.step, v.steps, v.psnr))
        for h in v.history:
            e.emit(M.TrainMetrics(int(h["step"]), float(h["loss"]), int(h["num_gaussians"]), 0.0))
        for ev in v.evaluations:
            e.emit(M.TrainMetrics(int(ev["step"]), float("nan"), scene.n, 0.0, psnr=float(ev["psnr"])))
        what = f"{v.mesh.n:,} triangles, {scene.n:,} splats" if v.mesh is not None else f"{scene.n:,} Gaussians"
        e.state("idle", f"viewing {Path(v.project).name} ({what}; step {v.step:,} of {v.steps:,})")

    def _show_splats(self, cmd: M.OpenPly, g) -> None:
        """Gaussians to view: a splat file's."""
        e = self.e
        scene = PlyScene(e.gpu, Path(cmd.path), g)
        e.set_scene(scene)
        center, radius = _splat_bounds(g)
        e.emit(M.SceneLoaded("ply", scene.name, cmd.path, scene.n, tuple(float(x) for x in center), radius,
                             (0.0, -1.0, 0.0), project=str(trained_project(Path(cmd.path)) or ""),
                             sh_degree=scene.degree, **framing(g.means, center, radius)))
        for note in g.notes:  # dropped per reason, SH cut, a point cloud converted (not warned: warn=False)
            e.emit(M.Warning(note))
        e.state("idle", f"viewing {scene.name} ({scene.n:,} Gaussians)")


def _splat_bounds(g) -> tuple[np.ndarray, float]:
    """(centre [3], radius) of splats: the means' median and 90th-percentile distance."""
    means = np.asarray(g.means, np.float64)
    if not len(means):
        return np.zeros(3), 1.0
    center = np.median(means, axis=0)
    return center, float(np.percentile(np.linalg.norm(means - center, axis=1), 90)) or 1.0


@dataclass
class ProjectView:
    """What ViewProject shows of a trained project (read_view)."""
    project: Path
    folder: Path                  # its training folder (splat.ply, train.json, metrics.json)
    splats_path: Path
    splats: Any
    mesh_path: Path | None = None
    mesh: Any = None
    dataset: Any = None           # the dataset at a small size (cameras, thumbnails), None when gone
    cameras: tuple = ()
    history: list = field(default_factory=list)      # train.json's loss and count per logged step
    evaluations: list = field(default_factory=list)  # metrics.json's held-out PSNR per evaluation
    step: int = 0
    steps: int = 0
    psnr: float | None = None
    notes: list = field(default_factory=list)


VIEW_SIZE = 256  # the image side the cameras of a viewed project are read at (thumbnails, frustums)


def read_view(project: Path) -> ProjectView:
    """A :class:`ProjectView` of ``project`` (on the loader thread: no GPU here): its splats,
    its mesh (spirula/engine/studio/projects.py project_mesh), its dataset's cameras split as trained
    (metrics.json's held-out names), its train.json history and metrics.json evaluations.
    SpirulaError when it has no trained splats; a missing dataset or mesh is a note."""
    import json

    from ..ingest import load_dataset
    from ..io.formats import open_splat_file
    from ..jobs.project_layout import trained_folder
    from .mesh_view import read_textured_mesh
    from .projects import project_mesh
    from .review import camera_infos

    folder = trained_folder(project)
    v = ProjectView(project=Path(project), folder=folder, splats_path=folder / "splat.ply",
                    splats=open_splat_file(str(folder / "splat.ply"), warn=False))
    v.mesh_path = project_mesh(project, folder)
    if v.mesh_path is not None:
        try:
            v.mesh = read_textured_mesh(v.mesh_path)
        except SpirulaError as exc:
            v.notes.append(f"the mesh is not shown: {exc}")
            v.mesh_path = None
    train = json.loads((folder / "train.json").read_text(encoding="utf-8"))
    metrics_file = folder / "metrics.json"
    metrics = json.loads(metrics_file.read_text(encoding="utf-8")) if metrics_file.is_file() else {}
    v.history = list(train.get("history") or [])
    v.evaluations = [ev for ev in metrics.get("evaluations") or [] if ev.get("psnr") is not None]
    v.step = int(metrics.get("step") or (v.history[-1]["step"] if v.history else 0))
    v.steps = int(((train.get("config") or {}).get("train") or {}).get("steps") or v.step)
    v.psnr = metrics.get("psnr")
    data = str(train.get("dataset") or "")
    if data and Path(data).exists():
        try:
            v.dataset = load_dataset(data, VIEW_SIZE)
            held = set(metrics.get("held_out") or [])
            excluded = set(metrics.get("excluded") or [])
            names = [c.name for c in v.dataset.cameras]
            test = [i for i, n in enumerate(names) if n in held]
            trained = [i for i, n in enumerate(names) if n not in held and n not in excluded]
            v.cameras = camera_infos(v.dataset, trained, test)
        except SpirulaError as exc:
            v.notes.append(f"the cameras are not shown: {data}: {exc}")
    elif data:
        v.notes.append(f"the cameras are not shown: the dataset {data} is gone")
    return v


def trained_project(path: Path) -> Path | None:
    """The trained project a viewed file belongs to (its splat.ply and train.json; a mesh's
    exports/ lies inside it), so the Export panel can mesh it; else None."""
    for folder in (path.parent, path.parent.parent):
        if (folder / "splat.ply").is_file() and (folder / "train.json").is_file():
            return folder
    return None


def read_mesh_and_splats(path: Path):
    """(TexturedMesh, the splats of its trained project or None) of a mesh file, read on the
    loader thread; a project's unreadable splat.ply is a note on the mesh, not an error."""
    from ..io.formats import open_splat_file
    from .mesh_view import read_textured_mesh

    mesh = read_textured_mesh(path)
    project = trained_project(path)
    splats = None
    if project is not None:
        try:
            splats = open_splat_file(str(project / "splat.ply"), warn=False)
        except SpirulaError as exc:
            mesh.notes.append(f"the project's splats are not shown beside the mesh: {exc}")
    return mesh, splats


def after_reconstruction(cmd: M.StartTraining, defaults: dict | None) -> M.StartTraining:
    """``cmd`` for a dataset the studio reconstructed (``defaults``: what the reconstruction
    left, Loads.after_pipeline; None: not one): it trains in the project's train/ unless told
    where (its checkpoint then goes where the project's always goes, spirula/engine/jobs/project_layout.py),
    knows its input kind (the appearance left unset follows it: exposure for a video), and
    takes the reconstruction's appearance when it was chosen there and not here."""
    if not defaults:
        return cmd
    return replace(cmd, project=cmd.project or defaults["project"], input_kind=defaults["input_kind"],
                   appearance=cmd.appearance if cmd.appearance is not None else defaults.get("appearance"))


def _key(path) -> str:
    return str(Path(path).resolve())


def checked_load(cmd: M.StartTraining, gpu, emit, cached=None):
    """(dataset, (train_idx, test_idx)) of ``cmd`` (on the loader thread; ``cached``: the one
    just reviewed) through the training job's loading (spirula/engine/jobs/train.py
    load_training_data: the memory preflight, refused with the numbers before any image is
    decoded; the dataset; the split the Dataset panel chose or the every-k-th rule)."""
    from ..jobs.train import load_training_data

    def warn(text: str) -> None:
        emit(M.Warning(text.removeprefix("warning: ")))

    cfg = run_config(cmd, gpu.backend)
    _, dataset, train_idx, test_idx = load_training_data(cmd.dataset, cfg, lambda: gpu, warn, cmd.held_out or (),
                                                         cmd.excluded or (), cached)
    return dataset, (train_idx, test_idx)


def resume_load(project: Path, gpu, emit):
    """(command, dataset, checkpoint, split) to continue ``project`` (Resume; on the loader
    thread): its command and checkpoint (spirula/engine/studio/projects.py read_resume), its data
    through the training job's loading (:func:`checked_load`)."""
    cmd, ckpt = read_resume(project)
    dataset, split = checked_load(cmd, gpu, emit)
    return cmd, dataset, ckpt, split


def command_path(cmd) -> str | None:
    """The file or folder a command names (for its errors)."""
    if isinstance(cmd, tuple):  # a pending pipeline: (StartPipeline, project)
        cmd = cmd[0]
    for name in ("path", "dataset", "source"):
        v = getattr(cmd, name, None)
        if v:
            return str(v)
    return None
