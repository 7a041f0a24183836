"""`spirula train`: dataset -> GPU training -> held-out evaluation -> 3DGS PLY, in a
project folder:

    <project>/splat.ply        the trained Gaussians (standard 3DGS PLY)
    <project>/appearance.json  with --appearance exposure|affine|bilagrid: each training image's learned colour
                               transform (+ appearance.npy for the grid; spirula/engine/splat/appearance.py)
    <project>/metrics.json     held-out PSNR / SSIM (final and every --eval-interval steps)
    <project>/eval/            held-out renders beside their ground truth (PNG)
    <project>/train.json       settings, dataset notes, loss curve, timings
    <project>/checkpoints/train.npz  the training state every --checkpoint-every steps and at the end
                               (spirula/engine/checkpoint.py; the one before it in train.prev.npz, used when the
                               newest is damaged); --resume continues from it. The project's one path
                               (spirula/engine/jobs/project_layout.py checkpoint_path); an older project's
                               <project>/checkpoint.npz is moved there when read

Nothing is lost on the way: a NaN/Inf gradient (spirula/engine/splat/guard.py) or running out of
device memory stops the run with an error that says which checkpoint is kept; no PLY with
non-finite values is ever written (such rows are dropped, with a count).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import numpy as np

from .. import checkpoint
from ..config import MCMC_MIN_STEPS, RunConfig
from ..device import Gpu, get_gpu
from ..errors import DeviceMemoryError, NonFiniteError, SpirulaError
from ..fileio import write_error, write_json_atomic
from ..ingest import load_dataset
from ..ingest.load import undistortion_notes
from ..io.ply import write_ply
from ..preflight import preflight
from ..splat.antialias import bake_smoothing_filter
from ..splat.evaluate import evaluate
from ..splat.param_layout import unpack
from ..splat.schedule import Progress
from ..splat.trainer import Trainer
from .project_layout import adopt_checkpoint

log = logging.getLogger("spirula.train")


def check_output_dir(out_dir: Path) -> None:
    """Create ``out_dir`` or fail before any work if it cannot be written."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpirulaError(f"cannot create the output folder {out_dir}: {e.strerror}") from e
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise SpirulaError(f"the output folder {out_dir} is not writable")


def export_ply(trainer: Trainer, path: Path, on_message: Callable[[str], None] | None = None,
               fmt: str = "ply") -> int:
    """Write the current Gaussians as a 3DGS PLY (atomic; or another splat format ``fmt`` of
    spirula/engine/io/formats.py: spz, sog, compressed-ply, splat); returns the count written.
    Rows with a NaN/Inf value are dropped (said through ``on_message``); NonFiniteError
    when no row is finite. An anti-aliased training's 3D smoothing filter is baked in
    (spirula/engine/splat/antialias.py bake_smoothing_filter: scales sqrt(s^2 + f), opacities
    times the filter's factor), so any 3DGS viewer renders the filtered Gaussians trained;
    the 2D Mip filter is the renderer's (gsplat: rasterize_mode="antialiased"), classic
    renderers draw the same Gaussians without it. With per-image appearance, the transforms'
    mean is first moved into the colours (Trainer.recentre_appearance), so the file shows
    the mean training appearance."""
    trainer.recentre_appearance()
    rows = trainer.model.rows()
    if trainer.filter is not None:
        rows = bake_smoothing_filter(rows, trainer.filter.read())
    finite = np.isfinite(rows).all(axis=1)
    dropped = int(len(rows) - finite.sum())
    if dropped:
        if dropped == len(rows):
            raise NonFiniteError(f"every one of the {dropped} Gaussians has NaN/Inf values: {path} not written")
        rows = rows[finite]
        (on_message or log.warning)(f"warning: {dropped} Gaussians with NaN/Inf values dropped from {path}")
    try:
        if fmt == "ply":
            write_ply(path, unpack(rows, trainer.cfg.sh_degree))
        else:
            from ..io.formats import write_any
            from ..io.splat_file import as_gaussians

            write_any(path, as_gaussians(unpack(rows, trainer.cfg.sh_degree)), fmt)
    except OSError as e:  # full disk, read-only, permission: one line naming the file
        raise write_error(path, "the trained model", e) from e
    return len(rows)


