"""The main job as resumable stages: video or photos or dataset -> trained splat -> PLY -> mesh.

    video:   decode -> select -> sfm -> undistort -> train -> export -> mesh
    photos:  import -> sfm -> undistort -> train -> export -> mesh
    dataset: train -> export -> mesh    (a COLMAP folder or transforms.json)

The mesh stage (spirula/engine/jobs/mesh.py, as `spirula mesh`) is left out when
``PipelineConfig.with_mesh`` is off (`spirula run --no-mesh`); its files go into exports/
beside the PLY, its report is mesh.json.

Each stage writes into ``<project>/.staging/<stage>/`` and, once it has finished, its
output entries (:data:`spirula.engine.jobs.stages.STAGE_OUTPUTS`) replace the project's by rename;
a failed or cancelled stage leaves the earlier outputs as they were. The frames are the
select/import stage's output, installed before SfM starts; SfM's own features and
matches live in ``<project>/cache/sfm/`` (spirula/engine/sfm/cache.py, keyed by the frames and
the settings), which no failure or cancel removes.

Caching: every stage has a key, the SHA-256 of its name, its settings, the key of the
stage before it (so a change upstream invalidates everything downstream) and, for the
first stage, a fingerprint of the input (path, size and mtime of the video or of every
photo / dataset file). ``<project>/run.json`` records each finished stage with its key;
a rerun skips a stage whose key and outputs are still there (a stage stopped early, such
as an interrupted training, is recorded as "partial" and redone). ``from_stage`` redoes that
stage and every later one; ``until_stage`` stops after that stage (records of later
stages are kept for a later run). ``run.json`` also keeps the settings, per-stage seconds
and summaries, and the error of a failed run.

Stopping (``should_stop``: Ctrl-C or SIGTERM in `spirula run`, the studio's Cancel): a
stage stops at its next step (the training checkpoints the step it reached and keeps its
outputs, recorded "partial"; other stages keep nothing of theirs), no later stage starts,
and :class:`PipelineStopped` (a KeyboardInterrupt) says where it stopped. A write the disk
refuses in a stage is spirula.engine.errors.WriteError naming the stage and the file.

Progress goes out as typed messages (:mod:`spirula.engine.messages`) through ``emit``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .. import messages as msg
from ..config import RunConfig, added_later
from ..settings import BY_NAME
from ..errors import DatasetError, SpirulaError
from ..fileio import is_refused_write, write_error, write_json_atomic
from ..ingest.frames import FramesConfig
from ..ingest.photos import PhotosConfig, is_photo_folder, masks_folder
from ..mesh.mesh_config import MeshConfig
from ..sfm.sfm_config import SfmConfig
from .project_layout import RUN_FILE
from .stages import OPTIONAL_OUTPUTS, STAGE_FUNCTIONS, STAGE_OUTPUTS, StageContext

PIPELINE_VERSION = 1
STAGES = {
    "video": ["decode", "select", "sfm", "undistort", "train", "export", "mesh"],
    "photos": ["import", "sfm", "undistort", "train", "export", "mesh"],
    "dataset": ["train", "export", "mesh"],
}


@dataclass
class PipelineConfig:
    """All settings of `spirula run`, by stage."""

    frames: FramesConfig = field(default_factory=FramesConfig)
    photos: PhotosConfig = field(default_factory=PhotosConfig)
    sfm: SfmConfig = field(default_factory=SfmConfig)
    run: RunConfig = field(default_factory=RunConfig)
    partition: str = "off"   # "auto": train in parts when the model does not fit the device (spirula/engine/partition/auto.py)
    mesh: MeshConfig = field(default_factory=MeshConfig)   # its device is the run's (run.device)
    with_mesh: bool = True   # end with the mesh stage (off: stop after the PLY export)

    def stage_settings(self, stage: str) -> dict:
        """The settings a stage's output depends on (part of its cache key)."""
        f = asdict(self.frames)
        if stage == "decode":
            return {k: f[k] for k in ("analysis_size", "start_s", "end_s")}
        if stage == "select":
            return f
        if stage == "import":
            return asdict(self.photos)
        if stage == "sfm":  # --projection only when set (the runs made before it keep their key)
            key = {k: v for k, v in asdict(self.sfm).items() if k != "num_threads"}
            projection = self.run.dataset.projection
            return key if projection == "auto" else {**key, "projection": projection}
        if stage == "undistort":  # a wide lens is kept for its faces unless --wide-lens crop (the default
            # leaves the key of the runs made before as it was)
            wide = self.run.dataset.wide_lens
            return {} if wide == "faces" else {"wide_lens": wide}
        if stage == "train":  # the settings whose change trains again (spirula/engine/settings.py retrains)
            later = added_later("train")
            train = {k: v for k, v in asdict(self.run.train).items()
                     if BY_NAME[k].retrains and not (k in later and v == later[k])}
            later_ds = added_later("dataset")  # settings added since, at the value such runs had: not in the key
            dataset = {k: v for k, v in asdict(self.run.dataset).items() if not (k in later_ds and v == later_ds[k])}
            key = {"dataset": dataset, "train": train}
            return key if self.partition == "off" else {**key, "partition": self.partition}
        if stage == "mesh":  # the device it runs on does not change the mesh
            return {k: v for k, v in asdict(self.mesh).items() if k != "device"}
        return {}


