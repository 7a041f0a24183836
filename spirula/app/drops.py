"""What a dropped (or opened) path is to the studio: the one place that decides. No Qt:
testable without a display.

    classify(path) -> Drop(action, path, reason)      Drop.describe(): the drop overlay's words

actions:
- "project": a studio or `spirula run` project folder (a checkpoint, trained splats, or a
  run record): the window offers Resume, Restart or View (spirula/engine/studio/projects.py).
- "dataset": a COLMAP or nerfstudio / instant-ngp dataset folder: reviewed, then trained.
- "splats": 3D Gaussians to view, in any splat format spirula/engine/io/formats.py reads (.ply,
  .compressed.ply, .spz, .sog, .splat; a SOG meta.json or its folder; a .glb / .gltf that
  uses KHR_gaussian_splatting).
- "mesh": a textured mesh to view (MESH_FORMATS; the mesh stage's GLB, say): a .glb without
  the splat extension.
- "video", "photos": reconstructed (frames, SfM, undistortion), then reviewed. A video whose
  frames are 2:1 is a 360-degree capture to the reconstruction (the ``projection`` setting's
  auto, spirula/engine/jobs/stages.py equirect_frames): its Drop says so (``kind`` "360",
  read from the container's header), and so does the overlay.
- "unsupported": with a reason that says what would work instead.

A new input kind is one branch of :func:`classify` and one line of ACTIONS; a new splat
format is one entry of spirula/engine/io/formats.py (SPLAT_SUFFIXES), which reads it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from spirula.engine.io.formats import SPLAT_SUFFIXES
from spirula.engine.io.gltf import holds_splats

VIDEO_EXTS = {".mp4", ".mov", ".m4v", ".avi", ".mkv", ".webm", ".mts", ".3gp"}
IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp", ".webp", ".heic"}
# the splat files the studio views (spirula/engine/io/formats.py reads them; also a SOG meta.json or its folder)
SPLAT_FORMATS = tuple(SPLAT_SUFFIXES)
MESH_FORMATS = {".glb": "glTF binary", ".obj": "Wavefront OBJ"}
GLTF_EXTS = (".glb", ".gltf")   # splats when the file uses KHR_gaussian_splatting, else a mesh
SUPPORTED = ("a COLMAP or nerfstudio dataset folder, a project folder, a folder of photos, a video "
             f"({', '.join(sorted(VIDEO_EXTS))}), 3D Gaussians ({', '.join(SPLAT_FORMATS)}, a SOG folder, "
             "glTF with KHR_gaussian_splatting) or a mesh "
             f"({', '.join(sorted(MESH_FORMATS))})")

# action -> what dropping it does, for the overlay ({name}: the path's name)
ACTIONS = {
    "project": "Open the project {name}: resume, restart or view it",
    "dataset": "Review the dataset {name}, then train it",
    "splats": "View the Gaussians of {name}",
    "mesh": "View the mesh {name}",
    "video": "Reconstruct the video {name} (frames, SfM), then review it",
    "photos": "Reconstruct the photos of {name} (SfM), then review them",
}

# a "video" drop whose frames are 2:1 (Drop.kind "360")
VIDEO_360 = ("Reconstruct the 360-degree video {name} (2:1 frames: SfM and training on their cube faces; "
             "All options > Projection says otherwise), then review it")


@dataclass(frozen=True)
class Drop:
    action: str
    path: Path
    reason: str = ""
    kind: str = ""     # "360": a video of 2:1 frames (module docstring)

    def describe(self) -> str:
        """What dropping this does (or why it cannot be opened)."""
        if self.action == "video" and self.kind == "360":
            return VIDEO_360.format(name=self.path.name)
        if self.action in ACTIONS:
            return ACTIONS[self.action].format(name=self.path.name)
        return f"Cannot open: {self.reason}"


def is_project(folder: Path) -> bool:
    """A project folder: a training checkpoint, trained splats with their train.json (at
    the top, or in train/ for a `spirula run` project) or a pipeline run record."""
    from spirula.engine.jobs.stages import train_checkpoint_path

    if train_checkpoint_path(folder).is_file() or (folder / "run.json").is_file():
        return True
    return any((d / "splat.ply").is_file() and (d / "train.json").is_file() for d in (folder, folder / "train"))


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


def video_is_360(path: Path) -> bool:
    """True when the video's frames are 2:1 (a 360-degree equirectangular capture, as the
    reconstruction takes it by default): the container's header only, nothing decoded;
    False for a file PyAV cannot open (the reconstruction then names the problem)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return _video_is_360(str(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=32)
def _video_is_360(path: str, size: int, mtime: int) -> bool:  # a drag asks on every move: once per file version
    from spirula.engine.sfm.equirect import is_equirect_size

    try:
        import av

        with av.open(path) as container:
            stream = container.streams.video[0]
            return is_equirect_size(int(stream.codec_context.width), int(stream.codec_context.height))
    except Exception:  # noqa: BLE001 - not a video PyAV reads: the drop still tries it, and says why
        return False


def classify(path: str | Path) -> Drop:
    p = Path(path)
    if not p.exists():
        return Drop("unsupported", p, f"{p} does not exist")
    if p.is_dir():
        if is_project(p):
            return Drop("project", p)
        if _is_dataset(p):
            return Drop("dataset", p)
        if (p / "meta.json").is_file():  # an unzipped SOG
            return Drop("splats", p)
        if _count_images(p) >= 3 or _count_images(p / "images") >= 3:
            return Drop("photos", p)
        return Drop("unsupported", p, f"{p.name}/ holds no transforms.json, no COLMAP model (sparse/0 with "
                                      f"cameras and images .bin/.txt) and no photos; Spirula opens {SUPPORTED}")
    ext = p.suffix.lower()
    if ext in SPLAT_FORMATS or p.name.lower() == "meta.json" and not (p.parent / "transforms.json").is_file():
        return Drop("splats", p)
    if ext in GLTF_EXTS and holds_splats(p):
        return Drop("splats", p)
    if ext == ".gltf":
        return Drop("unsupported", p, f"{p.name} is a glTF file without KHR_gaussian_splatting: the studio "
                                      "views meshes as .glb or .obj (save it as .glb)")
    if ext in MESH_FORMATS:
        return Drop("mesh", p)
    if p.name == "transforms.json":
        return Drop("dataset", p.parent)
    if ext in VIDEO_EXTS:
        return Drop("video", p, kind="360" if video_is_360(p) else "")
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


def describe_many(drops: list[Drop]) -> str:
    """The overlay's text for what is being dragged (the first thing it opens, and how many
    more follow)."""
    if not drops:
        return "Only local files and folders can be opened"
    openable = [d for d in drops if d.action in ACTIONS]
    if not openable:
        return drops[0].describe()
    text = openable[0].describe()
    if len(drops) > 1:
        text += f" (one thing opens at a time: the first of {len(drops)})"
    return text