def write_results(out_dir: Path, trainer: Trainer, dataset, cfg: RunConfig, test_idx, scored, evals: list,
                  initial_psnr: float | None, train_seconds: float, seconds_per_step: float,
                  resumed_from: int | None, count: int, about: dict, evaluate_fn=evaluate,
                  excluded: tuple = (), extra: dict | None = None) -> tuple[dict | None, dict]:
    """The end of a training, whoever drove it (`spirula train`, `spirula run`, the studio):
    the held-out evaluation of ``scored`` (renders into <out_dir>/eval/) and the depth-normal
    consistency, then <out_dir>/metrics.json and train.json, the one writer of both. ``about``:
    train.json's keys of the driver (dataset, device, load_seconds, source); ``excluded``: names
    of images neither trained on nor held out (the studio's split). Returns (the final
    evaluation or None, the metrics written)."""
    state = trainer.state
    final = evaluate_fn(trainer, scored, out_dir / "eval") if scored else None
    # held-out depth-normal disagreement (0: the depth map's normals are the rendered ones):
    # what the geometry phase buys; measured for runs without it on request
    consistency = multiview = None
    if scored and (cfg.train.geometry or os.environ.get("SPIRULA_EVAL_GEOMETRY") == "1"):
        consistency = float(np.mean([trainer.depth_normal_consistency(i) for i in scored]))
        agree = [v for v in (trainer.multiview_consistency(i) for i in scored) if v is not None]
        multiview = float(np.mean(agree)) if agree else None
    metrics = {
        "step": state.step, "stopped_early": state.stopped_early, "num_gaussians": count,
        "psnr": final and final["psnr"], "ssim": final and final["ssim"],
        "initial_psnr": initial_psnr, "normal_consistency": consistency,
        # held-out views' share of opaque pixels within 1 px of their nearest training view's surface
        "multiview_consistency": multiview, "views": final and final["views"],
        "held_out": [dataset.cameras[i].name for i in test_idx], "excluded": list(excluded),
        "evaluations": evals + ([{"step": state.step, "psnr": final["psnr"], "ssim": final["ssim"]}] if final else []),
        "train_seconds": train_seconds,
        "sec_per_1k_steps": 1000 * seconds_per_step,
        "resumed_from_step": resumed_from,
        "strategy": trainer.strategy, "antialias": cfg.train.antialias,
        # held-out views are scored with the identity appearance (spirula/engine/splat/evaluate.py)
        "appearance": cfg.train.appearance,
        # masks in force (spirula/engine/splat/mask_targets.py); with "ignore", the held-out PSNR over kept pixels
        "masks": getattr(trainer, "masks", "off"), "psnr_kept": final and final.get("psnr_kept"),
        **(extra or {}),
    }
    write_json_atomic(out_dir / "metrics.json", metrics)
    write_json_atomic(out_dir / "train.json", {
        **{k: v for k, v in about.items() if k != "source"}, "config": asdict(cfg), "strategy": trainer.strategy,
        "warnings": dataset.warnings + trainer.warnings, "undistortion": dataset.undistortion,
        "history": state.history, **({"source": about["source"]} if "source" in about else {})})
    return final, metrics


