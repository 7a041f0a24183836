"""The studio's engine thread: owns the GPU device, runs training (and the pipeline),
renders the viewport, and talks to the GUI only through messages.

    session = Session().start()          # the engine thread creates the device, compiles
    session.send(StartTraining(path))    # GUI -> engine: control queue (engine/messages.py)
    for msg in session.poll(): ...       # engine -> GUI: typed messages, drained on a timer
    frame = session.preview.take()       # latest-value slot: the newest PreviewFrame or None
    session.close()                      # Shutdown (saves a checkpoint if training), join

Training checkpoints (engine/checkpoint.py) go where ``spirula run``'s train stage puts
them, ``<project>/checkpoints/train.npz`` (engine.stages.train_checkpoint_path), every
``checkpoint_every`` steps and whenever the training stops with save (Cancel(save=True),
Shutdown(save=True)), which the engine answers with CheckpointSaved(stopped=True). Besides
the training state, a studio checkpoint records the StartTraining that began the run, so
OpenProject(<project>) continues it; a run that finishes all its steps deletes it.

Nothing here imports Qt: the GUI (app/) and the tests drive a session the same way. The
thread never blocks in a slangpy wait for long while holding the GIL (slangpy's waits do):
before GPU calls that read back, it polls ``is_submit_finished`` and sleeps, so the GUI
thread keeps running while the GPU (or the CPU doing software Vulkan) works.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import checkpoint
from . import messages as M
from .config import DatasetConfig, RunConfig, TrainConfig, default_appearance, density_settings
from .errors import SpirulaError
from .fileio import write_json_atomic
from .stages import train_checkpoint_path
from .step_rate import StepRate

log = logging.getLogger("spirula.session")

THUMB = 128           # longer side of dataset thumbnails, px
STATS_INTERVAL = 0.5  # s between ViewerStats messages
VRAM_INTERVAL = 1.0   # s between VRAM-only ProfilerSnapshots while profiling is off


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


class LatestValue:
    """A one-slot mailbox that overwrites: the producer never waits, the consumer gets the
    newest value (or None)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._value = None
        self.count = 0

    def put(self, value) -> None:
        with self._lock:
            self._value = value
            self.count += 1

    def take(self):
        with self._lock:
            v, self._value = self._value, None
            return v

    def put_unless(self, value, keep) -> bool:
        """Put ``value`` unless ``keep(current)`` says the unread current value must stay."""
        with self._lock:
            if self._value is not None and keep(self._value):
                return False
            self._value = value
            self.count += 1
            return True


class Session:
    """The GUI's handle on the engine thread (see the module docstring)."""

    def __init__(self, backend: str | None = None, projects: str | os.PathLike | None = None,
                 warmup: bool = True, viewer: bool = True):
        self.backend = backend
        self.projects = Path(projects) if projects is not None else None
        self.warmup = warmup
        self.with_viewer = viewer
        self.commands: queue.SimpleQueue = queue.SimpleQueue()
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.preview = LatestValue()
        self.thread = threading.Thread(target=self._main, name="spirula-engine", daemon=True)

    def start(self) -> "Session":
        self.thread.start()
        return self

    def send(self, command) -> None:
        """Queue a command for the engine thread (never blocks)."""
        self.commands.put(command)

    def poll(self, limit: int = 100_000) -> list:
        """Messages the engine sent since the last call (never blocks)."""
        out = []
        while len(out) < limit:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                break
        return out

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def close(self, save: bool = True, timeout: float = 60.0) -> bool:
        """Ask the engine to stop (saving a checkpoint when ``save`` and training) and wait
        for its thread; True if it ended."""
        if self.thread.is_alive():
            self.send(M.Shutdown(save=save))
            self.thread.join(timeout)
        return not self.thread.is_alive()

    def _main(self) -> None:
        _lower_priority()
        _Engine(self).run()


def _lower_priority(nice: int = 5) -> None:
    """Let the GUI thread win the CPU over the engine thread and the threads it starts
    (software Vulkan's workers inherit it): only the calling thread's nice value changes."""
    if os.environ.get("SPIRULA_ENGINE_NICE") is not None:
        nice = int(os.environ["SPIRULA_ENGINE_NICE"])
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    except (OSError, AttributeError):
        pass


# --------------------------------------------------------------------------------------------
# everything below runs on the engine thread


class _Scene:
    """Something to look at: a training run or a PLY."""

    kind = "none"
    name = ""
    path = ""
    project: Path | None = None

    def source(self):
        return None

    def export(self, path: Path) -> int:
        raise SpirulaError("nothing to export: open a dataset or a PLY first")


