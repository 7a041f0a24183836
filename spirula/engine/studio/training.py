"""The studio's training on the engine thread: the same step schedule as `spirula train`
(:class:`spirula.engine.splat.schedule.TrainingRun`), driven in slices of about 0.1 s that yield
when a viewer frame or a command is due; pause and resume; its evaluations, checkpoints
and the end of the run (PLY, metrics.json, train.json in the project folder).

Every wait for the GPU polls (spirula/engine/studio/viewer.py wait_polling), so the window's
thread keeps running while the GPU (or the CPU doing software Vulkan) works."""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path

from .. import checkpoint
from ..splat.schedule import Progress, TrainingRun
from . import protocol as M
from .projects import new_project_dir
from .review import camera_infos
from .scenes import TrainingScene, up_vector


FRAME_BUDGET_MS = 1000.0 / 60.0  # a moving camera's frame interval
# the share of it a step and a frame may take for training to go on beside a moving camera: the
# loop's own time (the slice's wait, polling, the frame's submission) takes the rest (on an H100
# a 13.4 ms step at 6M and a 1.2 ms frame, inside the whole budget, gave 35 fps)
TRAIN_SHARE = 0.75
TRAIN_EVERY_S = 0.25  # while it waits for the camera, training still gets a slice this often
# a slow device (software Vulkan): when a step and a frame together exceed this, no step runs while
# the camera moves, so an input waits at most for the frame under way and its own (issue 50: the
# view's input latency under 150 ms while training); training goes on once the camera stops
INPUT_LATENCY_MS = 150.0