class TrainingJob:
    """One training run's state and outputs, whoever drives its steps (`spirula train` /
    `spirula run` in one loop, the studio in slices on its engine thread, both through the one
    step schedule of spirula/engine/splat/schedule.py): the Trainer, the checkpoint writer, the
    held-out evaluations, the first render's PSNR; at the end the PLY, the per-image
    appearance and metrics.json / train.json (:func:`write_results`).

    ``scored``: the held-out views evaluated (``test_idx``, or none when the caller scores
    elsewhere); ``wait()``: called before each wait for the GPU (the studio polls there);
    ``writer``: the checkpoint writer (a new one for ``ckpt_path`` by default)."""

    def __init__(self, gpu: Gpu, dataset, train_idx, test_idx, cfg: RunConfig, ckpt_path: Path,
                 score_held_out: bool = True, wait: Callable[[], None] | None = None,
                 writer: checkpoint.BackgroundWriter | None = None):
        self.gpu, self.dataset, self.cfg = gpu, dataset, cfg
        self.train_idx, self.test_idx = list(train_idx), list(test_idx)
        self.scored = self.test_idx if score_held_out else []  # held out either way
        self.wait = wait or (lambda: None)
        self.writer = writer or checkpoint.BackgroundWriter(ckpt_path)  # its saved_step: the checkpoint on disk
        self.trainer = Trainer(gpu, dataset, self.train_idx, cfg.train)
        self.ident = checkpoint.dataset_identity(dataset, self.train_idx)
        self.evals: list[dict] = []
        self.initial_psnr: float | None = None
        self.seconds_before = 0.0            # training time of the sessions before a resume
        self.resumed_from: int | None = None
        self.start_step = 0

    def fits(self, ckpt: checkpoint.Checkpoint) -> tuple[list[str], list[str]]:
        """(blocking, changed) of resuming ``ckpt`` (spirula/engine/checkpoint.py compare)."""
        return checkpoint.compare(ckpt, self.cfg, self.ident, self.gpu.adapter)

    def resume(self, ckpt: checkpoint.Checkpoint) -> None:
        """Continue from ``ckpt`` (one that fits): its state, evaluations and times."""
        checkpoint.restore(self.trainer, ckpt)
        self.writer.resumed(ckpt)
        self.evals = list(ckpt.extra.get("evaluations", []))
        self.initial_psnr = ckpt.extra.get("initial_psnr")
        self.seconds_before = float(ckpt.extra.get("train_seconds", 0.0))
        self.resumed_from = self.start_step = ckpt.step

    def score_start(self) -> None:
        """The held-out PSNR of the first render (a fresh run's, before its first step)."""
        if self.scored:
            self.wait()
            self.initial_psnr = evaluate(self.trainer, self.scored)["psnr"]

    def evaluate(self, step: int) -> dict:
        """Score the held-out views now (an evaluation of the schedule), kept for metrics.json."""
        self.wait()
        m = evaluate(self.trainer, self.scored)
        self.evals.append({"step": step, "psnr": m["psnr"], "ssim": m["ssim"]})
        return m

    def checkpoint_extra(self, train_seconds: float, more: dict | None = None) -> dict:
        return {"evaluations": self.evals, "initial_psnr": self.initial_psnr, "train_seconds": train_seconds,
                **(more or {})}

    def checkpoint(self, step: int, train_seconds: float, more: dict | None = None) -> None:
        """Checkpoint the state of ``step``: copied off the GPU now, written on the writer's
        thread (``more``: the driver's keys beside the job's, e.g. the studio's command)."""
        self.writer.submit(step, checkpoint.snapshot(self.trainer, self.cfg, self.ident, self.gpu.adapter,
                                                     self.checkpoint_extra(train_seconds, more)))

    def finish(self, out_dir: Path, train_seconds: float, session_seconds: float, about: dict, score: bool = True,
               excluded: tuple = (), on_message: Callable[[str], None] | None = None,
               extra: dict | None = None) -> tuple[int, dict | None, dict]:
        """The end: <out_dir>/splat.ply, the per-image appearance beside it, the held-out
        evaluation (``score``) and metrics.json / train.json. Returns (Gaussians written, the
        final evaluation or None, the metrics)."""
        tr = self.trainer
        self.wait()
        count = export_ply(tr, Path(out_dir) / "splat.ply", on_message)
        if tr.appearance is not None:
            tr.appearance.save(out_dir, tr.appearance_names, tr.trained_slots())

        def scoring(trainer, idx, out=None):
            self.wait()
            return evaluate(trainer, idx, out)

        final, metrics = write_results(Path(out_dir), tr, self.dataset, self.cfg, self.test_idx,
                                       self.scored if score else [], list(self.evals), self.initial_psnr,
                                       train_seconds, session_seconds / max(tr.state.step - self.start_step, 1),
                                       self.resumed_from, count, about, scoring, excluded, extra)
        return count, final, metrics