class PipelineError(SpirulaError):
    """Bad pipeline arguments (input kind, stage name, project folder)."""


class PipelineStopped(KeyboardInterrupt):
    """The run stopped on request (``should_stop``) in or after stage ``stage``;
    ``summary`` is that stage's (a stopped training's: ``step``, ``checkpoint``,
    ``checkpoint_step``), empty when the stage kept nothing."""

    def __init__(self, stage: str, summary: dict | None = None):
        super().__init__(f"stopped in the {stage} stage")
        self.stage, self.summary = stage, dict(summary or {})


def detect_input(source: Path) -> str:
    """'video', 'photos' or 'dataset' for ``source``; PipelineError naming it otherwise.
    A folder with a COLMAP model or transforms.json is a dataset even though it also
    holds photos, and one that cannot be read raises the reader's DatasetError (the
    specific reason, as `spirula train` gives it) rather than being taken for photos;
    any other file is tried as a video (its decoder decides)."""
    from ..ingest.colmap import is_colmap_dataset
    from ..ingest.load import read_scene
    from ..ingest.nerfstudio import is_transforms_dataset

    source = Path(source)
    if not source.exists():
        raise PipelineError(f"{source}: does not exist")
    if source.is_file():
        return "dataset" if source.suffix.lower() == ".json" else "video"
    if is_transforms_dataset(source) or is_colmap_dataset(source):
        try:
            read_scene(source)
        except DatasetError as e:
            if is_photo_folder(source / "images"):
                hint = f" (to compute new poses from its photos, run on {source / 'images'})"
            elif is_photo_folder(source):
                hint = " (it also holds photos: to compute poses from them, run on a folder without the dataset files)"
            else:
                hint = ""
            raise DatasetError(f"{e}{hint}") from e
        return "dataset"
    if is_photo_folder(source):
        return "photos"
    raise PipelineError(f"{source}: neither a video file, a folder of photos (JPEG, PNG, TIFF, ...) "
                        "nor a dataset folder (COLMAP model or transforms.json)")


