"""`spirula run <video | photo folder | dataset folder> -o <project>`: the main job from a
raw capture to the PLY and the textured mesh (see :mod:`spirula.engine.jobs.pipeline`), with a tqdm
bar per stage and a summary table. The mesh settings are `spirula mesh`'s, prefixed:
--mesh-faces, --mesh-texture-size, --mesh-bounds, ... (spirula/engine/cli/mesh_command.py add_settings)."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import messages as msg
from ..ingest.frames import FramesConfig
from ..ingest.photos import PhotosConfig
from ..sfm.sfm_config import SfmConfig
from .mesh_command import add_settings as add_mesh_settings
from .mesh_command import config_from_args as mesh_config_from_args
from .options import (DefaultsFormatter, add_device_option, add_settings_options, float_range, image_side,
                      int_at_least, train_config_of_args)

ALL_STAGES = ["decode", "select", "import", "sfm", "undistort", "train", "export", "mesh"]
MESH_PREFIX = "mesh-"


def add_parser(sub) -> None:
    f, s = FramesConfig(), SfmConfig()
    p = sub.add_parser("run", help="video / photos / dataset -> frames -> SfM -> trained splat -> PLY -> textured mesh",
                       formatter_class=DefaultsFormatter,
                       description="Every output goes into the project folder: exports/splat.ply and "
                                   "exports/mesh.{glb,obj,mtl,png,ply}, run.json (stages, times, settings), "
                                   "mesh.json; a rerun redoes only the stages whose input or settings changed.")
    p.add_argument("source", type=Path, help="a video file, a folder of photos, or a dataset folder")
    p.add_argument("-o", "--output", type=Path, required=True, help="project folder (created; reruns resume)")
    p.add_argument("--from", dest="from_stage", choices=ALL_STAGES,
                   help="redo this stage and every later one (default: rerun only what changed; SfM still reuses "
                        "the features and matches in cache/sfm/ of unchanged frames and settings)")
    p.add_argument("--until", dest="until_stage", choices=ALL_STAGES, help="stop after this stage (default: mesh, or export with --no-mesh)")
    g = p.add_argument_group("video frames")
    g.add_argument("--frames", type=int_at_least(-1), default=f.target_frames,
                   help="frames to keep, spaced evenly in time (0 = from duration and motion; -1 = every frame)")
    g.add_argument("--frames-per-second", type=float_range(0.0, inclusive=False), default=f.frames_per_second,
                   help="automatic count: frames per second of camera motion")
    g.add_argument("--start", type=float_range(0.0), default=f.start_s, help="use the video from this time (s)")
    g.add_argument("--end", type=float_range(0.0), default=f.end_s, help="use the video up to this time (s; 0 = end)")
    g.add_argument("--frame-size", type=image_side, default=f.max_size,
                   help="longer side of the frames written (0 = native)")
    g = p.add_argument_group("photos")
    g.add_argument("--photo-size", type=image_side, default=PhotosConfig().max_size,
                   help="longer side of imported photos (0 = keep)")
    g = p.add_argument_group("structure from motion")
    g.add_argument("--mapper", choices=["global", "incremental"], default=s.mapper,
                   help="COLMAP mapper: global (GLOMAP-style, fast) or incremental (slower, more robust)")
    g.add_argument("--no-fallback", action="store_true", help="do not try the other mapper when few images register")
    g.add_argument("--matching", choices=["auto", "sequential", "exhaustive"], default=s.matching,
                   help="feature matching: sequential (video order, with loop detection), exhaustive (every pair), "
                        "or auto (sequential for a video, exhaustive for up to 100 photos)")
    g.add_argument("--vocab-tree", default=s.vocab_tree, help="COLMAP vocabulary tree file for loop detection by retrieval (default: none, loop pairs by "
                        "spacing)")
    g.add_argument("--camera-model", default=s.camera_model, help="COLMAP camera model (auto: OPENCV video, SIMPLE_RADIAL photos)")
    g.add_argument("--sfm-size", type=int_at_least(64), default=s.max_image_size, help="longer image side for SIFT")
    g.add_argument("--sfm-device", choices=["auto", "cpu", "cuda"], default=s.device,
                   help="where SIFT and matching run (pycolmap): auto uses CUDA when pycolmap has it")
    g = p.add_argument_group("training")
    add_settings_options(p, "run", basic_group=g)  # the settings table's (spirula/engine/settings.py)
    add_device_option(g)
    p.add_argument("--drop-sfm-cache", action="store_true",
                   help="once the run has finished, remove <project>/cache/sfm (the features and matches kept "
                        "for a rerun of SfM; also: spirula clean PROJECT)")
    g.add_argument("--partition", choices=["auto", "off"], default="off",
                   help="auto: when the model does not fit the device, train it in parts (spirula partition's split, "
                        "train on Ray, merge; the parts in <project>/parts). Default off")
    g = p.add_argument_group("mesh", "the textured mesh after the PLY (what `spirula mesh` makes; its options "
                                     "with the prefix --mesh-)")
    g.add_argument("--no-mesh", action="store_true", help="stop after the PLY export: no mesh stage")
    add_mesh_settings(g, MESH_PREFIX)


def config_from_args(args):
    from ..jobs.pipeline import PipelineConfig, detect_input

    mesh_follows = not args.no_mesh and args.until_stage in (None, "mesh")
    # the input's kind decides the appearance left unset (its detection reads the input: only then)
    kind = detect_input(args.source) if args.appearance is None else "dataset"
    run = train_config_of_args(args, "run", input_kind=kind, mesh_follows=mesh_follows,
                               why_off="no mesh stage follows")
    return PipelineConfig(
        frames=FramesConfig(target_frames=args.frames, frames_per_second=args.frames_per_second, start_s=args.start,
                            end_s=args.end, max_size=args.frame_size),
        photos=PhotosConfig(max_size=args.photo_size),
        sfm=SfmConfig(mapper=args.mapper, fallback=not args.no_fallback, matching=args.matching,
                      vocab_tree=args.vocab_tree, camera_model=args.camera_model, max_image_size=args.sfm_size,
                      device=args.sfm_device, seed=run.train.seed),
        run=run,
        partition=args.partition, with_mesh=not args.no_mesh,
        mesh=mesh_config_from_args(args, MESH_PREFIX, device=args.device))


class TqdmView:
    """Engine messages -> one tqdm bar per stage, warnings and notes printed above."""

    def __init__(self, stream=None):
        self.bar = None
        self.stage = None
        self.stream = stream or sys.stderr

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def write(self, text: str) -> None:
        from tqdm import tqdm

        tqdm.write(text, file=self.stream)

    def __call__(self, m) -> None:
        from tqdm import tqdm

        if isinstance(m, msg.StageStarted):
            self._close()
            self.stage = m.stage
            self.bar = tqdm(total=m.total, desc=f"{m.stage:<9}", dynamic_ncols=True, file=self.stream, leave=True)
        elif isinstance(m, msg.StageProgress) and self.bar is not None:
            if m.total is not None and self.bar.total != m.total:
                self.bar.reset(total=m.total)
            self.bar.n = m.done
            if m.detail:
                if m.detail.startswith("note: ") or (m.stage == "train" and not m.detail.startswith("loss")):
                    self.write(f"  {m.detail}")
                else:
                    self.bar.set_postfix_str(m.detail, refresh=False)
            self.bar.refresh()
        elif isinstance(m, msg.StageFinished):
            if m.cached:
                self.write(f"{m.stage:<9} cached (inputs and settings unchanged)")
            else:
                self._close()
        elif isinstance(m, msg.Warning):
            self.write(f"warning: {m.text}")
        elif isinstance(m, (msg.Error, msg.Done)):
            self._close()


def summary_table(record: dict) -> str:
    """A short text table of the stages of a run record."""
    lines = [f"{'stage':<10} {'status':<9} {'seconds':>8}  summary"]
    for s in record.get("stages", []):
        secs = s.get("seconds")
        lines.append(f"{s['name']:<10} {s.get('status', ''):<9} {'' if secs is None else f'{secs:8.1f}':>8}  "
                     f"{_short(s['name'], s.get('summary') or {})}")
    total = record.get("total_seconds")
    if total is not None:
        lines.append(f"{'total':<10} {'':<9} {total:8.1f}")
    return "\n".join(lines)


def _short(stage: str, s: dict) -> str:
    if not s:
        return ""  # a stage that failed or did not run has no summary
    if stage == "decode":
        return f"{s.get('frames_decoded')} frames, {s.get('size')}, rot {s.get('rotation')}, {s.get('pix_fmt')}"
    if stage == "select":
        return f"{s.get('kept')} kept / {s.get('rejected')} rejected (target {s.get('target')})"
    if stage == "sfm":
        return (f"{s.get('registered')}/{s.get('images')} registered ({s.get('mapper')}), {s.get('points')} points, "
                f"reproj {s.get('mean_reprojection_error_px', 0):.2f} px")
    if stage == "undistort" and s.get("equirect"):  # a 360-degree capture (spirula/engine/sfm/equirect.py)
        dropped = s.get("frames_dropped") or []
        of = f" of {s['frames_selected']}" if "frames_selected" in s else ""
        return (f"{s.get('frames')}{of} 360-degree frames registered ({s.get('faces_registered')} cube faces)"
                + (f", not {', '.join(dropped[:3])}{' ...' if len(dropped) > 3 else ''}" if dropped else "")
                + f"; faces' pose spread {s.get('max_face_disagreement_deg', 0):.2f} deg")
    if stage == "undistort" and s.get("wide"):  # fisheye: kept for the faces (spirula/engine/jobs/stages.py)
        return f"{s.get('images')} wide-lens images kept distorted (the training splits them into pinhole faces)"
    if stage == "undistort":
        cams = s.get("cameras") or []
        k = "" if len(cams) != 1 else (f", K fx={cams[0]['fx']:.1f} fy={cams[0]['fy']:.1f} cx={cams[0]['cx']:.1f} "
                                       f"cy={cams[0]['cy']:.1f} at {cams[0]['width']}x{cams[0]['height']}")
        return f"{s.get('images')} pinhole images{k}"
    if stage == "import":
        turned = s.get("exif_oriented")
        return (f"{s.get('photos')} photos ({s.get('converted')} converted), {s.get('camera_groups')} camera groups"
                + (f", {turned} turned upright by their EXIF orientation" if turned else "")
                + (f", {s['deep']} cut from 16 to 8 bits" if s.get("deep") else ""))
    if stage == "train":
        psnr = s.get("psnr")
        return f"{s.get('step')} steps, {s.get('num_gaussians')} Gaussians" + (f", PSNR {psnr:.2f} dB" if psnr else "")
    if stage == "export":
        return str(s.get("ply"))
    if stage == "mesh":
        b = s.get("bounds") or {}
        return (f"{s.get('faces', 0):,} faces, {s.get('components', '?')} component(s), "
                f"{'watertight' if s.get('watertight') else 'open'}, bounds {b.get('mode', '?')}, "
                f"{(s.get('files') or {}).get('glb', '')}")
    return ""


def run(args) -> int:
    from ..fileio import check_writable
    from ..jobs.lock import project_lock
    from ..jobs.pipeline import RUN_FILE, PipelineStopped, run_pipeline
    from . import stopping

    check_writable(args.output, "project folder")  # fail before decoding or matching anything
    stop = stopping.current()
    view = TqdmView()
    try:
        with project_lock(args.output, "spirula run", on_note=view.write), stop.between_steps(view.write):
            record = run_pipeline(args.source, args.output, config_from_args(args), emit=view,
                                  from_stage=args.from_stage, until_stage=args.until_stage, should_stop=stop)
    except PipelineStopped as e:  # Ctrl-C or SIGTERM: no later stage started
        view._close()
        print(stopped_line(stop, e), file=sys.stderr)
        return stop.exit_code
    except BaseException as e:
        view._close()
        from ..jobs.pipeline import _load_run

        rec = _load_run(Path(args.output).resolve())
        if rec.get("stages") and not isinstance(e, KeyboardInterrupt):
            print(summary_table(rec), file=sys.stderr)
        raise
    print(summary_table(record))
    mesh = next((st.get("summary") for st in record.get("stages", []) if st["name"] == "mesh"), None)
    if mesh and mesh.get("bounds"):
        b = mesh["bounds"]
        print(f"mesh bounds {b['mode']} (world {' '.join(f'{x:.3g}' for x in b['aabb'])}): {b['reason']}")
    print(f"project: {args.output}  (run record: {args.output / RUN_FILE})")
    if getattr(args, "drop_sfm_cache", False):
        from ..sfm.cache import clear

        freed = clear(args.output)
        print(f"SfM cache removed ({freed / 1024 ** 2:,.1f} MiB freed)" if freed else "no SfM cache to remove")
    return 0


def stopped_line(stop, e) -> str:
    """The one line of a `spirula run` stopped by Ctrl-C or SIGTERM (``e``: the pipeline's
    PipelineStopped)."""
    from . import stopping

    again = "rerun the same command to continue"
    if e.stage == "train" and e.summary.get("step") is not None:
        return stopping.stopped_line(stop, e.summary["step"], e.summary.get("checkpoint"),
                                     e.summary.get("checkpoint_step"), again, again + " (the training starts over)",
                                     where=" of the training")
    if e.summary:  # the stage had finished: none after it started
        return f"stopped after the {e.stage} stage ({stop.name}); {again}"
    return f"stopped in the {e.stage} stage ({stop.name}); the stages finished before are kept; {again}"