def training_split(dataset, eval_every: int, held_out=(), excluded=()) -> tuple[list[int], list[int], str | None]:
    """(train, test, note) of a training, whoever drives it, by image name: ``held_out`` /
    ``excluded`` when given (the studio's Dataset panel), else the dataset's every-k-th rule
    (Dataset.holdout, `spirula train --eval-every`). DatasetError names a name the dataset
    lacks and a split that leaves nothing to train on."""
    from ..errors import DatasetError

    names = [c.name for c in dataset.cameras]
    unknown = sorted((set(held_out) | set(excluded)) - set(names))
    if unknown:
        raise DatasetError(f"{dataset.root}: no image named {', '.join(unknown[:3])} to hold out or exclude")
    if not held_out and not excluded:
        return dataset.holdout(eval_every)
    out, test = set(excluded), set(held_out) - set(excluded)
    train = [i for i, n in enumerate(names) if n not in out and n not in test]
    if not train:
        raise DatasetError(f"{dataset.root}: every image is held out or excluded: nothing is left to train on")
    return train, [i for i, n in enumerate(names) if n in test], None


def load_training_data(dataset_path: Path, cfg: RunConfig, gpu_of: Callable[[], Gpu],
                       on_message: Callable[[str], None], held_out=(), excluded=(), cached=None):
    """The one loading of a training's data, whoever drives it (`spirula train`, `spirula
    run`, partition parts, the studio's Start and Resume): the memory preflight
    (spirula/engine/preflight.py: refused with the numbers before any image is decoded; its lines
    through ``on_message``), the dataset at ``cfg.dataset.max_size`` (``cached``: one already
    loaded at that size, the studio's reviewed one) and its split (:func:`training_split`;
    its note joins ``dataset.warnings``). Returns (gpu, dataset, train_idx, test_idx)."""
    gpu = preflight(dataset_path, cfg, gpu_of, on_message)
    dataset = cached if cached is not None else load_dataset(dataset_path, cfg.dataset.max_size, masks=cfg.dataset.masks,
                                                             wide_lens=cfg.dataset.wide_lens,
                                                             face_size=cfg.dataset.face_size)
    train_idx, test_idx, note = training_split(dataset, cfg.dataset.eval_every, tuple(held_out), tuple(excluded))
    if note and note not in dataset.warnings:
        dataset.warnings.append(note)
    return gpu, dataset, train_idx, test_idx


RESUME = ("never", "auto", "require")
# what a `spirula train --resume` refused for its checkpoint does next
AFRESH = "rerun without --resume to train afresh (the checkpoint is then replaced)"