class _TrainingScene(_Scene):
    kind = "dataset"

    def __init__(self, gpu, dataset, cmd: M.StartTraining, project: Path):
        from .splat.trainer import Trainer
        from .splat.trainer import pack_rgba8

        ckpt_path = Path(cmd.checkpoint) if cmd.checkpoint else train_checkpoint_path(project)
        # absolute paths: the checkpoint records this command for OpenProject
        cmd = replace(cmd, dataset=str(Path(cmd.dataset).resolve()), project=str(project.resolve()),
                      checkpoint=str(ckpt_path.resolve()))
        self.gpu, self.dataset, self.cmd, self.project = gpu, dataset, cmd, project
        self.name = Path(cmd.dataset).name
        self.path = cmd.dataset
        self.cfg = _run_config(cmd, gpu.backend)
        self.train_idx, self.test_idx, split_note = dataset.holdout(cmd.eval_every)
        if split_note and split_note not in dataset.warnings:
            dataset.warnings.append(split_note)  # shown with the dataset's other notes
        self.trainer = Trainer(gpu, dataset, self.train_idx, self.cfg.train)
        self.ident = checkpoint.dataset_identity(dataset, self.train_idx)
        self.writer = checkpoint.BackgroundWriter(ckpt_path)  # saved_step: the checkpoint known on disk
        self._gt_extra: dict[int, Any] = {}
        self._pack = pack_rgba8
        self.evals: list[dict] = []
        self.steps_done = 0
        self.t_train = 0.0
        self.finished = False
        self.saved = False

    def checkpoint_extra(self) -> dict:
        """The job's data in a checkpoint: engine.train_job's keys, and the command."""
        return {"evaluations": self.evals, "train_seconds": self.t_train, "studio": asdict(self.cmd)}

    def resume(self, ckpt: checkpoint.Checkpoint, adapter: str) -> list[str]:
        """Continue from ``ckpt``; returns the allowed differences (CheckpointError when it
        does not fit)."""
        blocking, changed = checkpoint.compare(ckpt, self.cfg, self.ident, adapter)
        if blocking:
            raise checkpoint.CheckpointError(f"the checkpoint {ckpt.path} (step {ckpt.step}) does not fit "
                                             f"{self.path}: {'; '.join(blocking)}")
        checkpoint.restore(self.trainer, ckpt)
        self.writer.saved_step = self.writer.last_step = ckpt.step
        self.evals = list(ckpt.extra.get("evaluations", []))
        self.t_train = float(ckpt.extra.get("train_seconds", 0.0))
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

    def export(self, path: Path) -> int:
        from .train_job import export_ply
        from .viewer import wait_polling

        wait_polling(self.gpu)
        path.parent.mkdir(parents=True, exist_ok=True)
        return export_ply(self.trainer, path)


class _PlyScene(_Scene):
    kind = "ply"

    def __init__(self, gpu, path: Path, g):
        from .splat.layout import pack

        self.gpu, self.path, self.g = gpu, str(path), g
        self.name = path.name
        self.degree = g.sh_degree
        rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, self.degree)
        self.n = len(rows)
        self.params = gpu.upload(rows, "splat.params") if self.n else None

    def source(self):
        from .viewer import ViewSource

        return ViewSource(params=self.params, n=self.n, max_sh_degree=self.degree, sh_degree=self.degree)

    def export(self, path: Path) -> int:
        from .io.ply import write_ply

        path.parent.mkdir(parents=True, exist_ok=True)
        write_ply(path, self.g)
        return self.n


def _camera_info(cam, split: str) -> M.CameraInfo:
    from PIL import Image

    img = Image.fromarray(cam.image)
    img.thumbnail((THUMB, THUMB))
    thumb = np.ascontiguousarray(np.asarray(img.convert("RGB"), np.uint8))
    return M.CameraInfo(name=cam.name, c2w=tuple(float(v) for v in np.linalg.inv(cam.w2c).reshape(-1)),
                        fx=float(cam.fx), fy=float(cam.fy), cx=float(cam.cx), cy=float(cam.cy),
                        width=int(cam.width), height=int(cam.height), split=split,
                        thumbnail=thumb.tobytes(), thumb_w=thumb.shape[1], thumb_h=thumb.shape[0])


def _up_vector(cameras) -> np.ndarray:
    """World up from the cameras: the mean of their 'up' axes (OpenCV: -y of the camera)."""
    ups = np.stack([-np.asarray(c.w2c)[1, :3] for c in cameras])
    u = ups.mean(axis=0)
    n = np.linalg.norm(u)
    return u / n if n > 1e-6 else np.array([0.0, -1.0, 0.0])


