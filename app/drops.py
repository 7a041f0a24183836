"""What a dropped (or opened) path means to the studio. No Qt: testable without a display.

    classify(path) -> Drop(action, path, reason)

actions: "resume" (a project folder whose training stopped: it has a checkpoint), "train"
(a COLMAP or nerfstudio / instant-ngp dataset folder), "ply" (3D Gaussians to view in any
splat format: .ply, .compressed.ply, .spz, .sog, .splat, a SOG meta.json or its folder --
engine/io/formats.py reads them; a project folder whose training finished opens its
splat.ply), "video" and "photos" (need
the reconstruction pipeline), and "unsupported" with a reason that says what would work
instead.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from engine.io.formats import SPLAT_SUFFIXES
from engine.jobs.stages import train_checkpoint_path

VIDEO_EXTS = {".mp4", ".mov", ".m4v", ".avi", ".mkv", ".webm", ".mts", ".3gp"}
IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp", ".webp", ".heic"}
SUPPORTED = ("a COLMAP or nerfstudio dataset folder, a folder of photos, a video "
             f"({', '.join(sorted(VIDEO_EXTS))}) or 3D Gaussians (.ply, .spz, .sog, .splat, "
             "a SOG folder)")


@dataclass(frozen=True)
class Drop:
    action: str
    path: Path
    reason: str = ""


def pipeline_available() -> bool:
    """True once the video/photos reconstruction pipeline (engine/jobs/pipeline.py) exists."""
    try:
        return importlib.util.find_spec("engine.jobs.pipeline") is not None
    except (ImportError, ValueError):
        return False


def _is_dataset(folder: Path) -> bool:
    if (folder / "transforms.json").is_file():
        return True
    for sub in (folder / "sparse" / "0", folder / "sparse", folder):
        if any((sub / f"{name}{ext}").is_file() for name in ("cameras", "images") for ext in (".bin", ".txt")):
            return True
    return False


def _count_images(folder: Path, limit: int = 3) -> int:
    n = 0
    try:
        for p in folder.iterdir():
            if p.suffix.lower() in IMAGE_EXTS and p.is_file():
                n += 1
                if n >= limit:
                    break
    except OSError:
        return 0
    return n


def classify(path: str | Path) -> Drop:
    p = Path(path)
    if not p.exists():
        return Drop("unsupported", p, f"{p} does not exist")
    if p.is_dir():
        if train_checkpoint_path(p).is_file():
            return Drop("resume", p)
        if (p / "splat.ply").is_file() and (p / "train.json").is_file():  # a finished studio project
            return Drop("ply", p / "splat.ply")
        if _is_dataset(p):
            return Drop("train", p)
        if (p / "meta.json").is_file():  # an unzipped SOG
            return Drop("ply", p)
        if _count_images(p) >= 3 or _count_images(p / "images") >= 3:
            return Drop("photos", p)
        return Drop("unsupported", p, f"{p.name}/ holds no transforms.json, no COLMAP model (sparse/0 with "
                                      f"cameras and images .bin/.txt) and no photos; Spirula opens {SUPPORTED}")
    ext = p.suffix.lower()
    if ext in SPLAT_SUFFIXES or p.name.lower() == "meta.json" and not (p.parent / "transforms.json").is_file():
        return Drop("ply", p)
    if p.name == "transforms.json" or (ext == ".json" and p.parent.joinpath("transforms.json") == p):
        return Drop("train", p.parent)
    if ext in VIDEO_EXTS:
        return Drop("video", p)
    if ext in IMAGE_EXTS:
        return Drop("unsupported", p, f"{p.name} is a single photo: drop the folder that holds the photos instead")
    return Drop("unsupported", p, f"{p.name}: '{ext or 'no extension'}' files are not supported; Spirula opens {SUPPORTED}")


def classify_many(paths) -> list[Drop]:
    """One Drop per path; several photos dropped together become one "photos" drop of their
    folder when they share it."""
    paths = [Path(p) for p in paths]
    if len(paths) > 1 and all(p.suffix.lower() in IMAGE_EXTS for p in paths):
        parents = {p.parent for p in paths}
        if len(parents) == 1:
            return [Drop("photos", parents.pop())]
    return [classify(p) for p in paths]