def run_training(dataset_path: Path, out_dir: Path, cfg: RunConfig,
                 on_progress: Callable[[Progress], None] | None = None,
                 on_message: Callable[[str], None] = log.info,
                 on_profile: Callable | None = None, should_stop: Callable[[], bool] | None = None,
                 resume: str = "never", checkpoint_path: Path | None = None, keep_checkpoint: bool = True,
                 score_held_out: bool = True) -> dict:
    """``on_profile`` receives spirula.engine.messages.ProfilerSnapshot about once a second while
    training, when profiling is on (SPIRULA_PROFILE=1, --profile, spirula.engine.profile.enable).

    Checkpoints go to ``checkpoint_path`` (default: the project's one path,
    spirula/engine/jobs/project_layout.py checkpoint_path, a checkpoint of an older layout moved there first)
    every ``cfg.train.checkpoint_every`` steps, at the end, and when ``should_stop`` stops the run.
    ``resume``: "never" starts over (an earlier checkpoint is replaced at the first save),
    "require" continues from the checkpoint or raises CheckpointError, "auto" continues
    when the checkpoint fits this run and starts over (saying why) otherwise.
    ``keep_checkpoint=False`` deletes it once the run has finished all its steps.
    ``score_held_out=False``: the held-out views stay out of training but are not scored (no
    psnr in metrics.json; a caller that scores the exported PLY itself, e.g. the partition
    merge's fine-tune)."""
    from .. import profile

    if resume not in RESUME:
        raise ValueError(f"resume must be one of {RESUME}, got {resume!r}")
    unsubscribe = profile.subscribe(on_profile) if on_profile is not None else None
    made = not Path(out_dir).exists()
    try:
        return _run_training(dataset_path, out_dir, cfg, on_progress, on_message, should_stop, resume,
                             checkpoint_path, keep_checkpoint, score_held_out)
    except BaseException:
        if made:
            _remove_if_empty(Path(out_dir))  # a run that failed before writing anything leaves no folder
        raise
    finally:
        if unsubscribe is not None:
            unsubscribe()


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()  # fails (and keeps it) when anything is inside
    except OSError:
        pass


def _run_training(dataset_path: Path, out_dir: Path, cfg: RunConfig, on_progress, on_message, should_stop,
                  resume: str, checkpoint_path: Path | None, keep_checkpoint: bool, score_held_out: bool) -> dict:
    out_dir = Path(out_dir)
    ckpt_path = Path(checkpoint_path) if checkpoint_path is not None else adopt_checkpoint(out_dir)
    if resume == "require" and not checkpoint.exists(ckpt_path):
        raise checkpoint.CheckpointError(f"--resume: no checkpoint at {ckpt_path} (one is written every "
                                         "--checkpoint-every steps)")
    t0 = time.perf_counter()
    # a bad dataset fails before the output folder exists (no empty folder left); too little
    # memory fails before a single image is decoded (spirula/engine/preflight.py)
    gpu, dataset, train_idx, test_idx = load_training_data(dataset_path, cfg, lambda: get_gpu(cfg.device), on_message)
    on_message(f"device: {gpu.adapter}")
    check_output_dir(out_dir)
    for w in dataset.warnings:
        on_message(f"warning: {w}")
    if dataset.masks_note:
        on_message(f"note: {dataset.masks_note}")
    for note in undistortion_notes(dataset.undistortion):
        on_message(f"note: {note}")
    sources = len({c.source or c.name for c in dataset.cameras})  # a wide image's faces: one source
    what = f"{len(dataset.cameras)} images" if sources == len(dataset.cameras) else \
        f"{len(dataset.cameras)} face images of {sources} wide images"
    on_message(f"dataset: {what} ({len(train_idx)} train, {len(test_idx)} held out), "
               f"{0 if dataset.points is None else len(dataset.points)} SfM points")
    t_load = time.perf_counter() - t0
    ckpt = _load_checkpoint(ckpt_path, resume, on_message)
    job = _Job(gpu, cfg, ckpt_path, score_held_out)
    try:
        return job.run(dataset_path, out_dir, dataset, train_idx, test_idx, ckpt, resume, on_progress,
                       on_message, should_stop, t_load, keep_checkpoint)
    except NonFiniteError as e:
        raise NonFiniteError(f"{e}. {job.kept()}") from e
    except DeviceMemoryError as e:
        raise DeviceMemoryError(job.out_of_memory(e)) from e


def _load_checkpoint(path: Path, resume: str, on_message) -> checkpoint.Checkpoint | None:
    if resume == "never":
        if checkpoint.exists(path):
            on_message(f"note: the checkpoint {path} of an earlier run will be replaced (--resume continues from it)")
        return None
    if not checkpoint.exists(path):
        return None
    try:
        ckpt = checkpoint.load_newest(path)  # the previous generation when the newest is bad
    except checkpoint.CheckpointError as e:
        if resume == "require":  # `spirula train --resume`: the next step to take
            raise checkpoint.CheckpointError(f"{e}; {AFRESH}") from e
        on_message(f"warning: {e}; starting over")
        return None
    for note in ckpt.notes:
        on_message(f"warning: {note}")
    return ckpt


