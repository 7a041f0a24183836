"""Training checkpoints: the whole state between two steps in one file, written atomically.

``<project>/checkpoint.npz`` (``spirula train``) or ``<project>/checkpoints/train.npz``
(``spirula run``) is a NumPy ``.npz`` (no pickles) holding

    params, exp_avg, exp_avg_sq   float32 [N, D]  the packed Gaussians and Adam's moments
    grad2d_sum, vis_count         float32 [N]     the densification statistics
    loss_sum                      uint32 [4]      the GPU loss accumulator and guard flags
    appearance_params, appearance_exp_avg, appearance_exp_avg_sq
                                  float32 [I, P]  per-image appearance (only with appearance on:
                                                  I images, P = 12 x cells, engine/splat/appearance.py)
    appearance_steps              int64 [I]       Adam steps per image (its mode is in meta)
    meta                          uint8           UTF-8 JSON: version, step, Adam step count,
                                                  RNG state, camera-order queue, logged step,
                                                  loss history, the run's settings, the
                                                  dataset's identity, the device, and the
                                                  job's extras (evaluations so far, ...)

It is written to a temporary file in the same folder, fsync'ed and renamed over the old
one, so a crash (even SIGKILL) leaves either the previous checkpoint or the new one; the
training job copies the state off the GPU between two steps and writes the file on a
worker thread (:class:`BackgroundWriter`) while the training goes on. A
checkpoint is only written from a finite state: a NaN/Inf in the guard's flags or in the
arrays refuses the write and the previous file stays.

Resuming rebuilds a :class:`engine.splat.trainer.Trainer` for the same dataset and loads
the state; on the same device and with the same settings the run then continues bit for
bit (on devices whose float atomics add in a fixed order: lavapipe with one thread does,
a real GPU's rasterizer backward does not, so there the continuation matches an unbroken
run statistically, not bitwise). :func:`compare` sorts the differences between a
checkpoint and the run asking to resume into blocking ones (another dataset or camera
poses, another SH degree or training split: the state does not fit) and others, which
change the course of the run from there on but are allowed with a warning (more steps, a
lower ``--max-gaussians`` or ``--max-size`` after running out of memory).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import settings as _settings
from .config import added_later
from .errors import NonFiniteError, SpirulaError
from .fileio import json_default, open_atomic

NAME = "checkpoint.npz"
VERSION = 1
_ARRAYS = ("params", "exp_avg", "exp_avg_sq", "grad2d_sum", "vis_count")
_APPEARANCE = ("params", "exp_avg", "exp_avg_sq", "steps")  # optional: saved as appearance_<name>
# settings that do not change what the optimisation computes, and those the saved state cannot
# be used without: the settings table's (engine/settings.py Setting.resume)
_NEUTRAL = {s.name for s in _settings.SETTINGS if s.resume == "neutral"}
_BLOCKING = {s.name for s in _settings.SETTINGS if s.resume == "blocking"}


class CheckpointError(SpirulaError):
    """A checkpoint is missing, unreadable, or does not fit the run that wants to resume."""


@dataclass
class Checkpoint:
    path: Path
    step: int
    state: dict                                # the form of Trainer.state_dict()
    config: dict                               # asdict(RunConfig) of the run that wrote it
    dataset: dict                              # dataset_identity() of that run
    device: str = ""
    extra: dict = field(default_factory=dict)  # the job's own data (evaluations, timings)


def dataset_identity(dataset, train_idx: list[int]) -> dict:
    """What a checkpoint must agree on with the dataset it is resumed on: the image names
    and camera poses (a hash, blocking), the image sizes and intrinsics (a hash: a change
    is allowed, e.g. another --max-size) and the training split."""
    poses = hashlib.sha256()
    intr = hashlib.sha256()
    for c in dataset.cameras:
        poses.update(c.name.encode("utf-8") + b"\0")
        poses.update(np.ascontiguousarray(c.w2c, np.float64).tobytes())
        intr.update(np.array([c.width, c.height, c.fx, c.fy, c.cx, c.cy], np.float64).tobytes())
    return {"images": len(dataset.cameras), "poses": poses.hexdigest(), "intrinsics": intr.hexdigest(),
            "train_idx": [int(i) for i in train_idx]}


def save(path: Path, trainer, config, dataset_id: dict, device: str = "", extra: dict | None = None) -> int:
    """Write ``trainer``'s state to ``path`` atomically; returns the step saved. Raises
    NonFiniteError (and leaves the previous file) when the state is not finite."""
    arrays = snapshot(trainer, config, dataset_id, device, extra)
    _write_atomic(Path(path), arrays)
    return int(json.loads(arrays["meta"].tobytes())["step"])


def snapshot(trainer, config, dataset_id: dict, device: str = "", extra: dict | None = None) -> dict:
    """The arrays of a checkpoint of ``trainer`` now (host copies; waits for the GPU).
    NonFiniteError when the state is not finite."""
    state = trainer.state_dict()  # raises NonFiniteError on the guard's flags
    model = state["model"]
    bad = [name for name in _ARRAYS if not np.isfinite(model[name]).all()]
    if bad:
        raise NonFiniteError(f"NaN/Inf in {', '.join(bad)} at step {state['step']}: checkpoint not written")
    meta = {"version": VERSION, "step": state["step"], "adam_step": model["adam_step"],
            "logged_step": state["logged_step"], "rng": state["rng"], "order": state["order"],
            "history": state["history"], "pipeline": state.get("pipeline", {}), "config": config if isinstance(config, dict) else asdict(config),
            "dataset": dataset_id, "device": device, "extra": extra or {},
            "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    arrays = {name: np.ascontiguousarray(model[name], np.float32) for name in _ARRAYS}
    arrays["loss_sum"] = np.ascontiguousarray(state["loss_sum"]).view(np.uint32)
    if state.get("filter3d") is not None:  # anti-aliased training's 3D filter (engine/splat/antialias.py)
        arrays["filter3d"] = np.ascontiguousarray(state["filter3d"], np.float32)
    app = state.get("appearance")
    if app is not None:
        if not np.isfinite(app["params"]).all():
            raise NonFiniteError(f"NaN/Inf in the appearance at step {state['step']}: checkpoint not written")
        for name in _APPEARANCE:
            arrays[f"appearance_{name}"] = np.ascontiguousarray(app[name])
        meta["appearance_mode"] = app["mode"]
    arrays["meta"] = np.frombuffer(json.dumps(meta, default=json_default).encode("utf-8"), np.uint8)
    return arrays


class BackgroundWriter:
    """Writes checkpoint files on a worker thread, one at a time, so that the training goes
    on while gigabytes go to disk. ``saved_step`` is the step of the last file known to be
    complete; :meth:`wait` blocks for the pending write and raises its error."""

    def __init__(self, path: Path, saved_step: int | None = None):
        self.path = Path(path)
        self.saved_step = saved_step
        self.last_step = saved_step  # the step of the last file asked for (maybe still being written)
        self._thread: threading.Thread | None = None
        self._step: int | None = None
        self._error: BaseException | None = None

    def submit(self, step: int, arrays: dict) -> None:
        self.wait()

        def work() -> None:
            try:
                _write_atomic(self.path, arrays)
            except BaseException as e:  # handed to wait()
                self._error = e

        self._step = self.last_step = step
        self._thread = threading.Thread(target=work, name="checkpoint-writer")
        self._thread.start()

    def wait(self) -> None:
        if self._thread is None:
            return
        self._thread.join()
        self._thread = None
        err, self._error = self._error, None
        if err is not None:
            raise err
        self.saved_step = self._step

    def flush(self) -> str:
        """:meth:`wait`, with a failed write returned as a warning ('' when none): a full disk
        must not end a run."""
        try:
            self.wait()
        except OSError as e:
            return f"checkpoint not written to {self.path}: {e}"
        return ""

    def kept(self) -> str | None:
        """What is on disk, for error messages: 'the last good checkpoint (step N) is kept in
        PATH', or None when no checkpoint has been written."""
        if self.saved_step is None:
            return None
        return f"the last good checkpoint (step {self.saved_step}) is kept in {self.path}"