class _Engine:
    def __init__(self, session: Session):
        self.s = session
        self.gpu = None
        self.viewer = None
        self.scene: _Scene | None = None
        self.training: _TrainingScene | None = None
        self.paused = False
        self.quit = False
        self.save_on_quit = True
        self.loader: ThreadPoolExecutor | None = None
        self.pending: tuple[str, Future, Any] | None = None
        self.view_dirty = False
        self.model_dirty = False
        self.readback_requests = 0
        self.last_frame = 0.0
        self.last_stats = 0.0
        self.stats_frames = -1  # viewer frame count of the last ViewerStats
        self.last_vram = 0.0
        self.rate = StepRate()
        self.t_run_start = 0.0
        self.reported_mode = None
        self.surface_args = None
        self.refine_at: float | None = None
        self.readback_tag = 0
        self.pipeline_stop = threading.Event()
        self.profiling = False
        self.unsubscribe = None

    # --- messages ----------------------------------------------------------------------------
    def emit(self, msg) -> None:
        self.s.events.put(msg)

    def state(self, state: str, detail: str = "") -> None:
        self.emit(M.JobState(state, detail))

    # --- thread body -------------------------------------------------------------------------
    def run(self) -> None:
        t0 = time.perf_counter()
        try:
            from .device import get_gpu

            from .viewer import install_polling_waits

            self.gpu = get_gpu(self.s.backend)
            install_polling_waits(self.gpu)
            if self.s.with_viewer:
                from .viewer import Viewer

                self.viewer = Viewer(self.gpu)
            if self.s.warmup:
                self._warmup()
        except Exception as exc:
            self.emit(M.Error(str(exc) if isinstance(exc, SpirulaError) else f"engine start failed: {exc!r}"))
            self.state("failed", "no GPU device")
            if isinstance(exc, SpirulaError):
                log.error("engine start failed: %s", exc)
            else:
                log.exception("engine start failed")
            return
        self.emit(M.EngineReady(adapter=self.gpu.adapter, backend=self.gpu.backend, software=self.gpu.software,
                                warmup_s=time.perf_counter() - t0))
        self.loader = ThreadPoolExecutor(1, thread_name_prefix="spirula-load")
        try:
            while not self.quit:
                try:
                    self._iterate()
                except Exception as exc:
                    self._fail(exc, ends=self._active_training())
            self._shutdown()
        finally:
            self.loader.shutdown(wait=False, cancel_futures=True)
            if self.viewer is not None:
                try:
                    self.viewer.detach()
                except Exception:
                    pass

    def _iterate(self) -> None:
        busy = (self._training_active() or self._view_frame_due() or self._model_frame_due()
                or self._refine_due())
        idle_wait = 0.01 if (self.pending is not None or self.refine_at is not None) else 0.05
        self._drain(timeout=0.0 if busy else idle_wait)
        if self.quit:
            return
        self._check_pending()
        if self._training_active():
            self._train_slice()
        self._maybe_render()
        self._vram_tick()

    def _fail(self, exc: Exception, path: str | os.PathLike | None = None, ends: "_TrainingScene | None" = None) -> None:
        """Report ``exc`` as an Error naming ``path`` (else the file the exception names, else
        the project of the training it ``ends``; a bad command ends no training). The
        message of an ending training says which checkpoint is kept."""
        text = str(exc) if isinstance(exc, SpirulaError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, SpirulaError):  # an expected error: its message is the whole story, once
            log.error("engine error: %s", text)
        else:  # a bug: the traceback is what a report needs
            log.error("engine error: %s", text, exc_info=(type(exc), exc, exc.__traceback__))
        path = path or getattr(exc, "filename", None) or (ends.project if ends is not None else None)
        if ends is not None:
            ends.finished = True
            self.paused = False
            warning = ends.flush()
            kept = ends.kept()
            text = f"{text.rstrip('.')}. {kept[0].upper()}{kept[1:]}" + (f" ({warning})" if warning else "")
        self.emit(M.Error(text, "" if path is None else str(path)))
        if ends is not None:
            self.state("failed", text)

    def _active_training(self) -> "_TrainingScene | None":
        t = self.training
        return t if t is not None and not t.finished else None

    def _training_active(self) -> bool:
        t = self.training
        return t is not None and not t.finished and not self.paused

    # --- commands ----------------------------------------------------------------------------
    def _drain(self, timeout: float) -> None:
        first = True
        while True:
            try:
                cmd = self.s.commands.get(timeout=timeout) if (timeout > 0 and first) else self.s.commands.get_nowait()
            except queue.Empty:
                return
            first = False
            try:
                self._handle(cmd)
            except Exception as exc:
                self._fail(exc, _command_path(cmd))
            if self.quit:
                return

    def _handle(self, cmd) -> None:
        v = self.viewer
        if isinstance(cmd, M.SetView):
            if v is not None:
                v.state.w2c = np.asarray(cmd.w2c, np.float64).reshape(4, 4)
                v.state.fov_y_deg = float(cmd.fov_y_deg)
                v.state.camera = cmd.camera
                self._update_segments()
            self.view_dirty = True
        elif isinstance(cmd, M.SetViewMode):
            if v is not None:
                v.state.mode = cmd.mode if cmd.mode in ("splats", "gt", "error") else "splats"
                v.state.frustums = cmd.frustums
            self.view_dirty = True
        elif isinstance(cmd, M.ResizeViewport):
            if v is not None:
                v.resize(cmd.width, cmd.height)
            self.view_dirty = True
        elif isinstance(cmd, M.RequestFrame):
            self.view_dirty = True
            self.readback_requests += int(cmd.readback)
            if cmd.readback:
                self.readback_tag = max(self.readback_tag, cmd.tag)
        elif isinstance(cmd, M.AttachSurface):
            self._attach(cmd)
        elif isinstance(cmd, M.DetachSurface):
            if v is not None:
                v.detach()
                v.readback_reason = "the window surface was detached"
            self.s_emit_mode()
        elif isinstance(cmd, M.StartTraining):
            self._start_training(cmd)
        elif isinstance(cmd, M.OpenProject):
            self._open_project(cmd)
        elif isinstance(cmd, M.OpenPly):
            self._open_ply(cmd)
        elif isinstance(cmd, M.StartPipeline):
            self._start_pipeline(cmd)
        elif isinstance(cmd, M.Pause):
            if self.training is not None and not self.training.finished and not self.paused:
                self.paused = True
                self.state("paused", f"step {self.training.trainer.state.step}")
        elif isinstance(cmd, M.Resume):
            if self.training is not None and not self.training.finished and self.paused:
                self.paused = False
                self.rate.reset(self.training.trainer.state.step)
                self.state("running", f"step {self.training.trainer.state.step}")
        elif isinstance(cmd, M.Cancel):
            self._cancel(cmd.save)
        elif isinstance(cmd, M.ExportPly):
            self._export(Path(cmd.path))
        elif isinstance(cmd, M.SaveScreenshot):
            self._screenshot(Path(cmd.path))
        elif isinstance(cmd, M.SetProfiling):
            self._set_profiling(cmd.on)
        elif isinstance(cmd, M.Shutdown):
            self.quit = True
            self.save_on_quit = cmd.save
        else:
            self.emit(M.Warning(f"unknown command {type(cmd).__name__}"))

    # --- viewer ------------------------------------------------------------------------------
    def s_emit_mode(self) -> None:
        v = self.viewer
        if v is None:
            return
        mode = "swapchain" if v.presenting else "readback"
        key = (mode, v.readback_reason)
        if key != self.reported_mode:
            self.reported_mode = key
            if mode == "readback":
                log.warning("viewport: readback to QImage (%s)", v.readback_reason)
            else:
                log.info("viewport: presenting into the window (Vulkan swapchain)")
            self.emit(M.ViewerStatus(mode, "" if mode == "swapchain" else v.readback_reason))

    def _attach(self, cmd: M.AttachSurface) -> None:
        v = self.viewer
        if v is None:
            return
        v.resize(cmd.width, cmd.height)
        if os.environ.get("SPIRULA_VIEWER", "").lower() == "readback":
            v.readback_reason = "SPIRULA_VIEWER=readback"
        else:
            reason = v.attach(cmd.platform, tuple(cmd.handle), cmd.width, cmd.height)
            if reason:
                v.readback_reason = reason
        self.view_dirty = True
        self.s_emit_mode()

    def _update_segments(self) -> None:
        from .viewer import frustum_segments

        v = self.viewer
        sc = self.scene
        if v is None:
            return
        cams = sc.dataset.cameras if isinstance(sc, _TrainingScene) else []
        if not cams:
            v.set_segments(np.zeros((0, 6), np.float32), np.zeros(0, np.uint32))
            return
        key = (id(sc), v.state.camera)
        if getattr(self, "_seg_key", None) == key:
            return
        self._seg_key = key
        splits = ["test" if i in set(sc.test_idx) else "train" for i in range(len(cams))]
        _, radius = sc.dataset.scene_extent()
        v.set_segments(*frustum_segments(cams, 0.06 * radius, v.state.camera, splits))

    def _model_frame_due(self) -> bool:
        if not self.model_dirty or self.viewer is None:
            return False
        interval = max(1.0 / 30.0, 3.0 * self.viewer.last_frame_ms / 1000.0)
        return time.perf_counter() - self.last_frame >= interval

    def _view_frame_due(self) -> bool:
        """A frame the user asked for (camera, mode, size). While training, frames take at
        most about half the engine's time: the next one waits as long as the last took."""
        if not (self.view_dirty or self.readback_requests) or self.viewer is None:
            return False
        if not self._training_active():
            return True
        interval = max(1.0 / 60.0, self.viewer.last_frame_ms / 1000.0)
        return time.perf_counter() - self.last_frame >= interval

    def _refine_due(self) -> bool:
        """A full-resolution frame once the view has been still for a moment (the adaptive
        resolution only applies while things move)."""
        return (self.refine_at is not None and time.perf_counter() >= self.refine_at
                and not self._training_active())

    def _maybe_render(self, force_readback: bool = False):
        v = self.viewer
        if v is None or v.state.width <= 0 or v.state.height <= 0:
            return None
        refine = self._refine_due() and not self.view_dirty
        if not (self._view_frame_due() or self._model_frame_due() or force_readback or refine):
            self._emit_viewer_stats()  # the last frames may have come inside the throttle window
            return None
        from .viewer import PresentError

        readback = force_readback or self.readback_requests > 0
        full = refine or force_readback  # screenshots at full resolution
        src = self.scene.source() if self.scene is not None else None
        try:
            pixels = v.render(src, readback=readback, full_res=full)
        except PresentError:
            self.s_emit_mode()
            pixels = v.render(src, readback=True, full_res=full)
        self.view_dirty = self.model_dirty = False
        self.last_frame = time.perf_counter()
        self.refine_at = None if v.last_full_res else self.last_frame + 0.4
        if pixels is not None and (readback or not v.presenting):
            tag = self.readback_tag if readback else 0
            # an unread answer to a tagged request is not overwritten by an ordinary frame
            self.s.preview.put_unless(M.PreviewFrame(v.frames, pixels.shape[1], pixels.shape[0], pixels.tobytes(), tag),
                                      lambda old: old.tag != 0 and tag == 0)
            if readback:
                self.readback_requests, self.readback_tag = 0, 0
        self._emit_viewer_stats()
        return pixels

    def _emit_viewer_stats(self) -> None:
        """ViewerStats at most every STATS_INTERVAL, and once more after the last frame of a
        burst (otherwise the final size and frame count of a resize would never be reported)."""
        v = self.viewer
        if v is None or v.frames == self.stats_frames:
            return
        now = time.perf_counter()
        if now - self.last_stats >= STATS_INTERVAL:
            self.last_stats, self.stats_frames = now, v.frames
            self.emit(M.ViewerStats(v.frames, v.last_frame_ms, v.state.width, v.state.height, v.render_scale))

    def _screenshot(self, path: Path) -> None:
        from PIL import Image

        pixels = self._maybe_render(force_readback=True)
        if pixels is None:
            raise SpirulaError(f"cannot save {path}: the viewport has no size yet")
        bgra = pixels.view(np.uint8).reshape(pixels.shape[0], pixels.shape[1], 4)
        rgb = np.ascontiguousarray(bgra[..., 2::-1])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        Image.fromarray(rgb).save(tmp, format="PNG")
        os.replace(tmp, path)
        self.emit(M.Saved("screenshot", str(path), f"{rgb.shape[1]}x{rgb.shape[0]}"))

    # --- warm-up: compile every kernel before the window shows -----------------------------
    def _warmup(self) -> None:
        from .ingest.dataset import Camera, Dataset
        from .splat.trainer import Trainer
        from .viewer import ViewSource, wait_polling

        rng = np.random.default_rng(0)
        cams = []
        for k, x in enumerate((-0.3, 0.3)):
            w2c = np.eye(4)
            w2c[:3, 3] = (-x, 0.0, 3.0)
            img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
            cams.append(Camera(f"w{k}", Path(f"w{k}.png"), 32, 32, 30.0, 30.0, 16.0, 16.0, w2c, img))
        pts = rng.normal(0, 0.3, (256, 3)).astype(np.float32)
        ds = Dataset(Path("."), cams, pts, rng.integers(0, 256, (256, 3), dtype=np.uint8))
        tr = Trainer(self.gpu, ds, [0, 1], TrainConfig(steps=4, log_interval=2))
        for step in range(2):
            tr.train_step(step)
        tr.drain()
        tr.collect_losses()
        tr.model.densify(1e-9, 0.01, 0.005, 3.0e38, 10_000, seed=1)
        tr.model.reset_opacity(0.01)
        tr.render(0)
        if self.viewer is not None:
            from .viewer import frustum_segments

            v = self.viewer
            v.resize(64, 48)
            v.set_segments(*frustum_segments(cams, 0.2))
            src = ViewSource(tr.model.buf["params"], tr.model.n, 3, 3, tr.cams, cams,
                             lambda i: tr.gt.get(i))
            v.state.camera = 0
            for mode in ("splats", "error"):
                v.state.mode = mode
                v.render(src, readback=True)
            v.state = type(v.state)()
            v.set_segments(np.zeros((0, 6), np.float32), np.zeros(0, np.uint32))
        wait_polling(self.gpu)
        del tr

    # --- jobs --------------------------------------------------------------------------------
    def _refused(self, what: str) -> bool:
        """True, with the warning '<what>: <why>', while a load or a training is under way."""
        busy = self._busy_reason()
        if busy:
            self.emit(M.Warning(f"{what}: {busy}"))
        return bool(busy)

    def _busy_reason(self) -> str | None:
        if self.pending is not None:
            return f"still loading {self.pending[2]}"
        if self.training is not None and not self.training.finished:
            return "training is under way: stop it first"
        return None

    def _start_training(self, cmd: M.StartTraining) -> None:
        if self._refused(f"cannot start training on {cmd.dataset}"):
            return
        self.state("loading", cmd.dataset)
        self.emit(M.StageStarted("load", None, cmd.dataset))
        fut = self.loader.submit(_checked_load, cmd, self.gpu, self.emit)
        self.pending = ("train", fut, cmd)

    def _open_project(self, cmd: M.OpenProject) -> None:
        if self._refused(f"cannot open {cmd.path}"):
            return
        self.state("loading", f"{cmd.path}: reading its checkpoint")
        self.emit(M.StageStarted("load", None, cmd.path))
        self.pending = ("resume", self.loader.submit(_read_project, Path(cmd.path)), cmd)

    def _open_ply(self, cmd: M.OpenPly) -> None:
        from .io.ply_points import open_splats

        if self._refused(f"cannot open {cmd.path}"):
            return
        self.state("loading", cmd.path)
        self.pending = ("ply", self.loader.submit(open_splats, cmd.path, warn=False), cmd)

    def _start_pipeline(self, cmd: M.StartPipeline) -> None:
        """Decode / select or import, SfM and undistortion through engine.pipeline on the
        loader thread (CPU only: the engine thread keeps drawing and listening), then the
        studio's own training on the reconstructed dataset, with the live viewport."""
        import importlib.util

        if importlib.util.find_spec("engine.pipeline") is None:
            self.emit(M.Warning(f"{cmd.source}: videos and photo folders need the reconstruction pipeline "
                                "(engine/pipeline.py), which is coming; open a COLMAP or nerfstudio dataset folder "
                                "or a .ply meanwhile"))
            return
        if self._refused(f"cannot start on {cmd.source}"):
            return
        from .pipeline import PipelineConfig, run_pipeline

        src = Path(cmd.source)
        project = Path(cmd.project) if cmd.project else new_project_dir(src.stem if src.is_file() else src.name,
                                                                        self.s.projects)
        stop = threading.Event()
        self.pipeline_stop = stop
        cfg = PipelineConfig(run=RunConfig(device=self.gpu.backend,
                                           dataset=DatasetConfig(max_size=cmd.max_size, eval_every=cmd.eval_every)))

        def reconstruct():
            return run_pipeline(src, project, cfg, emit=self.emit, should_stop=stop.is_set, until_stage="undistort")

        self.state("loading", f"reconstructing {src.name} -> {project}")
        self.pending = ("pipeline", self.loader.submit(reconstruct), (cmd, project))

    def _check_pending(self) -> None:
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
                self.emit(M.Error(f"reconstruction failed: {type(exc).__name__}: {exc}"))
            self.state("idle" if cancelled else "failed", "reconstruction cancelled" if cancelled else str(exc))
            return
        if exc is not None:
            self.state("failed", str(exc))
            self._fail(exc, _command_path(cmd))
            return
        if kind == "pipeline":
            pcmd, project = cmd
            # the training checkpoints where `spirula run` would: either continues the other's
            self._start_training(M.StartTraining(str(project), str(project / "train"), pcmd.steps, pcmd.max_size,
                                                 pcmd.eval_every, pcmd.eval_interval, pcmd.init_points,
                                                 checkpoint=str(train_checkpoint_path(project)),
                                                 max_gaussians=pcmd.max_gaussians, adam_moments=pcmd.adam_moments,
                                                 strategy=pcmd.strategy, antialias=pcmd.antialias,
                                                 appearance=pcmd.appearance or default_appearance(fut.result()["kind"])))
            return
        try:
            if kind == "train":
                self._begin_training(cmd, fut.result())
            elif kind == "resume":
                self._begin_training(*fut.result())
            else:
                self._begin_ply(cmd, fut.result())
        except Exception as e:
            ends = self._active_training()
            if ends is None:
                self.state("failed", str(e))
            self._fail(e, _command_path(cmd), ends=ends)

    def _set_scene(self, scene: _Scene) -> None:
        if self.scene is not None and self.scene is not scene:
            self.gpu.wait_idle()
            self.gpu.forget_bindings()  # kernels' cached arguments would keep the old scene's buffers
        self.scene = scene
        self._seg_key = None
        if self.viewer is not None:
            self.viewer.state.camera = None
        self._update_segments()
        self.view_dirty = True

    def _begin_training(self, cmd: M.StartTraining, dataset, ckpt: checkpoint.Checkpoint | None = None) -> None:
        from .splat.init import scene_bounds
        from .train_job import check_output_dir

        project = Path(cmd.project) if cmd.project else new_project_dir(Path(cmd.dataset).name, self.s.projects)
        check_output_dir(project)
        t0 = time.perf_counter()
        scene = _TrainingScene(self.gpu, dataset, cmd, project)
        changed = scene.resume(ckpt, self.gpu.adapter) if ckpt is not None else []
        self.training = scene
        self.paused = False
        self._set_scene(scene)
        center, _ = scene_bounds(dataset)
        _, radius = dataset.scene_extent()
        test = set(scene.test_idx)
        infos = tuple(_camera_info(c, "test" if i in test else "train") for i, c in enumerate(dataset.cameras))
        self.emit(M.SceneLoaded("dataset", scene.name, cmd.dataset, scene.trainer.model.n,
                                tuple(float(x) for x in center), float(radius), tuple(float(x) for x in _up_vector(dataset.cameras)),
                                infos, str(project), tuple(dataset.warnings)))
        for w in dataset.warnings:
            self.emit(M.Warning(w))
        self.emit(M.StageFinished("load", time.perf_counter() - t0,
                                  {"images": len(dataset.cameras), "train": len(scene.train_idx), "test": len(scene.test_idx)}))
        tr = scene.trainer
        step = tr.state.step
        if ckpt is None:
            self.emit(M.StageStarted("train", cmd.steps, f"{len(scene.train_idx)} training images, "
                                                         f"{tr.model.n:,} initial Gaussians"))
            self.state("running", f"{scene.name}: {cmd.steps} steps -> {project}")
        else:
            saved = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ckpt.path.stat().st_mtime))
            self.emit(M.TrainingResumed(str(ckpt.path), step, cmd.steps, str(project), saved))
            for c in changed:
                self.emit(M.Warning(f"resuming with a changed setting, {c}: from step {step} the run differs "
                                    "from one without the break"))
            self.emit(M.StageStarted("train", cmd.steps, f"resumed at step {step} from {ckpt.path}, "
                                                         f"{tr.model.n:,} Gaussians"))
            for h in tr.state.history:  # the curves up to the break
                self.emit(M.TrainMetrics(int(h["step"]), float(h["loss"]), int(h["num_gaussians"]), 0.0))
            for e in scene.evals:
                self.emit(M.TrainMetrics(int(e["step"]), float("nan"), tr.model.n, 0.0, psnr=e["psnr"]))
            self.state("running", f"{scene.name}: resumed at step {step} of {cmd.steps} -> {project}")
        self.rate.reset(step)
        self.t_run_start = tr.t_start = time.perf_counter()

    def _begin_ply(self, cmd: M.OpenPly, g) -> None:
        scene = _PlyScene(self.gpu, Path(cmd.path), g)
        self._set_scene(scene)
        means = np.asarray(g.means, np.float64)
        if len(means):
            center = np.median(means, axis=0)
            radius = float(np.percentile(np.linalg.norm(means - center, axis=1), 90)) or 1.0
        else:
            center, radius = np.zeros(3), 1.0
        self.emit(M.SceneLoaded("ply", scene.name, cmd.path, scene.n, tuple(float(x) for x in center), radius,
                                (0.0, -1.0, 0.0)))
        for note in g.notes:  # dropped per reason, SH cut, a point cloud converted (not warned: warn=False)
            self.emit(M.Warning(note))
        self.state("idle", f"viewing {scene.name} ({scene.n:,} Gaussians)")

    def _train_slice(self, budget_s: float = 0.1) -> None:
        """Training steps for about ``budget_s``; every wait polls (see the module docstring)."""
        from .viewer import wait_polling

        sc = self.training
        tr = sc.trainer
        cfg = tr.cfg
        t_end = time.perf_counter() + budget_s
        t_slice = time.perf_counter()
        while tr.state.step < cfg.steps:
            tr.train_step(tr.state.step)
            tr.state.step += 1
            s = tr.state.step
            self.model_dirty = True
            eval_due = cfg.eval_interval and s % cfg.eval_interval == 0 and s < cfg.steps and sc.test_idx
            checkpoint_due = cfg.checkpoint_every and s % cfg.checkpoint_every == 0 and s < cfg.steps
            if eval_due or checkpoint_due:  # both wait for the GPU: report this step's loss first
                wait_polling(self.gpu)
                tr.drain()
            self._log_metrics()  # the losses of retired steps (no wait)
            if eval_due:
                self._evaluate(s)
            if checkpoint_due:
                sc.t_train += time.perf_counter() - t_slice
                t_slice = time.perf_counter()
                self._checkpoint(stopped=False)
            if time.perf_counter() >= t_end or self._view_frame_due() or not self.s.commands.empty():
                break
        wait_polling(self.gpu)
        tr.drain()  # finished by now: reads the last counts, queues overflowed cameras again
        self._log_metrics()
        sc.t_train += time.perf_counter() - t_slice  # wall time of the steps (viewer frames excluded)
        if tr.state.step >= cfg.steps:
            self._finish(stopped=False)

    def _log_metrics(self) -> None:
        """Emit the losses the trainer has read back since the last call (Trainer.collect_losses:
        non-finite ones raise NonFiniteError)."""
        tr = self.training.trainer
        for h in tr.collect_losses():
            s, loss, n = h["step"], h["loss"], h["num_gaussians"]
            rate = self.rate.at(s)
            self.emit(M.TrainMetrics(s, loss, n, rate))
            self.emit(M.StageProgress("train", s, tr.cfg.steps, f"loss {loss:.4f}, {n:,} Gaussians, {rate:.1f} steps/s"))

    def _evaluate(self, step: int) -> dict | None:
        from .splat.evaluate import evaluate
        from .viewer import wait_polling

        sc = self.training
        if not sc.test_idx:
            return None
        wait_polling(self.gpu)
        m = evaluate(sc.trainer, sc.test_idx)
        sc.evals.append({"step": step, "psnr": m["psnr"], "ssim": m["ssim"]})
        self.emit(M.TrainMetrics(step, float("nan"), sc.trainer.model.n, 0.0, psnr=m["psnr"]))
        return m

    def _finish(self, stopped: bool, save: bool = True) -> None:
        sc = self.training
        if sc is None or sc.finished:
            return
        sc.finished = True
        self.paused = False
        try:
            self._finish_training(sc, stopped, save)
        except Exception as exc:
            self._fail(exc, ends=sc)

    def _finish_training(self, sc: "_TrainingScene", stopped: bool, save: bool) -> None:
        tr = sc.trainer
        s = tr.state.step
        tr.state.stopped_early = stopped
        result: dict = {"step": s, "stopped_early": stopped, "project": str(sc.project)}
        saved_ckpt = None
        if stopped and save:  # first: it is what a reopening continues from
            saved_ckpt = self._checkpoint(stopped=True)
            result["checkpoint"] = str(sc.writer.path)
        elif stopped:
            self._flush_checkpoint()  # an earlier checkpoint stays for a reopening
        if save:
            ply = sc.project / "splat.ply"
            count = sc.export(ply)
            sc.saved = True
            result.update(ply=str(ply), num_gaussians=count)
            self.emit(M.Saved("ply", str(ply), f"{count:,} Gaussians, step {s}"))
            if tr.appearance is not None:  # the per-image colour transforms beside the PLY
                tr.appearance.save(sc.project, [c.name for c in sc.dataset.cameras], sc.train_idx)
            final = self._evaluate(s) if not stopped else None
            metrics = {"step": s, "stopped_early": stopped, "num_gaussians": count,
                       "psnr": final and final["psnr"], "ssim": final and final["ssim"], "evaluations": sc.evals,
                       "train_seconds": sc.t_train, "strategy": tr.strategy,
                       "appearance": sc.cfg.train.appearance}
            write_json_atomic(sc.project / "metrics.json", metrics)
            write_json_atomic(sc.project / "train.json", {
                "dataset": sc.path, "device": self.gpu.adapter, "config": asdict(sc.cfg), "strategy": tr.strategy,
                "warnings": sc.dataset.warnings, "history": tr.state.history, "source": "studio"})
            result["psnr"] = metrics["psnr"]
        if not stopped:  # all steps done: the checkpoint goes, as in `spirula run`
            self._flush_checkpoint()
            sc.writer.path.unlink(missing_ok=True)
        self.emit(M.StageFinished("train", sc.t_train, result))
        self.emit(M.Done(result))
        if saved_ckpt is not None:  # last: everything is on disk when the GUI sees it
            self.emit(M.CheckpointSaved(str(sc.writer.path), saved_ckpt, tr.cfg.steps, stopped=True))
        self.state("finished", f"stopped at step {s}" if stopped else f"done: {s} steps")
        self.view_dirty = True

    def _checkpoint(self, stopped: bool) -> int:
        """Checkpoint the training at its current step: the state is copied off the GPU now
        and written on the writer's thread; ``stopped`` waits for the file (and raises its
        error). Scheduled ones say so at once, stopped ones leave it to _finish."""
        sc = self.training
        tr = sc.trainer
        self._flush_checkpoint()
        sc.writer.submit(tr.state.step, checkpoint.snapshot(tr, sc.cfg, sc.ident, self.gpu.adapter,
                                                            sc.checkpoint_extra()))
        if stopped:
            sc.writer.wait()
        else:
            self.emit(M.CheckpointSaved(str(sc.writer.path), tr.state.step, tr.cfg.steps))
        return tr.state.step

    def _flush_checkpoint(self) -> int | None:
        """Wait for a scheduled checkpoint still being written; a failed write is a warning
        (a full disk must not end the run). Returns the step known on disk."""
        sc = self.training
        warning = sc.flush()
        if warning:
            self.emit(M.Warning(warning))
        return sc.writer.saved_step

    def _cancel(self, save: bool) -> None:
        if self.pending is not None:
            if self.pending[0] == "pipeline":
                self.pipeline_stop.set()  # run_pipeline stops at its next check; _check_pending reports
                self.state("stopping", "cancelling the reconstruction")
                return
            self.pending[1].cancel()
            self.pending = None
            self.state("idle", "loading cancelled")
            return
        if self.training is not None and not self.training.finished:
            self.state("stopping", "saving" if save else "")
            self._finish(stopped=True, save=save)

    def _export(self, path: Path) -> None:
        if self.scene is None:
            raise SpirulaError(f"cannot export {path}: open a dataset or a PLY first")
        count = self.scene.export(path)
        self.emit(M.Saved("ply", str(path), f"{count:,} Gaussians"))

    # --- profiler ----------------------------------------------------------------------------
    def _set_profiling(self, on: bool) -> None:
        try:
            from . import profile
        except Exception as exc:  # the profiler is optional for the studio
            self.emit(M.Warning(f"profiler unavailable: {exc}"))
            return
        if on and not self.profiling:
            profile.enable(text=False, at_exit=False)
            self.unsubscribe = profile.subscribe(self.emit, 1.0)
            self.profiling = True
        elif not on and self.profiling:
            if self.unsubscribe:
                self.unsubscribe()
            profile.disable()
            self.profiling = False

    def _vram_tick(self) -> None:
        """A VRAM-only ProfilerSnapshot about once a second while the GPU is busy and the
        per-kernel profiler is off (the profiler sends full snapshots itself)."""
        now = time.perf_counter()
        if self.profiling or now - self.last_vram < VRAM_INTERVAL or self.gpu is None:
            return
        if not (self._training_active() or self.view_dirty or self.last_vram == 0.0):
            return
        self.last_vram = now
        try:
            from . import profile

            data = profile.snapshot(self.gpu)
        except Exception:
            return
        self.emit(M.ProfilerSnapshot(data))

    # --- shutdown ----------------------------------------------------------------------------
    def _shutdown(self) -> None:
        self.pipeline_stop.set()
        if self.training is not None:
            self._finish(stopped=True, save=self.save_on_quit)  # reports its own errors
            self._flush_checkpoint()
        if self.profiling:
            self._set_profiling(False)
        if self.viewer is not None:
            self.viewer.detach()
        try:
            from .viewer import wait_polling

            wait_polling(self.gpu)
        except Exception:
            pass
        self.state("closed")