class _Job:
    """One training run: the trainer, its checkpoints, and what the errors say."""

    def __init__(self, gpu: Gpu, cfg: RunConfig, ckpt_path: Path, score_held_out: bool = True):
        self.gpu, self.cfg, self.ckpt_path = gpu, cfg, ckpt_path
        self.score_held_out = score_held_out
        self.trainer: Trainer | None = None
        self.writer = checkpoint.BackgroundWriter(ckpt_path)  # its saved_step: the checkpoint on disk
        self.said_step: int | None = None  # the last checkpoint announced (once it was on disk)

    def flush(self, on_message) -> None:
        """Wait for the checkpoint being written; a failed write is a warning (a full disk
        must not end the run). A write now on disk is announced ("checkpoint: step N")."""
        warning = self.writer.flush()
        if warning:
            on_message(f"warning: {warning}")
        saved = self.writer.saved_step
        if saved is not None and saved != self.said_step:
            self.said_step = saved
            on_message(f"checkpoint: step {saved} -> {self.ckpt_path}")

    def poll(self, on_message) -> None:
        """Announce a checkpoint whose write has ended since (no wait)."""
        if not self.writer.busy():
            self.flush(on_message)

    def kept(self) -> str:
        kept = self.writer.kept()
        if kept is not None:
            return f"{kept[0].upper()}{kept[1:]}; no PLY was written"
        every = self.cfg.train.checkpoint_every
        return ("No checkpoint had been written yet" + (f" (the first comes at step {every})" if every else
                " (--checkpoint-every 0)") + "; no PLY was written")

    def out_of_memory(self, e: DeviceMemoryError) -> str:
        from ..profile.reporting import build_report, format_report

        t = self.trainer
        where = (f"at step {t.state.step + 1} with {t.model.n:,} Gaussians" if t is not None
                 else "while setting up the training")
        table = format_report(build_report(self.gpu, None, driver=False)).split("\n", 2)[-1]
        lower = (f"Fix: lower --max-size (now {self.cfg.dataset.max_size} px) or --max-gaussians (now "
                 f"{self.cfg.train.max_gaussians:,})")
        then = (", then continue from the checkpoint (spirula train ... --resume; spirula run continues by itself)"
                if self.writer.kept() is not None else ", then run it again (there is no checkpoint to continue from)")
        return f"{e} {where}.\n{table}\n{self.kept().replace('; no PLY was written', '')}.\n{lower}{then}"

    def run(self, dataset_path, out_dir, dataset, train_idx, test_idx, ckpt, resume, on_progress, on_message,
            should_stop, t_load, keep_checkpoint) -> dict:
        try:
            return self._run(dataset_path, out_dir, dataset, train_idx, test_idx, ckpt, resume, on_progress,
                             on_message, should_stop, t_load, keep_checkpoint)
        finally:
            self.flush(on_message)  # an error's message names the checkpoint really on disk

    def _run(self, dataset_path, out_dir, dataset, train_idx, test_idx, ckpt, resume, on_progress, on_message,
             should_stop, t_load, keep_checkpoint) -> dict:
        cfg, gpu = self.cfg, self.gpu
        if ckpt is not None:
            cfg.train.strategy = checkpoint.resumed_strategy(ckpt, cfg.train.strategy)
        job = TrainingJob(gpu, dataset, train_idx, test_idx, cfg, self.ckpt_path, self.score_held_out,
                          writer=self.writer)
        trainer = self.trainer = job.trainer
        for w in trainer.warnings:
            on_message(f"warning: {w}")
        why = (f"--strategy {cfg.train.strategy}" if cfg.train.strategy != "auto" else
               "auto: the dataset has SfM points" if trainer.strategy == "mcmc" else
               f"auto: fewer than {MCMC_MIN_STEPS} steps" if trainer.has_points else "auto: no SfM points, random init")
        on_message(f"densification: {trainer.strategy} ({why})")
        if trainer.geometry is not None:
            g = trainer.geometry
            on_message(f"geometry phase: from step {g.start:,} (lambda_normal {g.lambda_normal:g}, lambda_flat "
                       f"{g.lambda_flat:g}, lambda_multiview {g.lambda_multiview:g}, lambda_mvrgb {g.lambda_mvrgb:g}, "
                       f"alpha gradient {'on' if cfg.train.geometry_alpha_grad else 'off'})")
        if ckpt is not None:
            blocking, changed = job.fits(ckpt)
            if blocking:
                text = f"the checkpoint {ckpt.path} (step {ckpt.step}) does not fit this run: {'; '.join(blocking)}"
                if resume == "require":
                    raise checkpoint.CheckpointError(f"{text}; {AFRESH}")
                on_message(f"warning: {text}; starting over")
                ckpt = None
        if ckpt is not None:
            job.resume(ckpt)
            self.said_step = ckpt.step  # no news: it was on disk before this run
            for c in changed:
                on_message(f"warning: resuming with a changed setting, {c}: from step {ckpt.step} the run differs "
                           "from one without the break")
            on_message(f"resumed from {ckpt.path} at step {ckpt.step} ({trainer.model.n} Gaussians)")
        else:
            on_message(f"initial Gaussians: {trainer.model.n}")
            job.score_start()

        def on_eval(step: int) -> None:
            m = job.evaluate(step)
            on_message(f"step {step}: held-out PSNR {m['psnr']:.2f} dB, SSIM {m['ssim']:.4f}")
            write_json_atomic(out_dir / "metrics.json", {"evaluations": job.evals})

        t1 = time.perf_counter()

        def on_checkpoint(step: int) -> None:
            self.flush(on_message)
            # the GPU state is copied now; the file is written while the training goes on
            # (announced once it is on disk: flush, poll)
            job.checkpoint(step, job.seconds_before + time.perf_counter() - t1,
                           {"dataset": str(Path(dataset_path).resolve())})  # what the studio's Resume trains on

        def progress(p) -> None:
            self.poll(on_message)
            if on_progress is not None:
                on_progress(p)

        every = cfg.train.checkpoint_every
        state = trainer.train(on_progress=progress, on_eval=on_eval if job.scored else None,
                              should_stop=should_stop, on_checkpoint=on_checkpoint if every else None)
        if every and not state.in_step and state.step != self.writer.last_step and \
                (state.stopped_early or keep_checkpoint):
            # stopped between two steps, or the end (even of a run shorter than --checkpoint-every):
            # keep exactly this state (a finished run's to continue with more steps)
            on_checkpoint(state.step)
        kept = state.stopped_early or keep_checkpoint
        if kept:
            self.flush(on_message)  # on disk before the run says where it stopped (or metrics.json names it)
        t_train = time.perf_counter() - t1
        # the checkpoint on disk to continue from (None: none was written, or a finished `spirula run`
        # training, which removes it)
        stopped = {"checkpoint": str(self.writer.saved_path) if kept and self.writer.saved_step is not None
                   else None, "checkpoint_step": self.writer.saved_step if kept else None}
        count, final, metrics = job.finish(out_dir, job.seconds_before + t_train, t_train,
                                           {"dataset": str(dataset_path), "device": gpu.adapter,
                                            "load_seconds": t_load}, on_message=on_message, extra=stopped)
        on_message(f"wrote {out_dir / 'splat.ply'} ({count} Gaussians, step {state.step})")
        if final:
            first = "-" if job.initial_psnr is None else f"{job.initial_psnr:.2f}"
            on_message(f"held-out PSNR {final['psnr']:.2f} dB (first render {first} dB), SSIM {final['ssim']:.4f}")
        if not keep_checkpoint and not state.stopped_early:
            self.flush(on_message)
            checkpoint.remove(self.ckpt_path)
        trainer.release()  # the next stage (e.g. the mesh) gets the memory back
        return metrics
