"""Camera poses and sparse points from a matched database (pycolmap).

Global mapping (GLOMAP, ``pycolmap.global_mapping``: rotation averaging, global
positioning, bundle adjustment) by default; incremental mapping
(``pycolmap.incremental_mapping``) as option, and as fallback when the global model
registers fewer than 90 % of the images (the model registering more is kept). Either may
produce several disconnected models: the one with the most registered images is kept.
An incremental model short of 90 % is tried once more with image registration needing
15 instead of 30 inlier matches: on 14 office-chair frames at 320 px, 2 of 8 seeds
stopped at 5 images with 30 and none of 16 runs (seeds x 1-2 threads) with 15.

The global mapper needs focal-length priors; when fewer than half of the cameras have
one (frames of a video, photos without EXIF), ``pycolmap.calibrate_view_graph`` first
estimates the focal lengths from the fundamental matrices of the verified pairs. On the
office-chair frames (151) this brought the initial focal from 1,020 px (1.2 x the longer side)
to 507 px (reference 500) and the first bundle adjustment from 103 s to 18 s.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .sfm_config import SfmConfig
from .features import CAPTURE_ADVICE, SfmError
from ..optional import need

FALLBACK_BELOW = 0.9


RELAXED_ABS_POSE_INLIERS = 15   # COLMAP's default is 30


def _run(mapper: str, database: Path, image_dir: Path, out_dir: Path, cfg: SfmConfig,
         on_image: Callable[[], None] | None, relaxed: bool = False, fixed: bool = False):
    pycolmap = need("pycolmap")

    out_dir.mkdir(parents=True, exist_ok=True)
    calibrate_if_needed(database, cfg)
    if mapper == "global":
        o = pycolmap.GlobalPipelineOptions()
        o.num_threads = cfg.num_threads
        o.random_seed = cfg.seed
        if fixed:  # known intrinsics and rig (360-degree faces, spirula/engine/sfm/equirect.py)
            ba = o.mapper.bundle_adjustment
            ba.refine_focal_length = ba.refine_principal_point = ba.refine_extra_params = False
            ba.refine_sensor_from_rig = False
            o.mapper.refine_sensor_from_rig = False
            o.mapper.global_positioning.refine_sensor_from_rig = False
            o.mapper.rotation_averaging.refine_sensor_from_rig = False
        return pycolmap.global_mapping(database, image_dir, out_dir, o)
    o = pycolmap.IncrementalPipelineOptions()
    o.num_threads = cfg.num_threads
    o.random_seed = cfg.seed
    o.min_model_size = 3
    if relaxed:
        o.mapper.abs_pose_min_num_inliers = RELAXED_ABS_POSE_INLIERS
    if fixed:
        o.ba_refine_focal_length = o.ba_refine_principal_point = o.ba_refine_extra_params = False
        o.ba_refine_sensor_from_rig = False
    return pycolmap.incremental_mapping(database, image_dir, out_dir, o,
                                        next_image_callback=on_image, initial_image_pair_callback=on_image)


def calibrate_if_needed(database: Path, cfg: SfmConfig) -> bool:
    """Run view-graph calibration when most cameras lack a focal prior; True if it ran."""
    pycolmap = need("pycolmap")

    with pycolmap.Database.open(database) as db:
        cams = db.read_all_cameras()
    if sum(c.has_prior_focal_length for c in cams) * 2 >= len(cams):
        return False
    o = pycolmap.ViewGraphCalibrationOptions()
    o.random_seed = cfg.seed
    return bool(pycolmap.calibrate_view_graph(database, o))


def _largest(recs) -> tuple[object | None, int]:
    best, n = None, 0
    for rec in (recs or {}).values():
        k = rec.num_reg_images()
        if k > n:
            best, n = rec, k
    return best, n


def reconstruct(database: Path, image_dir: Path, work_dir: Path, n_images: int, cfg: SfmConfig,
                progress: Callable[[str, int, int], None] | None = None,
                on_warning: Callable[[str], None] | None = None, label: object = None, fixed: bool = False):
    """Run the mapper(s); returns (reconstruction, summary dict). Raises SfmError when
    no model could be built. ``fixed``: the cameras' intrinsics and rigs are known (not refined). ``progress(mapper, registered, n_images)`` as images are
    registered (incremental) or once per mapper (global)."""
    if cfg.mapper not in ("global", "incremental"):
        raise SfmError(f"unknown mapper {cfg.mapper!r} (use global or incremental)")
    order = [(cfg.mapper, False)]
    other = "incremental" if cfg.mapper == "global" else "global"
    tried = {}
    best, best_n, best_mapper = None, 0, None
    for mapper, relaxed in order:
        name, folder = (f"{mapper} (relaxed)", f"{mapper}-relaxed") if relaxed else (mapper, mapper)
        count = [0]

        def on_image(m=mapper, c=count) -> None:
            c[0] += 1
            if progress is not None:
                progress(m, min(c[0] + 1, n_images), n_images)

        if progress is not None:
            progress(mapper, 0, n_images)
        out = work_dir / folder
        shutil.rmtree(out, ignore_errors=True)
        try:
            recs = _run(mapper, database, image_dir, out, cfg, on_image, relaxed, fixed)
        except (RuntimeError, ValueError) as e:   # pycolmap raises RuntimeError on failed checks
            if on_warning:
                on_warning(f"{name} mapping failed: {e}")
            recs = {}
        rec, n = _largest(recs)
        tried[name] = {"models": len(recs or {}), "registered": n}
        if progress is not None:
            progress(mapper, n, n_images)
        if n > best_n:
            best, best_n, best_mapper = rec, n, name
        short = best_n < FALLBACK_BELOW * n_images
        if short and mapper == "incremental" and not relaxed:
            if on_warning:
                on_warning(f"incremental mapping registered {n} of {n_images} images; trying again with "
                           f"{RELAXED_ABS_POSE_INLIERS} instead of 30 inliers per registered image")
            order.append(("incremental", True))
        if short and (mapper, relaxed) == order[0] and cfg.fallback:
            if on_warning:
                on_warning(f"{mapper} mapping registered {best_n} of {n_images} images; trying {other} mapping")
            order.append((other, False))
    if best is None:
        raise SfmError(f"{label or image_dir}: no 3D model could be built from the {n_images} images (mappers tried: "
                       f"{', '.join(tried)}); the views do not overlap enough. {CAPTURE_ADVICE}")
    summary = {"mapper": best_mapper, "tried": tried, "registered": best_n, "images": n_images,
               "models": tried[best_mapper]["models"], "points": int(best.num_points3D()),
               "mean_reprojection_error_px": float(best.compute_mean_reprojection_error()),
               "mean_track_length": float(best.compute_mean_track_length())}
    return best, summary