def _run_config(cmd: M.StartTraining, backend: str) -> RunConfig:
    """The run's settings from the studio's StartTraining."""
    return RunConfig(device=backend, dataset=DatasetConfig(max_size=cmd.max_size, eval_every=cmd.eval_every),
                     train=TrainConfig(steps=cmd.steps, eval_interval=cmd.eval_interval,
                                       init_random_points=cmd.init_points, checkpoint_every=cmd.checkpoint_every,
                                       adam_moments=cmd.adam_moments, antialias=cmd.antialias,
                                       appearance=cmd.appearance or default_appearance("dataset"),
                                       **density_settings(cmd.strategy, cmd.max_gaussians)))


def _checked_load(cmd: M.StartTraining, gpu, emit):
    """The dataset of ``cmd`` (on the loader thread), after the memory preflight
    (engine/preflight.py: refused with the numbers before any image is decoded)."""
    from .ingest import load_dataset
    from .preflight import preflight

    def warn(text: str) -> None:
        emit(M.Warning(text.removeprefix("warning: ")))

    preflight(cmd.dataset, _run_config(cmd, gpu.backend), lambda: gpu, warn)
    return load_dataset(cmd.dataset, cmd.max_size)


def _command_path(cmd) -> str | None:
    """The file or folder a command names (for its errors)."""
    if isinstance(cmd, tuple):  # a pending pipeline: (StartPipeline, project)
        cmd = cmd[0]
    for name in ("path", "dataset", "source"):
        v = getattr(cmd, name, None)
        if v:
            return str(v)
    return None


def _read_project(project: Path):
    """(StartTraining, dataset, checkpoint) to continue ``project``'s studio training (on
    the loader thread: no GPU here)."""
    from .ingest import load_dataset

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
