"""The studio's engine thread: creates the device (and compiles, spirula/engine/studio/warmup.py),
then loops until Shutdown: route the commands that came in to their handlers, see to a
finished load, train a slice, render a frame when one is due, send a VRAM tick.

    handlers   viewport (viewport.py)   view, mode, size, surface, frames, screenshots
               loads (loading.py)       start training, open a project, a PLY or a mesh, reconstruct
               meshing (meshing.py)     the mesh stage of a trained project
               training (training.py)   pause, resume, the slices, checkpoints, the end
               profiling (profiling.py) per-kernel profiling, VRAM snapshots
               editing (editing.py)     the splat edit: select, delete, crop, undo / redo
               rendering (rendering.py) a camera-path video of the splats
               partitioning (partitioning.py) the partition panel's split -> parts -> merge

Cancel, ExportPly and Shutdown are the loop's own. An exception in a handler is an Error
message naming the command's file (a bad command ends no training); one while training
ends that training and says which checkpoint is kept.
"""

from __future__ import annotations

import logging
import os
import queue
import time
from pathlib import Path

from ..errors import SpirulaError
from . import caches
from . import protocol as M
from .editing import Editing
from .loading import Loads, command_path
from .meshing import Meshing
from .partitioning import Partitioning
from .profiling import Profiling
from .rendering import Rendering
from .scenes import Scene, TrainingScene
from .training import Training
from .viewport import Viewport

log = logging.getLogger("spirula.session")


