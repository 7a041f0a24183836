"""The SfM stage: features -> matches -> mapping -> the largest model, in one folder.

Output in ``out_dir``: ``database.db`` (COLMAP database: cameras, keypoints, matches),
``sparse/0`` (the kept model, binary, distorted cameras as estimated) and the mapper
work folders. Undistortion is a separate step (:mod:`spirula.engine.sfm.colmap_undistort`).

With ``cache_dir`` the database is built there instead and kept (:mod:`spirula.engine.sfm.cache`):
a run cancelled or failed after the features or the matches keeps them, and a rerun
with the same images and settings skips (or continues) those phases; ``out_dir`` gets a
copy of the finished database.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from .cache import SfmCache, features_key, matches_key
from .sfm_config import SfmConfig
from .features import CAPTURE_ADVICE, SfmError, extract
from .mapping import reconstruct
from .matching import choose_matching, match
from ..optional import need as need_extra

Report = Callable[[str, int, "int | None"], None]   # (what, done, total)


def quiet_colmap() -> None:
    """Keep COLMAP's glog lines off the console unless debug logging is on."""
    pycolmap = need_extra("pycolmap")

    pycolmap.logging.minloglevel = 0 if logging.getLogger().isEnabledFor(logging.DEBUG) else 2


def camera_model(cfg: SfmConfig, kind: str) -> str:
    if cfg.camera_model != "auto":
        return cfg.camera_model
    return "OPENCV" if kind == "video" else "SIMPLE_RADIAL"


def run_sfm(image_dir: Path, names: list[str], groups: dict[str, list[str]], sizes: dict[str, tuple[int, int]],
            kind: str, out_dir: Path, cfg: SfmConfig, report: Report | None = None,
            on_warning: Callable[[str], None] | None = None,
            should_stop: Callable[[], bool] | None = None, label: object = None,
            cache_dir: Path | None = None, camera_params: dict[str, list[float]] | None = None,
            rig: Callable[[Path], None] | None = None) -> dict:
    """Reconstruct ``names`` (relative to ``image_dir``; capture order for a video) into
    ``out_dir``. ``groups``/``sizes``: images sharing one camera (see
    :func:`spirula.engine.sfm.features.extract`). ``kind``: 'video' or 'photos'. Returns the
    summary; raises SfmError (naming ``label`` -- the user's input -- or ``image_dir``,
    with the count and a suggestion) when too few images register. ``camera_params``: known
    intrinsics per group (kept fixed by the mappers); ``rig(database)``: groups the images
    into rig frames after the features (spirula/engine/sfm/equirect.py apply_rig)."""
    pycolmap = need_extra("pycolmap")

    quiet_colmap()
    pycolmap.set_random_seed(cfg.seed)
    report = report or (lambda *_: None)
    where = label or image_dir
    n = len(names)
    if n < 3:
        raise SfmError(f"{where}: {n} images; SfM needs at least 3 (more than 20 for a usable splat)")
    out_dir.mkdir(parents=True, exist_ok=True)
    model = camera_model(cfg, kind)
    cache = SfmCache(cache_dir if cache_dir is not None else out_dir)
    if cache_dir is None:   # nothing to reuse: a fresh database
        cache.begin_features("")
    reused = {}
    db = cache.database
    method = choose_matching(cfg, kind, n)
    t0 = time.perf_counter()
    fkey = features_key(image_dir, groups, sizes, model, cfg)
    how = reused["features"] = cache.begin_features(fkey)
    if how == "reuse":
        report("features (reused from an earlier run)", n, n)
        cams = cache.cameras
    else:
        if how == "resume":
            report("features (continuing an earlier run)", 0, n)
        cams = extract(db, image_dir, groups, sizes, model, cfg,
                       progress=lambda d, t: report("features", d, t), should_stop=should_stop,
                       cameras=cache.cameras, on_chunk=cache.save, camera_params=camera_params)
        cache.finish_features()
    if rig is not None:
        rig(db)
    t1 = time.perf_counter()
    mkey = matches_key(fkey, names, method, cfg)
    how = reused["matches"] = cache.begin_matches(mkey)
    if how == "reuse":
        report(f"matching ({method}, reused from an earlier run)", 1, 1)
        m = cache.match_summary
    else:
        if how == "resume":
            report(f"matching ({method}, continuing an earlier run)", 0, None)
        m = match(db, out_dir, names, method, cfg, progress=lambda d, t: report(f"matching ({method})", d, t),
                  should_stop=should_stop, label=where)
        cache.finish_matches(m)
    if should_stop is not None and should_stop():
        raise KeyboardInterrupt
    t2 = time.perf_counter()
    rec, summary = reconstruct(db, image_dir, out_dir / "mappers", n, cfg,
                               progress=lambda mapper, d, t: report(f"{mapper} mapping", d, t),
                               on_warning=on_warning, label=where, fixed=bool(camera_params))
    summary["database"] = reused   # per phase: "fresh", "resume" (continued) or "reuse"
    summary["phase_seconds"] = {"features": t1 - t0, "matching": t2 - t1, "mapping": time.perf_counter() - t2}
    registered = summary["registered"]
    need = max(3, math.ceil(cfg.min_registered_fraction * n))
    if registered < need:
        raise SfmError(
            f"{where}: only {registered} of {n} images could be placed in one 3D model "
            f"(at least {need} needed). {CAPTURE_ADVICE}")
    unregistered = sorted(set(names) - {im.name for im in rec.images.values() if im.has_pose})
    if registered < 0.9 * n and on_warning:
        on_warning(left_out_warning(where, registered, n, unregistered))
    if db.parent != out_dir:
        shutil.copyfile(db, out_dir / "database.db")
    model_dir = out_dir / "sparse" / "0"
    shutil.rmtree(model_dir, ignore_errors=True)
    model_dir.mkdir(parents=True)
    rec.write(model_dir)
    summary.update({"camera_model": model, "cameras": len(cams), "matching": m,
                    "unregistered": unregistered[:200], "registration_rate": registered / n})
    return summary


def left_out_warning(where, registered: int, n: int, unregistered: list[str]) -> str:
    """The warning of a model that registered ``registered`` of ``n`` images: the ones left
    out named (the first 5 in name order, then how many more)."""
    from ..ingest.scene import name_list

    return (f"{where}: {registered} of {n} images registered; the others are left out: "
            f"{name_list(unregistered, limit=5)}")
