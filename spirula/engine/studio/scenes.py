"""What the studio shows: a training run (a dataset, its Trainer, its checkpoints) or a
PLY, each a source for the viewer and something to export; and the run settings of a
StartTraining."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import checkpoint
from ..config import RunConfig, settings_of
from ..config import run_config as _run_config
from ..errors import SpirulaError
from ..jobs.project_layout import checkpoint_path
from . import protocol as M

THUMB = 128           # longer side of dataset thumbnails, px


class Scene:
    """Something to look at: a training run or a PLY."""

    kind = "none"
    name = ""
    path = ""
    project: Path | None = None

    def source(self):
        return None

    def export(self, path: Path, fmt: str = "ply") -> int:
        raise SpirulaError("nothing to export: open a dataset or a PLY first")


class TrainingScene(Scene):
    kind = "dataset"

    def __init__(self, gpu, dataset, cmd: M.StartTraining, project: Path, split: tuple | None = None):
        """``split``: (train_idx, test_idx) as the training job's loading made it
        (spirula/engine/jobs/train.py load_training_data; spirula/engine/studio/loading.py checked_load), else
        made here by the same rule (training_split)."""
        from ..jobs.train import TrainingJob, training_split
        from ..splat.trainer import pack_rgba8
        from .polling import wait_polling

        ckpt_path = checkpoint_path(project)  # the project's one path, whoever made the project
        self.cfg = run_config(cmd, gpu.backend)
        # absolute paths and every setting as resolved: the checkpoint records this command for
        # OpenProject (Resume), which then trains on exactly these settings
        cmd = recorded_command(cmd, self.cfg, project)
        self.gpu, self.dataset, self.cmd, self.project = gpu, dataset, cmd, project
        self.name = Path(cmd.dataset).name
        self.path = cmd.dataset
        if split is not None:
            self.train_idx, self.test_idx = list(split[0]), list(split[1])
        else:
            self.train_idx, self.test_idx, split_note = training_split(dataset, self.cfg.dataset.eval_every,
                                                                       tuple(cmd.held_out), tuple(cmd.excluded))
            if split_note and split_note not in dataset.warnings:
                dataset.warnings.append(split_note)  # shown with the dataset's other notes
        # the training job of `spirula train` (spirula/engine/jobs/train.py), driven here in slices: its
        # trainer, checkpoints, evaluations and result files; its GPU waits poll (spirula/engine/studio/polling.py)
        self.job = TrainingJob(gpu, dataset, self.train_idx, self.test_idx, self.cfg, ckpt_path,
                               wait=lambda: wait_polling(gpu))
        self.trainer, self.writer, self.ident = self.job.trainer, self.job.writer, self.job.ident
        self._gt_extra: dict[int, Any] = {}
        self._pack = pack_rgba8
        self.run = None           # the TrainingRun (spirula/engine/splat/schedule.py), made once resumed
        self.t_train = 0.0        # wall time of the steps (viewer frames excluded), earlier sessions' included
        self.t_slice = 0.0        # start of the slice (or the part of it) not yet in t_train
        self.finished = False
        self.saved = False

    @property
    def evals(self) -> list[dict]:
        return self.job.evals

    def checkpoint_extra(self) -> dict:
        """The job's data in a checkpoint (spirula.engine.jobs.train's keys) and the command."""
        return self.job.checkpoint_extra(self.t_train, {"studio": asdict(self.cmd)})

    @property
    def t_session(self) -> float:
        """Wall time of this session's steps (a resumed run's earlier ones excluded)."""
        return self.t_train - self.job.seconds_before

    def resume(self, ckpt: checkpoint.Checkpoint, adapter: str) -> list[str]:
        """Continue from ``ckpt``; returns the allowed differences (CheckpointError when it
        does not fit)."""
        blocking, changed = self.job.fits(ckpt)
        if blocking:
            raise checkpoint.CheckpointError(f"the checkpoint {ckpt.path} (step {ckpt.step}) does not fit "
                                             f"{self.path}: {'; '.join(blocking)}")
        self.job.resume(ckpt)
        self.t_train = self.job.seconds_before
        return changed

    def flush(self) -> str:
        """Wait for the checkpoint being written; '' or a warning when that failed."""
        return self.writer.flush()

    def kept(self) -> str:
        """What is on disk, for an error message."""
        return self.writer.kept() or "no checkpoint had been written yet"

    def gt(self, i: int):
        buf = self.trainer.gt.get(i)
        if buf is None:
            buf = self._gt_extra.get(i)
            if buf is None:
                buf = self._gt_extra[i] = self.gpu.upload(self._pack(self.dataset.cameras[i].image), f"viewer.gt.{i}")
        return buf

    def source(self):
        from .viewer import ViewSource

        t = self.trainer
        return ViewSource(params=t.model.buf["params"], n=t.model.n, max_sh_degree=t.cfg.sh_degree,
                          sh_degree=t.sh_degree_at(t.state.step), cams=t.cams, cameras=self.dataset.cameras, gt=self.gt,
                          filter3d=t.filter3d)

    def export(self, path: Path, fmt: str = "ply") -> int:
        from ..jobs.train import export_ply
        from .polling import wait_polling

        wait_polling(self.gpu)
        path.parent.mkdir(parents=True, exist_ok=True)
        return export_ply(self.trainer, path, fmt=fmt)


class PlyScene(Scene):
    """Gaussians to view: a splat file's."""

    kind = "ply"

    def __init__(self, gpu, path: Path, g):
        from ..splat.param_layout import pack

        self.gpu, self.path, self.g = gpu, str(path), g
        self.edit = None  # the splat edit (spirula/engine/studio/editing.py) its exports apply
        self.name = path.name
        self.degree = g.sh_degree
        rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, self.degree)
        self.n = len(rows)
        self.params = gpu.upload(rows, "splat.params") if self.n else None

    def source(self):
        from .viewer import ViewSource

        return ViewSource(params=self.params, n=self.n, max_sh_degree=self.degree, sh_degree=self.degree)

    def export(self, path: Path, fmt: str = "ply") -> int:
        from ..io.formats import write_any

        path.parent.mkdir(parents=True, exist_ok=True)
        g = self.edit.apply(self.g) if self.edit is not None else self.g
        write_any(path, g, fmt)
        return len(g)


