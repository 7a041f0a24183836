"""The bodies of the pipeline stages (see :mod:`spirula.engine.jobs.pipeline` for ordering, caching
and atomic output). Each stage reads finished outputs of earlier stages from the
project folder and writes only into its staging folder ``ctx.staging``; it returns a
JSON-able summary (counts, names, figures) that goes into ``run.json``.

Project layout (the stage that writes each entry):

    decode/     stats.npz (per-frame time, sharpness, motion), thumbs.u8, video.json [decode]
    frames/     the selected or imported frames (JPEG), frames.json            [select | import]
    sfm/        database.db, sparse/0 (distorted model), summary.json          [sfm]
    cache/sfm/  database.db + state.json: features and matches kept across runs,
                also cancelled or failed ones (spirula/engine/sfm/cache.py)     [sfm]
    images/, sparse/0   undistorted pinhole images and model (a COLMAP dataset) [undistort]
    train/      splat.ply, metrics.json, eval/, train.json (appearance.json)    [train]
    exports/    splat.ply (appearance.json, .npy: per-image colour, if trained) [export]
    exports/mesh.*, mesh.json   textured mesh (GLB, OBJ+MTL+PNG, PLY), its report [mesh]
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import messages as msg
from ..fileio import json_default, open_atomic, write_json_atomic


@dataclass
class StageContext:
    """What a stage gets: where to read and write, its settings, and how to report."""

    name: str
    kind: str                    # "video", "photos" or "dataset"
    source: Path                 # the run's input (video file, photo folder or dataset folder)
    project: Path
    staging: Path                # empty folder; the stage's outputs go here, mirroring the project
    cfg: object                  # spirula.engine.jobs.pipeline.PipelineConfig
    emit: msg.Emit
    should_stop: Callable[[], bool]
    fresh: bool = False          # redone on request (--from this stage or an earlier one): resume nothing

    def progress(self, done: int, total: int | None = None, detail: str = "") -> None:
        self.emit(msg.StageProgress(self.name, done, total, detail))

    def warn(self, text: str) -> None:
        self.emit(msg.Warning(text))

    def check_stop(self) -> None:
        if self.should_stop():
            raise KeyboardInterrupt


class Throttle:
    """Calls ``fn(done, total)`` at most every ``interval`` seconds, and always for the
    last unit (``done == total``)."""

    def __init__(self, fn: Callable[[int, int | None], None], interval: float = 0.2):
        self.fn, self.interval, self.last = fn, interval, 0.0

    def __call__(self, done: int, total: int | None = None) -> None:
        now = time.monotonic()
        if now - self.last >= self.interval or (total is not None and done >= total):
            self.last = now
            self.fn(done, total)


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------- video


def stage_decode(ctx: StageContext) -> dict:
    """Decode the whole video once: per-frame time, sharpness and thumbnail."""
    from ..ingest.frame_stats import THUMBS_FILE
    from ..ingest.frames import analyze
    from ..ingest.video import iter_frames, probe

    info = probe(ctx.source)
    # --projection equirect on a video whose header is not 2:1: refused before decoding it all
    equirect_frames({"sizes": {"video": [info.width, info.height]}}, ctx.cfg.run.dataset.projection, ctx.source)
    for w in info.warnings:
        ctx.warn(w)
    if info.bit_depth > 8 or info.hdr:
        kind = f"{info.bit_depth}-bit" + (f" HDR ({info.hdr.upper()})" if info.hdr else "")
        how = "tone-mapped to 8-bit sRGB (approximate colours)" if info.hdr else "reduced to 8-bit"
        ctx.warn(f"{ctx.source}: video is {kind} ({info.pix_fmt}); frames are {how}")
    total = info.frame_count or None
    f = ctx.cfg.frames
    if total and info.duration_s > 0 and (f.start_s > 0 or f.end_s > 0):
        span = (min(f.end_s, info.duration_s) if f.end_s > 0 else info.duration_s) - f.start_s
        total = max(1, min(total, round(total * max(span, 0.0) / info.duration_s) + 1))
    tick = Throttle(lambda d, t: ctx.progress(d, t, "decoding"))
    frames = iter_frames(ctx.source, info, on_warning=ctx.warn)

    def progress(n: int) -> None:
        tick(n, total)
        if n % 64 == 0:
            ctx.check_stop()

    out = ctx.staging / "decode"
    out.mkdir(parents=True)
    # the thumbnails stream to a file: memory stays flat over an hour of video
    stats = analyze(frames, info.width, info.height, ctx.cfg.frames, progress, thumbs_to=out / THUMBS_FILE)
    if len(stats.time) == 0:
        from ..ingest.video import VideoError

        raise VideoError(f"{ctx.source}: no frame in the chosen time range "
                         f"({ctx.cfg.frames.start_s} s to {ctx.cfg.frames.end_s or 'end'})")
    stats.save(out / "stats.npz")
    summary = info.summary() | {"frames_decoded": int(len(stats.time)),
                                "seconds_decoded": float(stats.time[-1] - stats.time[0])}
    write_json_atomic(out / "video.json", summary)
    return summary


def stage_select(ctx: StageContext) -> dict:
    """Pick the frames (sharpest per window, near-duplicates dropped) and write them."""
    from ..ingest.frames import FrameStats, select, write_frames
    from ..ingest.video import iter_frames, probe

    stats = FrameStats.load(ctx.project / "decode" / "stats.npz")
    sel = select(stats, ctx.cfg.frames)
    if not sel.kept:
        raise RuntimeError("frame selection kept no frame")
    out = ctx.staging / "frames"
    tick = Throttle(lambda d, t: ctx.progress(d, t, "writing frames"))

    def progress(k: int) -> None:
        tick(k, len(sel.kept))
        ctx.check_stop()

    info = probe(ctx.source)
    names = write_frames(iter_frames(ctx.source, info, on_warning=ctx.warn), sel.kept, out, ctx.cfg.frames, progress)
    if len(names) < len(sel.kept):
        ctx.warn(f"{ctx.source}: {len(sel.kept) - len(names)} selected frames could not be decoded again")
    from PIL import Image

    with Image.open(out / names[0]) as im:
        size = im.size
    files = dict(zip(sel.kept, names))
    kept = [r | ({"file": files[r["index"]]} if r["index"] in files else {}) for r in sel.iter_records() if r["kept"]]
    _write_frames_json(out / "frames.json", {
        "kind": "video", "source": str(ctx.source), "frames": names, "groups": {"video": names},
        "sizes": {"video": list(size)}, "selection": sel.summary(), "kept": kept},
        "rejected", (r for r in sel.iter_records() if not r["kept"]))
    return sel.summary() | {"written": len(names), "size": list(size)}


def _write_frames_json(path: Path, head: dict, name: str, records) -> None:
    """``head`` plus ``name``: the records, streamed one per line (an hour of video has
    ~100,000 rejected frames: no list of them in memory), written atomically."""
    with open_atomic(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(head, indent=2, default=json_default)[:-2] + f",\n  {json.dumps(name)}: [")
        for k, r in enumerate(records):
            f.write(("," if k else "") + "\n    " + json.dumps(r, default=json_default))
        f.write("\n  ]\n}\n")


# ---------------------------------------------------------------------------- photos


def stage_import(ctx: StageContext) -> dict:
    """Copy or convert the photos into frames/ (upright, 8-bit, safe names), and their
    masks, if the folder has any, into frames/.masks/ (spirula/engine/ingest/photos.py)."""
    from ..ingest.photos import import_masks, import_notes, import_photos
    from ..ingest.scene import name_list

    out = ctx.staging / "frames"
    tick = Throttle(lambda d, t: ctx.progress(d, t, "importing photos"))

    def progress(k: int, n: int) -> None:
        tick(k, n)
        ctx.check_stop()

    records = import_photos(ctx.source, out, ctx.cfg.photos, progress, on_warning=ctx.warn)
    masks = import_masks(ctx.source, records, out / ".masks")
    if masks["folder"] and not masks["masked"]:
        ctx.warn(f"{masks['folder']}: no mask of the {len(records)} photos found (a mask is the photo's name "
                 "with .png, as COLMAP or nerfstudio write them); training without masks")
    elif masks["missing"] or masks["unusable"]:
        why = ([f"{len(masks['missing'])} have no mask: {name_list(masks['missing'], limit=5)}"] if masks["missing"]
               else []) + ([f"{len(masks['unusable'])} unusable: {name_list(masks['unusable'], limit=3)}"]
                           if masks["unusable"] else [])
        ctx.warn(f"{masks['folder']}: {len(masks['masked'])} of {len(records)} photos have a mask; the others are "
                 f"used unmasked ({'; '.join(why)})")
    if masks["masked"]:
        ctx.progress(len(records), len(records), f"note: masks of {len(masks['masked'])} of {len(records)} photos "
                                                 f"from {masks['folder']} (white = keep)")
    groups: dict[str, list[str]] = {}
    sizes: dict[str, list[int]] = {}
    for r in records:
        groups.setdefault(r["group"], []).append(r["name"])
        sizes[r["group"]] = [r["width"], r["height"]]
    write_json_atomic(out / "frames.json", {
        "kind": "photos", "source": str(ctx.source), "frames": [r["name"] for r in records],
        "groups": groups, "sizes": sizes, "photos": records,
        "masks": {"folder": masks["folder"], "frames": masks["masked"]}})
    for note in import_notes(records):
        ctx.progress(len(records), len(records), f"note: {note}")
    return {"photos": len(records), "converted": sum(r["converted"] for r in records), "camera_groups": len(groups),
            "exif_oriented": sum(r["exif_orientation"] != 1 for r in records),
            "deep": sum(r["bits"] > 8 for r in records), "masks": len(masks["masked"])}


# ---------------------------------------------------------------------------- SfM


def stage_sfm(ctx: StageContext) -> dict:
    """Features, matching, mapping with pycolmap; the largest model in sfm/sparse/0. The
    features and matches are built in cache/sfm/, outside the staging folder, so a
    cancelled or failed mapping keeps them for the next run."""
    from ..sfm import run_sfm

    frames = ctx.project / "frames"
    meta = _read_json(frames / "frames.json")
    out = ctx.staging / "sfm"

    def report(what: str, done: int, total: int | None) -> None:
        ctx.progress(done, total, what)

    if equirect_frames(meta, ctx.cfg.run.dataset.projection, ctx.source):
        if ctx.cfg.run.dataset.wide_lens == "crop":  # refused before SfM, not after it at the training
            from ..errors import SpirulaError

            w, h = next(iter(meta["sizes"].values()))
            raise SpirulaError(f"{ctx.source}: its {w}x{h} frames (2:1) are a 360-degree capture, which has no single "
                               "pinhole image to crop (--wide-lens crop): use --wide-lens faces (the default)")
        summary = _sfm_equirect(ctx, frames, meta, out, report)
    else:
        summary = run_sfm(frames, meta["frames"], meta["groups"], {k: tuple(v) for k, v in meta["sizes"].items()},
                          meta["kind"], out, ctx.cfg.sfm, report=report, on_warning=ctx.warn,
                          should_stop=ctx.should_stop, label=ctx.source, cache_dir=sfm_cache_path(ctx.project))
    write_json_atomic(out / "summary.json", summary)
    return summary


def equirect_frames(meta: dict, projection: str = "auto", source="") -> bool:
    """True when the frames of frames.json are a 360-degree equirectangular capture
    (spirula/engine/sfm/equirect.py), reconstructed from its cube faces: by ``projection``
    (the dataset setting): "auto" when every frame is 2:1 (one size), "equirect" always
    (SpirulaError naming ``source`` unless they are), "perspective" never."""
    from ..sfm.equirect import is_equirect_size

    sizes = list(meta.get("sizes", {}).values())
    is_360 = bool(sizes) and all(is_equirect_size(*s) for s in sizes) and len({tuple(s) for s in sizes}) == 1
    if projection == "equirect" and not is_360:
        from ..errors import SpirulaError

        got = ", ".join(sorted({f"{w}x{h}" for w, h in sizes})) or "no frames"
        raise SpirulaError(f"{source}: --projection equirect needs frames of one 2:1 size (a 360-degree "
                           f"equirectangular capture), not {got}; use --projection auto or perspective")
    return is_360 and projection != "perspective"


def _sfm_equirect(ctx: StageContext, frames: Path, meta: dict, out: Path, report) -> dict:
    """SfM of a 360-degree capture: each frame's six cube faces (out/faces/<face>/<frame>),
    one rig per frame with known intrinsics (spirula/engine/sfm/equirect.py)."""
    from dataclasses import replace

    from ..sfm import run_sfm
    from ..sfm.equirect import apply_rig, sfm_face_size, split_frames

    w, h = next(iter(meta["sizes"].values()))
    n = sfm_face_size(w, ctx.cfg.sfm.max_image_size)
    why = "" if ctx.cfg.run.dataset.projection == "equirect" else " (2:1; --projection perspective if they are not)"
    ctx.progress(0, len(meta["frames"]), f"note: {w}x{h} frames taken as 360-degree equirectangular{why}: SfM on "
                                         f"each frame's 6 cube faces of {n}x{n} px as one rig (the training splits "
                                         "the frames into faces of its own size)")
    lay = split_frames(frames, meta["frames"], out / "faces", n, lambda d, t: report("cube faces", d, t),
                       ctx.should_stop)
    # the six faces of a frame are neighbours in capture order: sequential matching spans as many frames
    cfg = replace(ctx.cfg.sfm, camera_model="PINHOLE", overlap=ctx.cfg.sfm.overlap * 6)
    summary = run_sfm(out / "faces", lay["names"], lay["groups"], lay["sizes"], meta["kind"], out, cfg,
                      report=report, on_warning=ctx.warn, should_stop=ctx.should_stop, label=ctx.source,
                      cache_dir=sfm_cache_path(ctx.project), camera_params=lay["params"], rig=apply_rig)
    summary["equirect"] = {"face_size": n, "frame_size": [w, h], "frames": len(meta["frames"])}
    return summary


def sfm_cache_path(project: Path) -> Path:
    return Path(project) / "cache" / "sfm"


def stage_undistort(ctx: StageContext) -> dict:
    """Pinhole images/ and sparse/0 in the project root (a COLMAP dataset folder)."""
    from ..sfm import undistort
    from ..sfm.colmap_undistort import k_change_notes

    sfm_summary = ctx.project / "sfm" / "summary.json"
    if sfm_summary.is_file() and "equirect" in _read_json(sfm_summary):
        return _equirect_dataset(ctx, _read_json(sfm_summary)["equirect"])
    if ctx.cfg.run.dataset.wide_lens == "faces" and _wide_model(ctx.project / "sfm" / "sparse" / "0"):
        return _wide_dataset(ctx)
    ctx.progress(0, 1, "undistorting")
    summary = undistort(ctx.project / "sfm" / "sparse" / "0", ctx.project / "frames", ctx.staging,
                        num_threads=ctx.cfg.sfm.num_threads)
    if (ctx.project / "frames" / ".masks").is_dir():  # the photos' masks, undistorted as their images
        from ..sfm.colmap_undistort import undistort_masks

        summary["masks"] = len(undistort_masks(ctx.project / "sfm" / "sparse" / "0", ctx.staging / "sparse" / "0",
                                               ctx.project / "frames" / ".masks", ctx.staging / "masks"))
    ctx.progress(1, 1, "undistorting")
    for note in k_change_notes(summary):  # the new K, per camera (also in run.json)
        ctx.progress(1, 1, f"note: {note}")
    return summary


# ---------------------------------------------------------------------------- train, export


def _equirect_dataset(ctx: StageContext, info: dict) -> dict:
    """A 360-degree capture's dataset: its registered frames in images/ and the frames'
    model (one EQUIRECTANGULAR camera, the rig poses) in sparse/0; the training splits the
    frames into faces again (spirula/engine/ingest/faces.py)."""
    import shutil

    from ..sfm.equirect import write_equirect_model

    ctx.progress(0, 1, "360-degree frames")
    summary = write_equirect_model(ctx.project / "sfm" / "sparse" / "0", ctx.staging / "sparse" / "0",
                                   tuple(info["frame_size"]))
    for w in summary.pop("warnings"):
        ctx.warn(w)
    images = ctx.staging / "images"
    images.mkdir(parents=True)
    kept = []
    for line in (ctx.staging / "sparse" / "0" / "images.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) == 10 and not line.startswith("#"):
            shutil.copyfile(ctx.project / "frames" / parts[9], images / parts[9])
            kept.append(parts[9])
    _copy_masks(ctx, kept)
    selected = _read_json(ctx.project / "frames" / "frames.json")["frames"]
    dropped = sorted(set(selected) - set(kept))
    if dropped:  # named: a user looking for a frame finds why it is not trained
        from ..ingest.scene import name_list

        ctx.warn(f"{ctx.source}: {len(dropped)} of {len(selected)} frames not registered by SfM (their cube faces "
                 f"matched too little), left out of the training: {name_list(dropped, limit=10)}")
    ctx.progress(1, 1, "360-degree frames")
    return summary | {"equirect": True, "images": summary["frames"], "frames_selected": len(selected),
                      "frames_dropped": dropped}


def _copy_masks(ctx: StageContext, names: list[str]) -> None:
    """The masks of the frames ``names`` (frames/.masks/<name>.png, the import's) into the
    dataset's masks/ beside its images/, for frames kept as they are (360-degree, wide lens)."""
    import shutil

    for name in names:
        src = ctx.project / "frames" / ".masks" / f"{name}.png"
        if src.is_file():
            dst = ctx.staging / "masks" / f"{name}.png"
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)