class Training:
    """The training run of the studio (``scene``: the TrainingScene, or None)."""

    def __init__(self, engine):
        self.e = engine
        self.scene: TrainingScene | None = None
        self.paused = False
        self.step_ms: float | None = None  # a training slice's wall time per step (running mean)
        self.slice_ended = float("-inf")  # perf_counter() at the end of the last slice
        # SPIRULA_TRAIN_YIELD=0: train on while the camera moves, whatever the frame rate
        self.yield_to_camera = os.environ.get("SPIRULA_TRAIN_YIELD", "1") != "0"

    def yields_to_view(self) -> bool:
        """While the user moves the camera, training waits when one step and one frame would
        not fit in TRAIN_SHARE of 1/60 s (a large model's step: 6M Gaussians) but a frame
        alone does, so the view keeps 60 fps; it still gets a slice every TRAIN_EVERY_S (a
        long drag does not stop it), and goes on MOVING_HOLD_S (spirula/engine/studio/viewport.py)
        after the camera stops."""
        if self._latency_first():
            return True
        if not self._camera_first() or time.perf_counter() - self.slice_ended >= TRAIN_EVERY_S:
            return False
        return self.step_ms + self.e.viewport.viewer.last_frame_ms > TRAIN_SHARE * FRAME_BUDGET_MS

    def _latency_first(self) -> bool:
        """The camera moves on a slow device: a step and a frame would exceed INPUT_LATENCY_MS,
        so no step runs until it stops (MOVING_HOLD_S after its last change)."""
        v = self.e.viewport
        return (self.yield_to_camera and self.step_ms is not None and v.viewer is not None and v.camera_moving()
                and self.step_ms + v.viewer.last_frame_ms > INPUT_LATENCY_MS)

    def steps_beside_frame(self) -> int | None:
        """While the camera moves, the steps a slice may record before the next frame (at
        least 1; None: no limit). Steps are recorded ahead of the GPU, so the slice's own
        clock cannot tell when they overrun the frame: their count is bounded instead."""
        if not self._camera_first():
            return None
        room = TRAIN_SHARE * FRAME_BUDGET_MS - self.e.viewport.viewer.last_frame_ms
        return max(1, int(room // max(self.step_ms, 1e-3)))

    def steps_in_slice(self, budget_s: float) -> int | None:
        """The most steps a slice of ``budget_s`` seconds may record (None: as its clock
        allows). Steps are recorded ahead of the GPU, so the slice's clock does not see them
        run: beside a moving camera the frame bounds them (:meth:`steps_beside_frame`), and a
        step longer than the whole budget (a slow device: software Vulkan's 2 s) makes it one,
        so the first camera move of a drag waits for the step under way, not for every step
        recorded behind it."""
        most = self.steps_beside_frame()
        if most is None and self.step_ms is not None and self.step_ms > 1000.0 * budget_s:
            return 1
        return most

    def _camera_first(self) -> bool:
        """The moving camera's frames come before training: the setting is on, a step has been
        timed, the camera moves, and a frame alone fits in its budget (software Vulkan's frames
        do not: waiting would buy no frame rate, so training goes on as if the view were still)."""
        v = self.e.viewport
        return (self.yield_to_camera and self.step_ms is not None and v.viewer is not None and v.camera_moving()
                and v.viewer.last_frame_ms <= TRAIN_SHARE * FRAME_BUDGET_MS)

    def unfinished(self) -> TrainingScene | None:
        """The training scene while its run has not ended (paused or not), else None."""
        t = self.scene
        return t if t is not None and not t.finished else None

    @property
    def running(self) -> bool:
        """A run is under way and not paused: slices are due."""
        return self.unfinished() is not None and not self.paused

    # --- commands ----------------------------------------------------------------------------
    def pause(self, cmd: M.Pause) -> None:
        if self.running:
            self.paused = True
            self.e.state("paused", f"step {self.scene.trainer.state.step}")

    def resume(self, cmd: M.Resume) -> None:
        if self.unfinished() is not None and self.paused:
            self.paused = False
            step = self.scene.trainer.state.step
            self.scene.run.rate.reset(step)
            self.e.state("running", f"step {step}")

    def cancel(self, save: bool) -> None:
        if self.unfinished() is not None:
            self.e.state("stopping", "saving" if save else "")
            self.finish(stopped=True, save=save)

    # --- the run -----------------------------------------------------------------------------
    def begin(self, cmd: M.StartTraining, dataset, ckpt: checkpoint.Checkpoint | None = None,
              split: tuple | None = None) -> None:
        """Train ``dataset`` as ``cmd`` says (continuing from ``ckpt`` when given; ``split``:
        (train_idx, test_idx) of the training job's loading, spirula/engine/studio/loading.py)."""
        from ..jobs.train import check_output_dir
        from ..splat.init import scene_bounds
        from .polling import wait_polling

        e = self.e
        project = Path(cmd.project) if cmd.project else new_project_dir(Path(cmd.dataset).name, e.s.projects)
        check_output_dir(project)
        t0 = time.perf_counter()
        # one writer per project (spirula/engine/jobs/lock.py): held until the run ends (finish, or fail)
        lock = acquire_project(project, "spirula studio (training)", on_note=lambda t: e.emit(M.Warning(t)))
        try:
            scene = TrainingScene(e.gpu, dataset, cmd, project, split)
            changed = scene.resume(ckpt, e.gpu.adapter) if ckpt is not None else []
        except BaseException:
            lock.release()
            raise
        scene.project_lock = lock
        scene.announced_step = scene.writer.saved_step  # the checkpoint resumed from is no news
        if ckpt is None:  # a fresh run (Restart of a project): an older checkpoint there is not this run's
            checkpoint.remove(scene.writer.path)
        self.scene = scene
        self.paused = False
        self.step_ms, self.slice_ended = None, float("-inf")  # this model's steps are timed afresh
        e.set_scene(scene)
        from .framing import camera_centers, framing
        center, _ = scene_bounds(dataset)
        _, radius = dataset.scene_extent()
        e.emit(M.SceneLoaded("dataset", scene.name, cmd.dataset, scene.trainer.model.n,
                             tuple(float(x) for x in center), float(radius),
                             tuple(float(x) for x in up_vector(dataset.cameras)),
                             camera_infos(dataset, scene.train_idx, scene.test_idx), str(project),
                             tuple(dataset.warnings), scene.trainer.cfg.sh_degree,
                             **framing(dataset.points, center, radius, camera_centers(dataset.cameras))))
        for w in dataset.warnings:
            e.emit(M.Warning(w))
        e.emit(M.StageFinished("load", time.perf_counter() - t0,
                               {"images": len(dataset.cameras), "train": len(scene.train_idx),
                                "test": len(scene.test_idx)}))
        tr = scene.trainer
        step = tr.state.step
        steps = scene.cfg.train.steps
        if ckpt is None:
            scene.job.score_start()  # the first render's held-out PSNR, as `spirula train` (metrics.json)
            e.emit(M.StageStarted("train", steps, f"{len(scene.train_idx)} training images, "
                                                      f"{tr.model.n:,} initial Gaussians"))
            e.state("running", f"{scene.name}: {steps} steps -> {project}")
        else:
            saved = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ckpt.path.stat().st_mtime))
            e.emit(M.TrainingResumed(str(ckpt.path), step, steps, str(project), saved))
            for c in changed:
                e.emit(M.Warning(f"resuming with a changed setting, {c}: from step {step} the run differs "
                                 "from one without the break"))
            e.emit(M.StageStarted("train", steps, f"resumed at step {step} from {ckpt.path}, "
                                                      f"{tr.model.n:,} Gaussians"))
            for h in tr.state.history:  # the curves up to the break
                e.emit(M.TrainMetrics(int(h["step"]), float(h["loss"]), int(h["num_gaussians"]), 0.0))
            for ev in scene.evals:
                e.emit(M.TrainMetrics(int(ev["step"]), float("nan"), tr.model.n, 0.0, psnr=ev["psnr"]))
            e.state("running", f"{scene.name}: resumed at step {step} of {steps} -> {project}")
        e.profiling.follow_training()
        # the one schedule; the studio's hooks: its messages, its checkpoints, polling waits
        scene.run = TrainingRun(tr, on_progress=self._progress, on_eval=self.evaluate if scene.test_idx else None,
                                on_checkpoint=self._scheduled_checkpoint, wait=lambda: wait_polling(e.gpu))

    def slice(self, budget_s: float = 0.1) -> None:
        """Training steps for about ``budget_s``, until a viewer frame or a command is due."""
        e, sc = self.e, self.scene
        t_end = time.perf_counter() + budget_s
        sc.t_slice = time.perf_counter()
        before = sc.trainer.state.step
        most = self.steps_in_slice(budget_s)

        def pause() -> bool:
            return (time.perf_counter() >= t_end or e.viewport.view_frame_due() or not e.s.commands.empty()
                    or (most is not None and sc.trainer.state.step - before >= most))

        try:
            sc.run.advance(pause=pause)
        finally:
            if sc.trainer.state.step != before:
                e.viewport.model_dirty = True
        sc.run.settle()  # finished by now: reads the last counts, queues overflowed cameras again
        elapsed = time.perf_counter() - sc.t_slice
        sc.t_train += elapsed  # wall time of the steps (viewer frames excluded)
        steps = sc.trainer.state.step - before
        if steps > 0:
            ms = 1000.0 * elapsed / steps
            self.step_ms = ms if self.step_ms is None else 0.7 * self.step_ms + 0.3 * ms
        self.slice_ended = time.perf_counter()
        if sc.run.finished:
            self.finish(stopped=False)

    def _progress(self, p: Progress) -> None:
        if not self.scene.writer.busy():  # a scheduled checkpoint now on disk is announced
            self.flush_checkpoint()
        self.e.emit(M.TrainMetrics(p.step, p.loss, p.num_gaussians, p.steps_per_sec))
        self.e.emit(M.StageProgress("train", p.step, p.steps, f"loss {p.loss:.4f}, {p.num_gaussians:,} Gaussians, "
                                                              f"{p.steps_per_sec:.1f} steps/s"))

    def evaluate(self, step: int) -> dict | None:
        sc = self.scene
        if not sc.test_idx:
            return None
        m = sc.job.evaluate(step)
        self.e.emit(M.TrainMetrics(step, float("nan"), sc.trainer.model.n, 0.0, psnr=m["psnr"]))
        return m

    def _scheduled_checkpoint(self, step: int) -> None:
        sc = self.scene
        sc.t_train += time.perf_counter() - sc.t_slice  # the checkpoint records the time so far
        sc.t_slice = time.perf_counter()
        self.checkpoint(stopped=False)

    # --- the end -----------------------------------------------------------------------------
    def finish(self, stopped: bool, save: bool = True) -> None:
        sc = self.scene
        if sc is None or sc.finished:
            return
        sc.finished = True
        self.paused = False
        try:
            self._finish(sc, stopped, save)
        except Exception as exc:
            self.e.fail(exc, ends=sc)
        finally:
            release_project(sc)

    def _finish(self, sc: TrainingScene, stopped: bool, save: bool) -> None:
        e = self.e
        tr = sc.trainer
        s = tr.state.step
        tr.state.stopped_early = stopped
        result: dict = {"step": s, "stopped_early": stopped, "project": str(sc.project)}
        saved_ckpt = None
        if stopped and save:  # first: it is what a reopening continues from
            saved_ckpt = self.checkpoint(stopped=True)
            result["checkpoint"] = str(sc.writer.path)
        elif stopped:
            self.flush_checkpoint()  # an earlier checkpoint stays for a reopening
        if save:
            # the training job's end, as `spirula train`'s (spirula/engine/jobs/train.py TrainingJob.finish):
            # the PLY, the appearance, the one writer of metrics.json and train.json; a stopped
            # run is not scored (its evaluation would hold up the stop)
            ply = sc.project / "splat.ply"
            sc.project.mkdir(parents=True, exist_ok=True)
            count, final, metrics = sc.job.finish(sc.project, sc.t_train, sc.t_session,
                                                  {"dataset": sc.path, "device": e.gpu.adapter, "source": "studio"},
                                                  score=not stopped, excluded=tuple(sc.cmd.excluded))
            sc.saved = True
            result.update(ply=str(ply), num_gaussians=count)
            e.emit(M.Saved("ply", str(ply), f"{count:,} Gaussians, step {s}"))
            if final:
                sc.evals.append({"step": s, "psnr": final["psnr"], "ssim": final["ssim"]})
                e.emit(M.TrainMetrics(s, float("nan"), tr.model.n, 0.0, psnr=final["psnr"]))
            result["psnr"] = metrics["psnr"]
        if not stopped:  # all steps done: the checkpoint goes, as in `spirula run`
            self.flush_checkpoint()
            checkpoint.remove(sc.writer.path)
        release_project(sc)  # everything is written: another writer may come
        e.emit(M.StageFinished("train", sc.t_train, result))
        e.emit(M.Done(result))
        if saved_ckpt is not None:  # last: everything is on disk when the GUI sees it
            e.emit(M.CheckpointSaved(str(sc.writer.path), saved_ckpt, tr.cfg.steps, stopped=True))
        e.state("finished", f"stopped at step {s}" if stopped else f"done: {s} steps")
        e.profiling.follow_training()
        e.viewport.view_dirty = True

    # --- checkpoints -------------------------------------------------------------------------
    def checkpoint(self, stopped: bool) -> int:
        """Checkpoint the training at its current step: the state is copied off the GPU now
        and written on the writer's thread; ``stopped`` waits for the file (and raises its
        error). Scheduled ones are announced (CheckpointSaved) once on disk
        (:meth:`flush_checkpoint`), stopped ones leave it to finish."""
        sc = self.scene
        tr = sc.trainer
        self.flush_checkpoint()
        sc.job.checkpoint(tr.state.step, sc.t_train, {"studio": asdict(sc.cmd)})
        if stopped:
            sc.writer.wait()
            sc.announced_step = sc.writer.saved_step  # finish announces it, last
        return tr.state.step

    def flush_checkpoint(self) -> int | None:
        """Wait for a scheduled checkpoint still being written; a failed write is a warning
        (a full disk must not end the run). Returns the step known on disk."""
        sc = self.scene
        warning = sc.flush()
        if warning:
            self.e.emit(M.Warning(warning))
        saved = sc.writer.saved_step
        if saved is not None and saved != getattr(sc, "announced_step", None):
            sc.announced_step = saved
            self.e.emit(M.CheckpointSaved(str(sc.writer.path), saved, sc.trainer.cfg.steps))
        return saved


def acquire_project(project: Path, command: str, on_note=None):
    """The project's write lock (spirula/engine/jobs/lock.py; ProjectBusyError when another
    process writes it)."""
    from ..jobs.lock import acquire

    project = Path(project)
    if project.name == "train" and (project.parent / "run.json").is_file():
        project = project.parent  # the train/ of a `spirula run` project: the run's writer is the whole project's
    return acquire(project, command, on_note)


def release_project(scene) -> None:
    """Give back the write lock a training scene holds (none: nothing to do)."""
    lock = getattr(scene, "project_lock", None)
    if lock is not None:
        scene.project_lock = None
        lock.release()