class MeshScene(Scene):
    """A textured mesh (spirula/engine/studio/mesh_view.TexturedMesh) drawn as triangles, and the
    splats of the project it was made from (a GaussianPly, or None) to switch to."""

    kind = "mesh"

    def __init__(self, gpu, path: Path, mesh, splats=None):
        from ..splat.param_layout import pack
        from .mesh_raster import MeshGpu

        self.gpu, self.path, self.mesh = gpu, str(path), mesh
        self.name = path.name
        self.gpu_mesh = MeshGpu(gpu, mesh)
        self.degree, self.n, self.params = 0, 0, None
        if splats is not None and len(splats.means):
            self.degree = splats.sh_degree
            rows = pack(splats.means, splats.scales, splats.quats, splats.opacities, splats.sh0, splats.shN,
                        self.degree)
            self.n = len(rows)
            self.params = gpu.upload(rows, "splat.params")

    def source(self):
        from .viewer import ViewSource

        return ViewSource(params=self.params, n=self.n, max_sh_degree=self.degree, sh_degree=self.degree,
                          mesh=self.gpu_mesh)

    def export(self, path: Path, fmt: str = "ply") -> int:
        raise SpirulaError(f"cannot export {path}: the viewport shows the mesh {self.name}, not Gaussians; "
                           "open the project's splat.ply to export them")


def camera_info(cam, split: str) -> M.CameraInfo:
    from PIL import Image

    img = Image.fromarray(cam.image)
    img.thumbnail((THUMB, THUMB))
    thumb = np.ascontiguousarray(np.asarray(img.convert("RGB"), np.uint8))
    return M.CameraInfo(name=cam.name, c2w=tuple(float(v) for v in np.linalg.inv(cam.w2c).reshape(-1)),
                        fx=float(cam.fx), fy=float(cam.fy), cx=float(cam.cx), cy=float(cam.cy),
                        width=int(cam.width), height=int(cam.height), split=split,
                        thumbnail=thumb.tobytes(), thumb_w=thumb.shape[1], thumb_h=thumb.shape[0],
                        source=getattr(cam, "source", ""), face=getattr(cam, "face", ""))


def up_vector(cameras) -> np.ndarray:
    """World up from the cameras: the mean of their 'up' axes (OpenCV: -y of the camera)."""
    ups = np.stack([-np.asarray(c.w2c)[1, :3] for c in cameras])
    u = ups.mean(axis=0)
    n = np.linalg.norm(u)
    return u / n if n > 1e-6 else np.array([0.0, -1.0, 0.0])


def recorded_command(cmd: M.StartTraining, cfg: RunConfig, project: Path) -> M.StartTraining:
    """``cmd`` as a studio checkpoint records it (spirula/engine/studio/projects.py read_project reads
    it back for Resume): absolute paths, and every setting as ``cfg`` resolved it, so the
    resumed run has exactly these settings whatever the presets or defaults are by then."""
    return replace(cmd, dataset=str(Path(cmd.dataset).resolve()), project=str(Path(project).resolve()),
                   **settings_of(cfg))


def run_config(cmd: M.StartTraining, backend: str) -> RunConfig:
    """The run's settings from the studio's StartTraining: what it sets, its preset's overlay
    on the rest, the appearance by its input kind (spirula/engine/settings.py resolve)."""
    return _run_config(M.settings_of(cmd), device=backend, preset=cmd.preset, input_kind=cmd.input_kind)