def _wide_model(model_dir: Path) -> bool:
    """True when every camera of the SfM model is a wide lens (a fisheye or FOV model, e.g.
    `--camera-model OPENCV_FISHEYE`): the training splits its images into faces instead."""
    from ..ingest.faces import WIDE_MODELS
    from ..optional import need

    if not model_dir.is_dir():
        return False
    cams = need("pycolmap").Reconstruction(str(model_dir)).cameras
    return bool(cams) and all(c.model.name in WIDE_MODELS for c in cams.values())


def _wide_dataset(ctx: StageContext) -> dict:
    """A wide-lens capture's dataset (--wide-lens faces): its registered frames in images/ and
    the SfM model as estimated (distorted cameras) in sparse/0; the training splits each image
    into pinhole faces (spirula/engine/ingest/faces.py) instead of keeping COLMAP's undistorted crop."""
    import shutil

    from ..optional import need

    ctx.progress(0, 1, "wide-lens frames")
    rec = need("pycolmap").Reconstruction(str(ctx.project / "sfm" / "sparse" / "0"))
    (ctx.staging / "sparse" / "0").mkdir(parents=True)
    rec.write(ctx.staging / "sparse" / "0")
    (ctx.staging / "images").mkdir()
    names = sorted(im.name for im in rec.images.values() if im.has_pose)
    for name in names:
        (ctx.staging / "images" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ctx.project / "frames" / name, ctx.staging / "images" / name)
    _copy_masks(ctx, names)
    ctx.progress(1, 1, "wide-lens frames")
    cams = [{"model": c.model.name, "width": c.width, "height": c.height, "params": [float(v) for v in c.params]}
            for _, c in sorted(rec.cameras.items())]
    return {"images": len(names), "points": rec.num_points3D(), "wide": True, "cameras_wide": cams}