def fingerprint(source: Path) -> str:
    """SHA-256 over (relative path, size, mtime) of ``source`` or of every file under it."""
    source = Path(source).resolve()
    h = hashlib.sha256(str(source).encode())
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(source) if p != source else ''}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def stage_key(stage: str, settings: dict, upstream: str) -> str:
    blob = json.dumps({"v": PIPELINE_VERSION, "stage": stage, "settings": settings, "upstream": upstream},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _versions() -> dict:
    out = {}
    for mod in ("pycolmap", "av"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - informational only
            out[mod] = None
    return out


def _load_run(project: Path) -> dict:
    try:
        return json.loads((project / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _expand(root: Path, rel: str) -> list[str]:
    """The entries of ``root`` an output names: ``rel`` itself when it exists, or for a
    pattern (``exports/mesh.*``) every match, as relative paths; [] when none."""
    if not any(c in rel for c in "*?["):
        return [rel] if (root / rel).exists() else []
    return sorted(p.relative_to(root).as_posix() for p in root.glob(rel))


def _install(staging: Path, project: Path, outputs: list[str]) -> None:
    """Move each staged output over the project's (old one renamed away first)."""
    trash = project / ".trash"
    trash.mkdir(exist_ok=True)
    for pattern in outputs:
        found = _expand(staging, pattern)
        if not found and pattern in OPTIONAL_OUTPUTS:  # not written this time: the old one goes
            if (project / pattern).exists():
                os.replace(project / pattern, trash / f"{pattern}.{os.getpid()}.{time.monotonic_ns()}")
            continue
        if not found:
            raise RuntimeError(f"stage output {pattern} missing from {staging}")
        for rel in found:
            src, dst = staging / rel, project / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():
                old = trash / f"{rel.replace('/', '_')}.{os.getpid()}.{time.monotonic_ns()}"
                os.replace(dst, old)
            os.replace(src, dst)
    shutil.rmtree(trash, ignore_errors=True)


def run_pipeline(source: Path, project: Path, cfg: PipelineConfig | None = None,
                 emit: msg.Emit = msg.ignore, from_stage: str | None = None,
                 should_stop: Callable[[], bool] | None = None, until_stage: str | None = None) -> dict:
    """Run (or resume) the main job; returns the run record (also in ``run.json``).

    Raises the stage's SpirulaError (after emitting :class:`spirula.engine.messages.Error` and
    recording it) when a stage fails; :class:`PipelineStopped` when ``should_stop`` says
    so (in a stage, or once a stage has ended: no later stage starts) or a stage stopped
    early, KeyboardInterrupt on another interrupt. Outputs of finished stages are kept in
    every case.
    """
    cfg = cfg or PipelineConfig()
    source = Path(os.path.abspath(source))
    project = Path(os.path.abspath(project))
    should_stop = should_stop or (lambda: False)
    kind = detect_input(source)
    stages = all_stages = STAGES[kind]
    for opt, st in (("--from", from_stage), ("--until", until_stage)):
        if st is not None and st not in stages:
            raise PipelineError(f"{opt} {st}: not a stage of a {kind} run (stages: {', '.join(stages)})")
    if until_stage is not None:
        stages = stages[: stages.index(until_stage) + 1]
    if not cfg.with_mesh:  # like --until export: a mesh made before keeps its record
        if "mesh" in (from_stage, until_stage):
            raise PipelineError(f"--{'from' if from_stage == 'mesh' else 'until'} mesh: this run has no mesh stage "
                                "(--no-mesh)")
        stages = [s for s in stages if s != "mesh"]
    _check_layout(source, project)
    try:
        project.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PipelineError(f"cannot create the project folder {project}: {e.strerror}") from e

    previous = {s["name"]: s for s in _load_run(project).get("stages", [])}
    record = {"input": str(source), "kind": kind, "project": str(project), "from_stage": from_stage,
              "until_stage": until_stage,
              "config": asdict(cfg), "versions": _versions(), "stages": [], "error": None,
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    upstream = fingerprint(source)
    if kind == "photos":  # their masks may lie beside the folder run on (spirula/engine/ingest/photos.py)
        masks = masks_folder(source)
        if masks is not None and Path(source).resolve() not in masks.resolve().parents:
            upstream = hashlib.sha256((upstream + fingerprint(masks)).encode()).hexdigest()
    forced = redo = False
    t_run = time.perf_counter()
    for name in stages:
        forced = forced or name == from_stage
        redo = redo or name == from_stage   # asked for: such a stage resumes nothing (a training starts afresh)
        key = stage_key(name, cfg.stage_settings(name), upstream)
        upstream = key
        prev = previous.get(name)
        outputs = STAGE_OUTPUTS[name]
        if (not forced and prev and prev.get("key") == key and prev.get("status") in ("done", "cached")
                and all(_expand(project, o) or o in OPTIONAL_OUTPUTS for o in outputs)):
            entry = dict(prev, status="cached")
            record["stages"].append(entry)
            emit(msg.StageFinished(name, 0.0, prev.get("summary", {}), cached=True))
            continue
        forced = True   # everything after a stage that runs is rerun (its input changed)
        entry = {"name": name, "key": key, "status": "running", "seconds": None, "summary": {}}
        record["stages"].append(entry)
        write_json_atomic(project / RUN_FILE, record | {"stages": record["stages"] + _pending(stages, name)})
        staging = project / ".staging" / name
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        emit(msg.StageStarted(name))
        t0 = time.perf_counter()
        ctx = StageContext(name, kind, source, project, staging, cfg, emit, should_stop, fresh=redo)
        try:
            summary = STAGE_FUNCTIONS[name](ctx)
            _install(staging, project, outputs)
        except KeyboardInterrupt as e:
            entry.update(status="cancelled", seconds=time.perf_counter() - t0)
            record["error"] = {"stage": name, "message": "cancelled"}
            record["total_seconds"] = time.perf_counter() - t_run
            _record_quietly(project, record)
            if should_stop() and not isinstance(e, PipelineStopped):
                raise PipelineStopped(name) from e
            raise
        except BaseException as e:
            entry.update(status="failed", seconds=time.perf_counter() - t0)
            err = e
            if is_refused_write(e) and not isinstance(e, SpirulaError):  # full disk, read-only, permission
                where = getattr(e, "filename2", None) or e.filename or staging
                err = write_error(Path(where), f"the {name} stage's output", e)
            text = str(err) if isinstance(err, SpirulaError) else f"{name} stage failed: {type(e).__name__}: {e}"
            record["error"] = {"stage": name, "message": text}
            record["total_seconds"] = time.perf_counter() - t_run
            _record_quietly(project, record)
            emit(msg.Error(text))
            if err is not e:
                raise err from e
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            _rmdir_quiet(project / ".staging")
        # a stage stopped early (training interrupted) keeps its outputs but is redone next time
        status = "partial" if summary.get("stopped_early") else "done"
        entry.update(status=status, seconds=time.perf_counter() - t0, summary=summary,
                     finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        stopped = status == "partial" or (should_stop() and name != stages[-1])
        if stopped:  # no later stage starts
            record["error"] = {"stage": name, "message": "stopped"}
            record["total_seconds"] = time.perf_counter() - t_run
        write_json_atomic(project / RUN_FILE, record)
        emit(msg.StageFinished(name, entry["seconds"], summary))
        if stopped:
            raise PipelineStopped(name, summary)
    record["stages"] += [previous[s] for s in all_stages[len(stages):] if s in previous]
    record["total_seconds"] = time.perf_counter() - t_run
    record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_json_atomic(project / RUN_FILE, record)
    emit(msg.Done(record))
    return record


def _check_layout(source: Path, project: Path) -> None:
    """The project must not lie inside an input folder (the input would change as the
    run writes), nor the input inside a project entry a stage replaces."""
    if source.is_dir() and (project == source or source in project.parents):
        raise PipelineError(f"{project}: the project folder must not be inside the input folder {source}")
    for outs in STAGE_OUTPUTS.values():
        for rel in outs + [".staging"]:
            p = project / (Path(rel).parent if "*" in rel else rel)  # a pattern: its folder
            if source == p or p in source.parents:
                raise PipelineError(f"{source}: the input lies in {p}, which the run replaces; "
                                    "use another project folder")


def _record_quietly(project: Path, record: dict) -> None:
    """run.json of a run that ends in an error: not written when the disk refuses it (a
    full disk), so that the error raised is the stage's, not this one's."""
    try:
        write_json_atomic(project / RUN_FILE, record)
    except OSError:
        pass


def _pending(stages: list[str], current: str) -> list[dict]:
    rest = stages[stages.index(current) + 1:]
    return [{"name": s, "status": "pending"} for s in rest]


def _rmdir_quiet(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