class EngineThread:
    """The body of the engine thread of ``session`` (spirula/engine/studio/session.py)."""

    def __init__(self, session):
        self.s = session
        self.gpu = None
        self.scene: Scene | None = None  # what the viewport shows and ExportPly writes
        self.quit = False
        self.save_on_quit = True
        self.viewport = Viewport(self)
        self.loads = Loads(self)
        self.training = Training(self)
        self.profiling = Profiling(self)
        self.meshing = Meshing(self)
        self.editing = Editing(self)  # the splat edit of a splat file's scene
        self.rendering = Rendering(self)
        self.partitioning = Partitioning(self)
        v, lo, t = self.viewport, self.loads, self.training
        self.routes = {
            M.SetView: v.set_view, M.SetViewMode: v.set_mode, M.ResizeViewport: v.resize,
            M.RequestFrame: v.request_frame, M.AttachSurface: v.attach, M.DetachSurface: v.detach,
            M.SaveScreenshot: v.screenshot, M.SetBounds: v.set_bounds, M.SetPath: v.set_path, M.SetSplit: v.set_split,
            M.StartTraining: lo.start_training, M.ReviewDataset: lo.review, M.OpenProject: lo.open_project,
            M.OpenPly: lo.open_ply, M.ViewProject: lo.view_project,
            M.StartPipeline: lo.start_pipeline, M.ExportMesh: self.meshing.export,
            M.ConfirmBounds: self.meshing.confirm,
            M.RenderVideo: self.rendering.render, M.OpenMesh: lo.open_mesh,
            M.TrainPartition: self.partitioning.train,
            M.Pause: t.pause, M.Resume: t.resume,
            M.SetProfiling: self.profiling.set, M.EditSplats: self.editing.command,
            M.ClearSfmCache: lambda cmd: caches.clear_command(self, cmd),
            M.Cancel: self._cancel, M.ExportPly: self._export, M.Shutdown: self._shutdown_requested,
        }

    # --- messages ----------------------------------------------------------------------------
    def emit(self, msg) -> None:
        self.s.events.put(msg)

    def state(self, state: str, detail: str = "") -> None:
        self.emit(M.JobState(state, detail))

    # --- thread body -------------------------------------------------------------------------
    def run(self) -> None:
        t0 = time.perf_counter()
        try:
            from ..device import get_gpu
            from .polling import install_polling_waits

            self.gpu = get_gpu(self.s.backend)
            install_polling_waits(self.gpu)
            if self.s.with_viewer:
                from .viewer import Viewer

                self.viewport.viewer = Viewer(self.gpu)
            if self.s.warmup:
                from .warmup import warmup

                warmup(self.gpu, self.viewport.viewer,
                       lambda done, total, text: self.emit(M.StageProgress("warmup", done, total, text)))
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
        self.loads.start()
        from .projects import projects_root

        caches.prune_in_background(self, self.s.projects if self.s.projects is not None else projects_root())
        try:
            while not self.quit:
                try:
                    self._iterate()
                except Exception as exc:
                    self.fail(exc, ends=self.training.unfinished())
            self._shutdown()
        finally:
            self.loads.close()
            if self.viewport.viewer is not None:
                try:
                    self.viewport.viewer.detach()
                except Exception:
                    pass

    def _iterate(self) -> None:
        v, training = self.viewport, self.training
        trains = training.running and not training.yields_to_view()
        busy = trains or v.view_frame_due() or v.model_frame_due() or v.refine_due() or v.frame_in_flight()
        idle_wait = 0.01 if (self.loads.pending is not None or v.refine_at is not None) else 0.05
        if training.running and not trains:  # waiting for the camera: the next frame is due within 1/60 s
            idle_wait = 0.002
        self._drain(timeout=0.0 if busy else idle_wait)
        if self.quit:
            return
        self.loads.check()
        if training.running and not training.yields_to_view():  # again: the commands may have paused it
            training.slice()
        v.render()
        self.profiling.vram_tick()

    def _drain(self, timeout: float) -> None:
        """Handle the commands queued (waiting up to ``timeout`` for the first)."""
        first = True
        while True:
            try:
                cmd = self.s.commands.get(timeout=timeout) if (timeout > 0 and first) else self.s.commands.get_nowait()
            except queue.Empty:
                return
            first = False
            try:
                handler = self.routes.get(type(cmd))
                if handler is None:
                    self.emit(M.Warning(f"unknown command {type(cmd).__name__}"))
                else:
                    handler(cmd)
            except Exception as exc:
                self.fail(exc, command_path(cmd))
            if self.quit:
                return

    def fail(self, exc: Exception, path: str | os.PathLike | None = None, ends: TrainingScene | None = None) -> None:
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
            self.training.paused = False
            warning = ends.flush()
            kept = ends.kept()
            from .training import release_project

            release_project(ends)
            text = f"{text.rstrip('.')}. {kept[0].upper()}{kept[1:]}" + (f" ({warning})" if warning else "")
        self.emit(M.Error(text, "" if path is None else str(path)))
        if ends is not None:
            self.state("failed", text)
            self.profiling.follow_training()

    def set_scene(self, scene: Scene) -> None:
        if self.scene is not None and self.scene is not scene:
            self.gpu.wait_idle()
            self.gpu.forget_bindings()  # kernels' cached arguments would keep the old scene's buffers
        self.scene = scene
        self.editing.scene_changed(scene)
        self.viewport.scene_changed()

    # --- the loop's own commands -------------------------------------------------------------
    def _cancel(self, cmd: M.Cancel) -> None:
        if self.meshing.cancel_pending():  # a mesh held at its box
            return
        if not self.loads.cancel():
            self.training.cancel(cmd.save)

    def _export(self, cmd: M.ExportPly) -> None:
        path = Path(cmd.path)
        if self.scene is None:
            raise SpirulaError(f"cannot export {path}: open a dataset or a PLY first")
        count = self.scene.export(path, cmd.format)
        self.emit(M.Saved(cmd.format, str(path), f"{count:,} Gaussians"))

    def _shutdown_requested(self, cmd: M.Shutdown) -> None:
        self.quit = True
        self.save_on_quit = cmd.save

    def _shutdown(self) -> None:
        self.loads.pipeline_stop.set()
        self.meshing.cancel_pending()
        if self.training.scene is not None:
            self.training.finish(stopped=True, save=self.save_on_quit)  # reports its own errors
            self.training.flush_checkpoint()
        if self.profiling.on:
            self.profiling.switch(False)
        if self.viewport.viewer is not None:
            self.viewport.viewer.detach()
        try:
            from .polling import wait_polling

            wait_polling(self.gpu)
        except Exception:
            pass
        self.state("closed")
