"""Training checkpoints: the whole state between two steps in one file, written atomically.

``<project>/checkpoints/train.npz`` (whoever made the project: spirula/engine/jobs/project_layout.py
checkpoint_path) is a NumPy ``.npz`` (no pickles) holding

    params, exp_avg, exp_avg_sq   float32 [N, D]  the packed Gaussians and Adam's moments
    grad2d_sum, vis_count         float32 [N]     the densification statistics
    loss_sum                      uint32 [4]      the GPU loss accumulator and guard flags
    appearance_params, appearance_exp_avg, appearance_exp_avg_sq
                                  float32 [I, P]  per-image appearance (only with appearance on:
                                                  I images, P = 12 x cells, spirula/engine/splat/appearance.py)
    appearance_steps              int64 [I]       Adam steps per image (its mode is in meta)
    meta                          uint8           UTF-8 JSON: version, step, Adam step count,
                                                  RNG state, camera-order queue, logged step,
                                                  loss history, the run's settings, the
                                                  dataset's identity, the device, and the
                                                  job's extras (evaluations so far, ...)

Two generations are kept: ``<name>.npz`` (the newest) and ``<name>.prev.npz`` (the one
before it, :func:`previous_path`). A write goes to a temporary file in the same folder and
is fsync'ed; only then is the newest hard-linked to the previous generation's name (by a
link and a rename, so the newest never disappears) and the temporary file renamed over
the newest. A crash (even SIGKILL) at any point leaves the newest complete (old or new) and
the previous generation complete. The first write of a run that starts afresh drops an
earlier run's previous generation; the first write after resuming from the previous
generation (the newest was bad) keeps it and replaces the bad newest. The training job
copies the state off the GPU between two steps and writes the file on a worker thread
(:class:`BackgroundWriter`) while the training goes on. A checkpoint is only written from
a finite state: a NaN/Inf in the guard's flags or in the arrays refuses the write and the
previous file stays.

Reading (:func:`load`) trusts nothing in the file: a truncated or damaged archive (a bad
CRC from flipped bytes, a cut zip directory, a bad array header), missing or mistyped
arrays, arrays whose shapes disagree with each other, with the metadata's count or with
the SH degree of the checkpoint's settings, NaN/Inf values, and metadata out of range (a
step outside 0..the checkpoint's own number of steps, a logged step past the step, a
negative Adam step count, an unusable RNG state) are each a one-line
:class:`CheckpointError` naming the file and what is wrong. :func:`load_newest` falls back
to the previous generation when the newest is unreadable or invalid, with a one-line
warning naming both (``Checkpoint.notes``).

Resuming rebuilds a :class:`spirula.engine.splat.trainer.Trainer` for the same dataset and loads
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
import os
import struct
import threading
import time
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import settings as _settings
from .config import added_later
from .errors import NonFiniteError, SpirulaError
from .fileio import fsync_dir, json_default, open_atomic

VERSION = 1
_ARRAYS = ("params", "exp_avg", "exp_avg_sq", "grad2d_sum", "vis_count")
_APPEARANCE = ("params", "exp_avg", "exp_avg_sq", "steps")  # optional: saved as appearance_<name>
# settings that do not change what the optimisation computes, and those the saved state cannot
# be used without: the settings table's (spirula/engine/settings.py Setting.resume)
_NEUTRAL = {s.name for s in _settings.SETTINGS if s.resume == "neutral"}
_BLOCKING = {s.name for s in _settings.SETTINGS if s.resume == "blocking"}
# what reading a damaged .npz may raise (zipfile: a cut directory or a bad CRC; numpy: a bad
# array header; zlib: damaged compressed data; MemoryError: a header asking for absurd sizes)
READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, struct.error,
                UnicodeDecodeError, MemoryError, TypeError)


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
    notes: list[str] = field(default_factory=list)  # warnings of load_newest (the newest was bad)


def previous_path(path: Path) -> Path:
    """The previous generation of the checkpoint ``path``: ``train.npz`` -> ``train.prev.npz``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix or '.npz'}")


def exists(path: Path) -> bool:
    """Whether either generation of the checkpoint ``path`` is on disk."""
    return Path(path).is_file() or previous_path(path).is_file()


def remove(path: Path) -> None:
    """Delete both generations of the checkpoint ``path`` (a finished run's)."""
    for p in (Path(path), previous_path(path)):
        p.unlink(missing_ok=True)


def set_aside(path: Path) -> Path | None:
    """Move the checkpoints of ``path`` out of the way of a run that trains afresh (`spirula
    run --from train`): the newest becomes ``<name>.replaced.npz`` (kept, never resumed
    from), the previous generation is deleted (it becomes the one kept when there is no
    newest). Returns where the kept one went (None: there was none)."""
    path = Path(path)
    prev = previous_path(path)
    newest = path if path.is_file() else prev if prev.is_file() else None
    if newest is None:
        return None
    aside = path.with_name(f"{path.stem}.replaced{path.suffix or '.npz'}")
    os.replace(newest, aside)
    prev.unlink(missing_ok=True)
    return aside


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
    _write_atomic(Path(path), arrays, "rotate")
    return int(json.loads(arrays["meta"].tobytes())["step"])


