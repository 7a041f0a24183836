"""COLMAP dataset reader: find the sparse model, pair its images with the files on disk.

Layout: images in ``<root>/images``; the model in ``<root>/sparse/0``, ``<root>/sparse``
or ``<root>`` (binary or text). With several models under ``sparse/`` (``sparse/0``,
``sparse/1``, ...) the one with the most registered images is used, and a warning says so.
Images of the model missing on disk, and image files on disk the model does not
register, are skipped with a warning.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DatasetError
from .camera_model import CameraModel
from .colmap_format import count_images, model_files, read_model
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

    Raises DatasetError when no model or no images folder is found, a registered image
    uses an unsupported camera model (naming the model and the cameras file), an image
    refers to a missing camera id, or no registered image exists on disk.
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
    for note in notes:
        scene.warn(note)
    if model.points is None:
        scene.warn(f"{folder}: no points3D file; the dataset has no initial points")

    on_disk = {
        p.relative_to(images_dir).as_posix()
        for p in images_dir.rglob("*")
        if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file()
    }
    intrinsics: dict[int, CameraModel] = {}
    missing = []
    for im in model.images.values():
        cam = model.cameras.get(im.camera_id)
        if cam is None:
            raise DatasetError(
                f"{folder}: image {im.name} refers to camera {im.camera_id}, which is not in {model.cameras_file.name}"
            )
        if im.name not in on_disk:
            missing.append(im.name)
            continue
        if cam.camera_id not in intrinsics:
            intrinsics[cam.camera_id] = CameraModel.from_colmap(
                cam.model, cam.width, cam.height, cam.params, model.cameras_file
            )
        scene.views.append(ViewSpec(im.name, images_dir / im.name, intrinsics[cam.camera_id], im.w2c()))

    if missing:
        scene.warn(
            f"{len(missing)} images of the model {folder} are missing from {images_dir}, skipped: {name_list(missing)}"
        )
    unregistered = on_disk - {im.name for im in model.images.values()}
    if unregistered:
        scene.warn(
            f"{len(unregistered)} images in {images_dir} are not registered in the model {folder}, "
            f"skipped: {name_list(list(unregistered))}"
        )
    if not scene.views:
        raise DatasetError(
            f"{root}: none of the {len(model.images)} registered images of {folder} exists in {images_dir}"
        )
    return scene


def _numeric_first(p: Path) -> tuple:
    return (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name)