def dataset_path(ctx: StageContext) -> Path:
    """The dataset the train stage reads: the project root after SfM, else the input."""
    return ctx.project if ctx.kind in ("video", "photos") else ctx.source


def train_checkpoint_path(project: Path) -> Path:
    """Where the training of ``project`` checkpoints (spirula/engine/jobs/project_layout.py checkpoint_path,
    the one path of every project, so the CLI and the studio each continue the other's run)."""
    from .project_layout import checkpoint_path

    return checkpoint_path(project)


def stage_train(ctx: StageContext) -> dict:
    """3DGS training (spirula.engine.jobs.train.run_training) into train/."""
    from .train import run_training

    cfg = ctx.cfg.run
    total = cfg.train.steps
    last = [0]

    def on_progress(p) -> None:
        last[0] = p.step
        ctx.emit(msg.TrainMetrics(p.step, p.loss, p.num_gaussians, p.steps_per_sec))
        ctx.progress(p.step, total, f"loss {p.loss:.4f}, {p.num_gaussians:,} Gaussians, {p.steps_per_sec:.1f} steps/s")

    def on_message(text: str) -> None:
        text = text.replace(str(ctx.staging), str(ctx.project))
        if text.startswith("warning: "):
            ctx.warn(text[len("warning: "):])
        else:
            ctx.progress(last[0], total, text)

    if getattr(ctx.cfg, "partition", "off") == "auto":  # too big for the device: spirula/engine/partition/auto.py
        from ..partition.auto import train_partitioned_if_needed

        m = train_partitioned_if_needed(dataset_path(ctx), ctx.project / "parts", ctx.staging / "train", cfg,
                                        ctx.emit, ctx.should_stop)
        if m is not None:
            return {"partitioned": True, "step": total, **{k: m.get(k) for k in ("num_gaussians", "psnr", "ssim", "views")}}
    # the checkpoint lives outside the staging folder (which a failed stage loses): a rerun
    # continues from it when it fits, and it goes once the training has finished; --from
    # train (or earlier) trains afresh: the earlier checkpoints are set aside, never resumed
    from .project_layout import adopt_checkpoint

    ckpt = adopt_checkpoint(ctx.project)  # one of an older layout (a studio reconstruction's) moved there
    if ctx.fresh:
        from .. import checkpoint

        aside = checkpoint.set_aside(ckpt)
        if aside is not None:
            on_message(f"note: training afresh (--from); the earlier training's checkpoint is set aside as {aside}")
    else:
        from .. import checkpoint

        if (ctx.project / "train" / "train.json").is_file() and not checkpoint.exists(ckpt):
            on_message("note: training afresh: the training settings changed since the finished training in "
                       f"{ctx.project / 'train'}, and a finished training keeps no checkpoint to continue from")
    # a stop (Ctrl-C, SIGTERM, Cancel) ends it between two steps, checkpointed: the pipeline then stops
    m = run_training(dataset_path(ctx), ctx.staging / "train", cfg, on_progress=on_progress, on_message=on_message,
                     should_stop=ctx.should_stop, resume="never" if ctx.fresh else "auto", checkpoint_path=ckpt,
                     keep_checkpoint=False)
    return {k: m.get(k) for k in ("step", "stopped_early", "num_gaussians", "psnr", "ssim", "initial_psnr",
                                  "views", "train_seconds", "sec_per_1k_steps", "appearance", "checkpoint",
                                  "checkpoint_step")}