def snapshot(trainer, config, dataset_id: dict, device: str = "", extra: dict | None = None) -> dict:
    """The arrays of a checkpoint of ``trainer`` now (host copies; waits for the GPU).
    NonFiniteError when the state is not finite."""
    state = trainer.state_dict()  # raises NonFiniteError on the guard's flags
    model = state["model"]
    bad = [name for name in _ARRAYS if not np.isfinite(model[name]).all()]
    if bad:
        raise NonFiniteError(f"NaN/Inf in {', '.join(bad)} at step {state['step']}: checkpoint not written")
    meta = {"version": VERSION, "step": state["step"], "count": int(len(model["params"])),
            "adam_step": model["adam_step"],
            "logged_step": state["logged_step"], "rng": state["rng"], "order": state["order"],
            "history": state["history"], "pipeline": state.get("pipeline", {}), "config": config if isinstance(config, dict) else asdict(config),
            "dataset": dataset_id, "device": device, "extra": extra or {},
            "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    arrays = {name: np.ascontiguousarray(model[name], np.float32) for name in _ARRAYS}
    arrays["loss_sum"] = np.ascontiguousarray(state["loss_sum"]).view(np.uint32)
    if state.get("filter3d") is not None:  # anti-aliased training's 3D filter (spirula/engine/splat/antialias.py)
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
        # what the next write does with the generations on disk (_write_atomic): a run that
        # starts afresh drops an earlier run's; later writes keep the one before
        self._generations = "rotate" if saved_step is not None else "fresh"
        self.saved_path = self.path  # where the checkpoint of saved_step is (the previous generation after resumed())

    def resumed(self, ckpt: Checkpoint) -> None:
        """The run continues from ``ckpt``: it is the checkpoint on disk. Resumed from the
        previous generation (the newest was bad), the next write replaces the bad newest
        and keeps the previous one."""
        self.saved_step = self.last_step = ckpt.step
        self._generations = "rotate" if Path(ckpt.path) == self.path else "keep"
        self.saved_path = Path(ckpt.path)

    def submit(self, step: int, arrays: dict) -> None:
        self.wait()
        generations = self._generations

        def work() -> None:
            try:
                _write_atomic(self.path, arrays, generations)
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
        self.saved_path = self.path
        self._generations = "rotate"

    def flush(self) -> str:
        """:meth:`wait`, with a failed write returned as a warning ('' when none): a full disk
        must not end a run."""
        try:
            self.wait()
        except OSError as e:
            return f"checkpoint not written to {self.path}: {e.strerror or e}"
        return ""

    def busy(self) -> bool:
        """A write is still going on (:meth:`wait` would block)."""
        return self._thread is not None and self._thread.is_alive()

    def kept(self) -> str | None:
        """What is on disk, for error messages: 'the last good checkpoint (step N) is kept in
        PATH', or None when no checkpoint has been written."""
        if self.saved_step is None:
            return None
        return f"the last good checkpoint (step {self.saved_step}) is kept in {self.saved_path}"


def load(path: Path) -> Checkpoint:
    """Read and check one checkpoint file (module docstring: what is checked);
    CheckpointError naming the file and what is wrong when it is not a usable one."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint at {path}") from None
    except READ_ERRORS as e:  # not a zip / truncated / flipped bytes / bad member
        raise CheckpointError(f"{path}: damaged checkpoint, not readable ({_why(e)})") from e
    except Exception as e:  # noqa: BLE001 - whatever else a damaged file makes the readers raise
        raise CheckpointError(f"{path}: damaged checkpoint, not readable ({type(e).__name__}: {e})") from e
    missing = [k for k in _ARRAYS + ("loss_sum", "meta") if k not in data]
    if missing:
        raise CheckpointError(f"{path}: not a training checkpoint (missing {', '.join(missing)})")
    try:
        meta = json.loads(data["meta"].tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: damaged checkpoint, unreadable metadata ({e})") from e
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: damaged checkpoint, its metadata is not a JSON object")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {meta.get('version')}, this build reads {VERSION}")
    problem = _check(data, meta)
    if problem:
        raise CheckpointError(f"{path}: invalid checkpoint, {problem}")
    model = {k: data[k] for k in _ARRAYS}
    model["adam_step"] = int(meta["adam_step"])
    state = {"step": int(meta["step"]), "logged_step": int(meta["logged_step"]), "model": model,
             "rng": meta["rng"], "order": meta["order"], "loss_sum": data["loss_sum"].view(np.uint32),
             "history": meta["history"], "pipeline": meta.get("pipeline", {}), "filter3d": data.get("filter3d")}
    if meta.get("appearance_mode") and all(f"appearance_{n}" in data for n in _APPEARANCE):
        state["appearance"] = {n: data[f"appearance_{n}"] for n in _APPEARANCE} | {"mode": meta["appearance_mode"]}
    return Checkpoint(path, state["step"], state, meta["config"], meta["dataset"], meta.get("device", ""),
                      meta.get("extra", {}))


def load_newest(path: Path) -> Checkpoint:
    """The newest usable generation of the checkpoint ``path``: ``path`` itself, else (when
    it is missing, unreadable or invalid) its previous generation (:func:`previous_path`),
    with a one-line warning naming both in ``Checkpoint.notes``. CheckpointError when
    neither is usable (naming what is wrong with each), or none exists."""
    path = Path(path)
    prev = previous_path(path)
    try:
        return load(path)
    except CheckpointError as e:
        if not prev.is_file():
            raise
        newest = e if path.is_file() else None
    try:
        ckpt = load(prev)
    except CheckpointError as e:
        if newest is None:
            raise
        raise CheckpointError(f"{newest}; the previous one is not usable either: {e}") from e
    why = str(newest) if newest is not None else f"{path} is missing"
    ckpt.notes.append(f"{why}; using the previous checkpoint {prev} (step {ckpt.step}) instead")
    return ckpt


def _why(e: BaseException) -> str:
    """A read error in words: what is wrong with the file, then Python's own words."""
    text = str(e) or type(e).__name__
    if isinstance(e, zipfile.BadZipFile):
        kind = "a damaged member (bad CRC: flipped bytes?)" if "CRC" in text else "truncated or not a zip archive"
    elif isinstance(e, EOFError | struct.error):
        kind = "truncated"
    elif isinstance(e, zlib.error):
        kind = "damaged compressed data"
    elif isinstance(e, MemoryError):
        kind = "an array header asks for more memory than there is"
    elif isinstance(e, OSError) and not isinstance(e, zipfile.BadZipFile):
        return f"cannot read: {e.strerror or text}"
    else:
        kind = "a damaged array"
    return f"{kind}: {text}"


def _check(data: dict, meta: dict) -> str:
    """What is wrong with a checkpoint's arrays and metadata ('' when nothing): types,
    shapes against each other, the count and the SH degree, finite values, and the
    metadata's ranges."""
    cfg = meta.get("config")
    train = cfg.get("train") if isinstance(cfg, dict) else None
    if not isinstance(train, dict) or not isinstance(meta.get("dataset"), dict):
        return "its metadata has no settings or dataset identity"
    steps, sh = train.get("steps"), train.get("sh_degree")
    if not _is_int(steps) or steps < 0:
        return f"its settings have no valid number of steps ({steps!r})"
    if not _is_int(sh) or not 0 <= sh <= 3:
        return f"its settings have no valid SH degree ({sh!r})"
    for key in ("step", "logged_step", "adam_step"):
        if not _is_int(meta.get(key)):
            return f"its {key} is {meta.get(key)!r}, not a whole number"
    step = meta["step"]
    if not 0 <= step <= steps:
        return f"its step {step} is outside 0..{steps}, the number of steps it was written for"
    if not 0 <= meta["logged_step"] <= step:
        return f"its logged step {meta['logged_step']} is outside 0..{step} (its step)"
    if meta["adam_step"] < 0:
        return f"its Adam step count {meta['adam_step']} is negative"
    if not isinstance(meta.get("order"), list) or not all(_is_int(i) and i >= 0 for i in meta["order"]):
        return "its camera queue is not a list of image indices"
    if not isinstance(meta.get("history"), list):
        return "its loss history is not a list"
    if not _rng_ok(meta.get("rng")):
        return "its random generator state is not usable"
    extra = meta.get("extra", {})
    if (not isinstance(extra, dict) or not isinstance(extra.get("evaluations", []), list)
            or not isinstance(extra.get("train_seconds", 0.0), int | float)):
        return "its job data (evaluations, timings) is malformed"
    params = data["params"]
    d = 11 + 3 * (sh + 1) ** 2  # spirula/engine/splat/param_layout.py: mean 3, scale 3, quat 4, opacity 1, SH
    for name in _ARRAYS + tuple(k for k in ("filter3d",) if k in data):
        if data[name].dtype != np.float32:
            return f"{name} is {data[name].dtype}, not float32"
    if params.ndim != 2 or params.shape[1] != d:
        return (f"params has shape {params.shape}, expected [N, {d}] for SH degree {sh} (the degree of its "
                "settings)")
    n = params.shape[0]
    count = meta.get("count", n)  # checkpoints before the count: the arrays' own
    if not _is_int(count) or count != n:
        return f"params holds {n} Gaussians, its metadata says {count!r}"
    for name in ("exp_avg", "exp_avg_sq"):
        if data[name].shape != params.shape:
            return f"{name} has shape {data[name].shape}, params {params.shape}"
    for name in ("grad2d_sum", "vis_count") + (("filter3d",) if "filter3d" in data else ()):
        if data[name].shape != (n,):
            return f"{name} has shape {data[name].shape}, expected ({n},) for {n} Gaussians"
    loss = data["loss_sum"]
    if loss.ndim != 1 or not 1 <= loss.size <= 8 or loss.dtype.itemsize != 4:
        return f"loss_sum has shape {loss.shape} and type {loss.dtype}, expected at most 8 32-bit words"
    app = [k for k in data if k.startswith("appearance_")]
    if app:
        complete = sorted(app) == sorted(f"appearance_{a}" for a in _APPEARANCE)
        if not complete or not isinstance(meta.get("appearance_mode"), str):
            return f"its appearance state is incomplete ({', '.join(sorted(app))})"
        ap = data["appearance_params"]
        if ap.ndim != 2 or ap.dtype != np.float32:
            return f"appearance_params has shape {ap.shape} and type {ap.dtype}, expected float32 [I, P]"
        for name in ("appearance_exp_avg", "appearance_exp_avg_sq"):
            if data[name].shape != ap.shape or data[name].dtype != np.float32:
                return f"{name} has shape {data[name].shape}, appearance_params {ap.shape}"
        if data["appearance_steps"].shape != (ap.shape[0],) or data["appearance_steps"].dtype.kind not in "iu":
            return f"appearance_steps has shape {data['appearance_steps'].shape}, expected ({ap.shape[0]},) integers"
    for name in _ARRAYS + tuple(k for k in ("filter3d", "appearance_params", "appearance_exp_avg",
                                            "appearance_exp_avg_sq") if k in data):
        bad = int(np.count_nonzero(~np.isfinite(data[name])))
        if bad:
            return f"{bad:,} NaN/Inf value{'s' if bad != 1 else ''} in {name}"
    return ""


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _rng_ok(state) -> bool:
    """Whether ``state`` can be set as a NumPy bit generator's state (what restoring does)."""
    if not isinstance(state, dict) or not isinstance(state.get("bit_generator"), str):
        return False
    kind = getattr(np.random, state["bit_generator"], None)
    if not isinstance(kind, type) or not issubclass(kind, np.random.BitGenerator):
        return False
    try:
        kind().state = state
    except (TypeError, ValueError, KeyError, OverflowError):
        return False
    return True


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
    intrinsics = not blocking and old_ds.get("intrinsics") != new_ds.get("intrinsics")
    for section in ("dataset", "train"):
        old = {**added_later(section), **ckpt.config.get(section, {})}
        new = cur.get(section, {})
        for key in sorted(set(old) | set(new)):
            if key in _NEUTRAL or _norm(old.get(key)) == _norm(new.get(key)):
                continue
            text = f"{key} {old.get(key)!r} -> {new.get(key)!r}"
            (blocking if key in _BLOCKING else changed).append(text)
    if intrinsics:  # one line: with the --max-size that made them, or alone (the dataset's own images changed)
        size = next((i for i, t in enumerate(changed) if t.startswith("max_size ")), None)
        if size is None:
            changed.append("image sizes / intrinsics")
        else:
            changed[size] += " (the image sizes and intrinsics with it)"
    steps = cur.get("train", {}).get("steps")
    if isinstance(steps, int) and ckpt.step > steps:
        blocking.append(f"it is at step {ckpt.step}, past this run's {steps} steps (--steps {ckpt.step} or more "
                        "continues it)")
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


def _write_atomic(path: Path, arrays: dict, generations: str = "rotate") -> None:
    """Write ``arrays`` to ``path`` (module docstring: the order that keeps both
    generations whole through a crash). ``generations``: "rotate" keeps the file on disk as
    the previous generation; "keep" replaces the newest and keeps the previous generation
    (the newest was bad); "fresh" replaces the newest and drops the previous generation (an
    earlier run's)."""
    path = Path(path)
    prev = previous_path(path)
    with open_atomic(path, "wb", what="checkpoint") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())  # the new file is whole before any generation moves
        if generations == "rotate" and path.is_file():
            _link_over(path, prev)
    if generations == "fresh":
        prev.unlink(missing_ok=True)
    fsync_dir(path.parent)


def _link_over(src: Path, dst: Path) -> None:
    """Make ``dst`` the file ``src`` is, while ``src`` stays: a hard link under a temporary
    name renamed over ``dst`` (atomic); a copy where the file system has no hard links."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(src, tmp)
        except OSError:
            import shutil

            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