def load(path: Path) -> Checkpoint:
    """Read a checkpoint; CheckpointError naming the file when it is not one."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint at {path}") from None
    except (OSError, ValueError, EOFError) as e:  # not a zip / truncated / bad member
        raise CheckpointError(f"{path}: not a readable checkpoint ({e})") from e
    missing = [k for k in _ARRAYS + ("loss_sum", "meta") if k not in data]
    if missing:
        raise CheckpointError(f"{path}: not a training checkpoint (missing {', '.join(missing)})")
    try:
        meta = json.loads(data["meta"].tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable metadata ({e})") from e
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {meta.get('version')}, this build reads {VERSION}")
    model = {k: data[k] for k in _ARRAYS}
    model["adam_step"] = int(meta["adam_step"])
    n = len(model["params"])
    if model["params"].ndim != 2 or any(len(model[k]) != n for k in _ARRAYS):
        raise CheckpointError(f"{path}: arrays of different lengths")
    state = {"step": int(meta["step"]), "logged_step": int(meta["logged_step"]), "model": model,
             "rng": meta["rng"], "order": meta["order"], "loss_sum": data["loss_sum"].view(np.uint32),
             "history": meta["history"], "pipeline": meta.get("pipeline", {}), "filter3d": data.get("filter3d")}
    if meta.get("appearance_mode") and all(f"appearance_{n}" in data for n in _APPEARANCE):
        state["appearance"] = {n: data[f"appearance_{n}"] for n in _APPEARANCE} | {"mode": meta["appearance_mode"]}
    return Checkpoint(path, state["step"], state, meta["config"], meta["dataset"], meta.get("device", ""),
                      meta.get("extra", {}))


def resumed_strategy(ckpt: Checkpoint, strategy: str) -> str:
    """The density control to resume ``ckpt`` with: "auto" continues with the checkpoint's
    own (a run that densified with ADC must not switch to MCMC half way because the default
    changed; checkpoints older than the setting trained with ADC); an explicit one stays."""
    if strategy != "auto":
        return strategy
    return {**added_later("train"), **ckpt.config.get("train", {})}.get("strategy", "adc")


def compare(ckpt: Checkpoint, config, dataset_id: dict, device: str = "") -> tuple[list[str], list[str]]:
    """(blocking, changed): why ``ckpt`` cannot be resumed by this run, and what differs
    in ways that are allowed but change the run from the checkpoint on."""
    blocking, changed = [], []
    cur = config if isinstance(config, dict) else asdict(config)
    old_ds, new_ds = ckpt.dataset, dataset_id
    if old_ds.get("images") != new_ds.get("images") or old_ds.get("poses") != new_ds.get("poses"):
        blocking.append(f"the images or camera poses differ ({old_ds.get('images')} images then, "
                        f"{new_ds.get('images')} now)")
    elif old_ds.get("train_idx") != new_ds.get("train_idx"):
        blocking.append("the training split differs")
    elif old_ds.get("intrinsics") != new_ds.get("intrinsics"):
        changed.append("image sizes / intrinsics")
    for section in ("dataset", "train"):
        old = {**added_later(section), **ckpt.config.get(section, {})}
        new = cur.get(section, {})
        for key in sorted(set(old) | set(new)):
            if key in _NEUTRAL or _norm(old.get(key)) == _norm(new.get(key)):
                continue
            text = f"{key} {old.get(key)!r} -> {new.get(key)!r}"
            (blocking if key in _BLOCKING else changed).append(text)
    if ckpt.device and device and ckpt.device != device:
        changed.append(f"device {ckpt.device!r} -> {device!r}")
    return blocking, changed


def restore(trainer, ckpt: Checkpoint) -> None:
    """Load ``ckpt`` into a trainer built for the same dataset and settings."""
    bad = set(ckpt.state["order"]) - set(trainer.train_idx)
    if bad:
        raise CheckpointError(f"{ckpt.path}: camera queue names images outside the training split")
    try:
        trainer.load_state_dict(ckpt.state)
    except ValueError as e:
        raise CheckpointError(f"{ckpt.path}: {e}") from e


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


def _write_atomic(path: Path, arrays: dict) -> None:
    with open_atomic(path, "wb") as f:
        np.savez(f, **arrays)
