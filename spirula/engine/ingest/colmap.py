"""COLMAP dataset reader: find the sparse model, pair its images with the files on disk.

Layout: images in ``<root>/images``; the model in ``<root>/sparse/0``, ``<root>/sparse``
or ``<root>`` (binary or text). With several models under ``sparse/`` (``sparse/0``,
``sparse/1``, ...) the one with the most registered images is used, and a warning says so.
An image name is looked up in ``images`` by the rules of :mod:`spirula.engine.ingest.paths` (the
exact name wins; then with an extension added, in another letter case, by its trailing
components), and a warning lists names found only by a rule and names that more than one
file could be, with the file taken. Images of the model missing on disk, and image files
on disk the model does not register, are skipped with a warning (not in a linked images folder, which a
partition's parts share). So are the images of a camera that cannot be used
(a bad number in its entry, a NaN however written, too few parameters, an unsupported or
unknown model, a camera id missing from the cameras file): the warning names the cameras
file, the line and the camera id. Only when no image is left is the dataset refused, with
those reasons.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DatasetError
from .camera_model import CameraModel
from .faces import Equirect
from .colmap_format import count_images, model_files, read_model
from .paths import Finder, ambiguity_warning, expected_and_found, relative_name
from .scene import SceneSpec, ViewSpec, name_list

IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}


def find_model(root: Path) -> tuple[Path | None, list[str]]:
    """(model folder or None, notes). Candidates: every sub-folder of ``root/sparse``
    holding a model, ``root/sparse`` itself, then ``root``; among those under ``sparse``
    the one with most registered images wins (ties: first by name)."""
    root = Path(root)
    sparse = root / "sparse"
    candidates: list[Path] = []
    if sparse.is_dir():
        subdirs = sorted((p for p in sparse.iterdir() if p.is_dir()), key=_numeric_first)
        candidates = [p for p in subdirs if model_files(p)] + ([sparse] if model_files(sparse) else [])
    if not candidates:
        return (root, []) if model_files(root) else (None, [])
    if len(candidates) == 1:
        return candidates[0], []
    counts = [count_images(p) for p in candidates]
    best = max(range(len(candidates)), key=lambda i: (counts[i], -i))
    listing = ", ".join(f"{p.relative_to(root).as_posix()} ({c} images)" for p, c in zip(candidates, counts))
    chosen = candidates[best].relative_to(root).as_posix()
    note = f"{root}: {len(candidates)} COLMAP models found: {listing}; using {chosen}, which registers the most images"
    return candidates[best], [note]


def is_colmap_dataset(root: Path) -> bool:
    """True when ``root`` holds a COLMAP model in one of the accepted places."""
    return find_model(Path(root))[0] is not None


def read_colmap(root: Path) -> SceneSpec:
    """Read the COLMAP dataset at ``root`` into a SceneSpec (views unsorted; cameras
    with intrinsics as in the model, possibly distorted).

    Raises DatasetError when no model or no images folder is found, or when no image is
    left: every registered image uses an unusable camera (the reasons, naming the cameras
    file, line and camera id), has no usable pose, or is missing on disk.
    """
    root = Path(root)
    folder, notes = find_model(root)
    if folder is None:
        raise DatasetError(f"{root}: no COLMAP model in sparse/0, sparse or the folder itself")
    images_dir = root / "images"
    if not images_dir.is_dir():
        raise DatasetError(f"{root}: COLMAP model found in {folder} but no images folder {images_dir}")
    model = read_model(folder)
    scene = SceneSpec(root=root, views=[], points=model.points, colors=model.colors)
    for note in notes + model.warnings:
        scene.warn(note)
    if model.points is None:
        scene.warn(f"{folder}: no points3D file; the dataset has no initial points")

    on_disk = {
        p.relative_to(images_dir).as_posix()
        for p in images_dir.rglob("*")
        if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file()
    }
    intrinsics: dict[int, CameraModel] = {}
    bad: dict[int, str] = dict(model.bad_cameras)  # camera id -> why (file, line, id)
    unusable: dict[int, list[str]] = {}            # camera id -> the images skipped for it
    missing: list[str] = []
    finder = Finder(images_dir)
    used: set[str] = set()          # files taken, relative to images_dir
    other_name: list[str] = []      # names found only by a lookup rule (spirula/engine/ingest/paths.py)
    ambiguous: list[str] = []       # names that more than one file could be
    for im in model.images.values():
        cid = im.camera_id
        if cid not in intrinsics and cid not in bad:
            cam = model.cameras.get(cid)
            if cam is None:
                bad[cid] = f"{model.cameras_file}: camera {cid} is not in the file"
            else:
                try:
                    intrinsics[cid] = _intrinsics(cam, cam.where or model.cameras_file)
                except DatasetError as e:
                    bad[cid] = str(e)
        if cid in bad:
            unusable.setdefault(cid, []).append(im.name)
            continue
        hit = finder.find(im.name)
        if hit is None:
            missing.append(im.name)
            continue
        used.add(relative_name(hit.path, images_dir))
        if hit.rule != "as written":
            other_name.append(f"{im.name} -> {relative_name(hit.path, images_dir)} ({hit.rule})")
        note = hit.ambiguity(im.name, images_dir)
        if note:
            ambiguous.append(note)
        scene.views.append(ViewSpec(im.name, hit.path, intrinsics[cid], im.w2c()))

    for cid, names in sorted(unusable.items()):
        scene.warn(f"{bad[cid]}; the {len(names)} image{'s' if len(names) > 1 else ''} using camera {cid} "
                   f"{'are' if len(names) > 1 else 'is'} skipped: {name_list(names, limit=5)}")
    if missing:
        scene.warn(
            f"{len(missing)} images of the model {folder} are missing from {images_dir}, skipped: {name_list(missing)}"
        )
    if other_name:
        scene.warn(f"{len(other_name)} images of the model {folder} are not in {images_dir} under their exact "
                   f"name; found by the lookup rules (README, 'Bad input'): {name_list(other_name, limit=5)}")
    if ambiguous:
        scene.warn(ambiguity_warning(f"the model {folder}", ambiguous))
    unregistered = on_disk - used - {im.name for im in model.images.values()}
    # a linked images folder is shared (a part of a partition, spirula/engine/partition/parts.py):
    # its model lists only the images it takes, on purpose
    if unregistered and not images_dir.is_symlink():
        scene.warn(
            f"{len(unregistered)} images in {images_dir} are not registered in the model {folder}, "
            f"skipped: {name_list(list(unregistered))}"
        )
    if not scene.views:
        if unusable:
            reasons = "; ".join(bad[c] for c in sorted(unusable))
            raise DatasetError(f"{reasons} (no image of {folder} is left: every one uses a camera that cannot be "
                               "used, or is missing)")
        if model.warnings and not model.images:
            raise DatasetError(f"{'; '.join(model.warnings)} (no image of {folder} is left)")
        raise DatasetError(
            f"{root}: none of the {len(model.images)} registered images of {folder} exists in {images_dir}: "
            + expected_and_found([im.name for im in model.images.values()], sorted(on_disk), images_dir.name)
        )
    return scene


def _intrinsics(cam, source) -> CameraModel | Equirect:
    """The camera of a cameras-file entry: an Equirect for COLMAP's EQUIRECTANGULAR (split into
    faces by the loader, spirula/engine/ingest/faces.py), else a CameraModel. DatasetError naming
    ``source`` for a refused model or bad params."""
    if cam.model == "EQUIRECTANGULAR":
        eq = Equirect(int(cam.width), int(cam.height))
        eq.check(source)
        return eq
    return CameraModel.from_colmap(cam.model, cam.width, cam.height, cam.params, source)


def _numeric_first(p: Path) -> tuple:
    return (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name)