def stage_export(ctx: StageContext) -> dict:
    """exports/splat.ply (the trained Gaussians, standard 3DGS PLY), and appearance.json
    (+ .npy) beside it when the training learned per-image appearance."""
    src = ctx.project / "train" / "splat.ply"
    out = ctx.staging / "exports"
    out.mkdir(parents=True)
    shutil.copyfile(src, out / "splat.ply")
    for name in ("appearance.json", "appearance.npy"):  # the per-image colour transforms, when trained
        if (ctx.project / "train" / name).is_file():
            shutil.copyfile(ctx.project / "train" / name, out / name)
    metrics = _read_json(ctx.project / "train" / "metrics.json")
    return {"ply": "exports/splat.ply", "bytes": (out / "splat.ply").stat().st_size,
            "num_gaussians": metrics.get("num_gaussians")}


def stage_mesh(ctx: StageContext) -> dict:
    """The textured mesh of the trained splats (spirula.engine.jobs.mesh.run_mesh, what `spirula
    mesh` runs) into exports/mesh.* and mesh.json, on the run's device; the project's mesh
    from before becomes mesh.prev.* (spirula.engine.jobs.mesh.keep_previous) once the new one is made."""
    from dataclasses import replace

    from .mesh import keep_previous, kept_note, run_mesh

    def forward(m) -> None:  # the pipeline announces the stage's start and end itself
        if not isinstance(m, msg.StageStarted | msg.StageFinished):
            ctx.emit(m)

    cfg = replace(ctx.cfg.mesh, device=ctx.cfg.run.device)
    report = run_mesh(ctx.project, cfg, emit=forward, should_stop=ctx.should_stop, out=ctx.staging,
                      final=ctx.project)
    note = kept_note(ctx.project, keep_previous(ctx.project))   # the stage's outputs replace the project's next
    if note:
        ctx.progress(1, 1, f"note: {note}")
    b = report["bounds"]
    return {"faces": report["faces"], "vertices": report["vertices"], "texture_size": report["texture_size"],
            "components": report["components"], "watertight": report["watertight"],
            "area_outside_bounds_share": report["area_outside_bounds_share"],
            "bounds": {"mode": b["mode"], "reason": b["reason"], "lo": b["lo"], "hi": b["hi"], "aabb": b["aabb"]},
            "files": {k: str(Path(v).relative_to(ctx.project)) for k, v in report["files"].items()},
            "seconds": report["seconds"], "memory": report["memory"]}


STAGE_FUNCTIONS = {
    "decode": stage_decode, "select": stage_select, "import": stage_import, "sfm": stage_sfm,
    "undistort": stage_undistort, "train": stage_train, "export": stage_export, "mesh": stage_mesh,
}

# Project entries each stage owns (replaced as a whole when the stage finishes); a pattern
# stands for the files of the stage's staging folder that match it (the mesh goes into
# exports/ beside the PLY, which the export stage owns as a whole).
# outputs a stage may leave out (photos without masks): installed when written, else the project's is removed
OPTIONAL_OUTPUTS = {"masks"}
STAGE_OUTPUTS = {
    "decode": ["decode"], "select": ["frames"], "import": ["frames"], "sfm": ["sfm"],
    "undistort": ["images", "sparse", "masks"], "train": ["train"], "export": ["exports"],
    "mesh": ["mesh.json", "exports/mesh.*"],
}
