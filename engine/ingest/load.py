"""Dataset folder -> :class:`Dataset`: detect the format, then load images in parallel.

Per image: read (EXIF applied) -> undistort at native resolution -> crop to the valid
rectangle -> downscale so the longer side is at most ``max_size``. Images sharing a
camera share one undistortion map. A truncated or undecodable image is skipped with a
warning (the dataset stays usable); an image whose size contradicts its camera in a
way that cannot be a plain resize raises DatasetError naming it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..errors import DatasetError
from .camera_model import CameraModel
from .colmap import is_colmap_dataset, read_colmap
from .dataset import Camera, Dataset
from .images import ImageDecodeError, fit_size, read_image, resize
from .nerfstudio import TRANSFORMS, read_transforms
from .scene import SceneSpec, ViewSpec, name_list
from .undistort import Undistorter, make_undistorter


def read_scene(path: Path) -> SceneSpec:
    """Detect the format of ``path`` and read it without loading pixels.

    ``transforms.json`` in the folder (or ``path`` being a .json file) -> nerfstudio /
    instant-ngp; else a COLMAP model in ``sparse/0``, ``sparse`` or the folder itself.
    """
    path = Path(os.path.abspath(path))
    if not path.exists():
        raise DatasetError(f"{path}: does not exist")
    if path.is_file() and path.suffix.lower() == ".json":
        return read_transforms(path)
    if not path.is_dir():
        raise DatasetError(f"{path}: not a dataset folder (expected a folder or a transforms.json)")
    if (path / TRANSFORMS).is_file():
        return read_transforms(path)
    if is_colmap_dataset(path):
        return read_colmap(path)
    raise DatasetError(
        f"{path}: no dataset found: neither {TRANSFORMS} nor a COLMAP model "
        "(cameras/images .bin or .txt in sparse/0, sparse or the folder itself)"
    )


def load_dataset(
    path: str | os.PathLike,
    max_size: int | None = 1600,
    *,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Dataset:
    """Load the dataset at ``path`` into undistorted, cropped, downscaled pinhole cameras.

    max_size: longest image side in pixels after downscaling (None or <= 0: keep size).
    workers: image-loading threads (default: min(8, CPU count)).
    progress: called as progress(done, total) from worker threads after each image.
    Returns cameras sorted by name; reader and loader notes are in ``Dataset.warnings``.
    """
    scene = read_scene(Path(path))
    views = sorted(scene.views, key=lambda v: v.name)
    maps = _MapCache(views)
    lock = threading.Lock()
    done = [0]
    notes: dict[str, list[str]] = {"resized": [], "exif": []}

    def load_one(view: ViewSpec) -> Camera | ImageDecodeError:
        try:
            cam = _load_camera(view, maps, max_size, notes, lock)
        except ImageDecodeError as e:
            cam = e
        finally:
            maps.release(view.camera)
        if progress is not None:
            with lock:
                done[0] += 1
                n = done[0]
            progress(n, len(views))
        return cam

    n_workers = workers or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="ingest") as pool:
        results = list(pool.map(load_one, views))

    cameras = [r for r in results if isinstance(r, Camera)]
    failed = [r for r in results if isinstance(r, ImageDecodeError)]
    if notes["resized"]:
        scene.warn(
            f"{len(notes['resized'])} images differ in size from their camera; intrinsics rescaled: "
            f"{name_list(notes['resized'])}"
        )
    if notes["exif"]:
        scene.warn(
            f"{len(notes['exif'])} images have an EXIF rotation their camera does not have; loaded unrotated: "
            f"{name_list(notes['exif'])}"
        )
    for err in failed:
        scene.warn(f"{err}; skipped")
    if not cameras:
        raise DatasetError(f"{path}: no image could be loaded")
    return Dataset(
        root=scene.root, cameras=cameras, points=scene.points, colors=scene.colors, warnings=list(scene.warnings)
    )


def _load_camera(
    view: ViewSpec, maps: _MapCache, max_size: int | None, notes: dict[str, list[str]], lock: threading.Lock
) -> Camera:
    """Read, undistort, crop and downscale one view (see the module docstring)."""
    image = read_image(view.image_path)
    cam = view.camera
    h, w = image.shape[:2]
    if (w, h) != (cam.width, cam.height):
        note = None
        if (h, w) == (cam.width, cam.height):  # the model may be made from the un-rotated pixels
            image = read_image(view.image_path, apply_exif=False)
            note = "exif"
        elif abs((w / cam.width) / (h / cam.height) - 1.0) < 0.01:
            cam = cam.scaled(w, h)
            note = "resized"
        if (image.shape[1], image.shape[0]) != (cam.width, cam.height):
            raise DatasetError(f"{view.image_path}: image is {w}x{h} but its camera is {cam.width}x{cam.height}")
        with lock:
            notes[note].append(view.name)
    undistorter = maps.get(view.camera, cam, view.image_path)
    image = undistorter(image)
    pin = undistorter.dst
    out_w, out_h = fit_size(pin.width, pin.height, max_size)
    image = resize(image, out_w, out_h)
    sx, sy = out_w / pin.width, out_h / pin.height
    return Camera(
        name=view.name,
        image_path=view.image_path,
        width=out_w,
        height=out_h,
        fx=pin.fx * sx,
        fy=pin.fy * sy,
        cx=pin.cx * sx,
        cy=pin.cy * sy,
        w2c=view.w2c,
        image=image,
    )


class _MapCache:
    """Thread-safe cache of undistortion maps, one per camera: the first thread asking
    for a camera builds its map, the others wait for it; a map is dropped once every
    view using it is done (per-image cameras would otherwise pile up maps in memory)."""

    def __init__(self, views: list[ViewSpec]) -> None:
        self._lock = threading.Lock()
        self._futures: dict[CameraModel, dict[CameraModel, Future]] = {}
        self._users: dict[CameraModel, int] = {}
        for v in views:
            self._users[v.camera] = self._users.get(v.camera, 0) + 1

    def get(self, view_camera: CameraModel, camera: CameraModel, image_path: Path) -> Undistorter:
        """The map of ``camera`` (``view_camera`` rescaled to the image size on disk, or
        itself); DatasetError naming ``image_path`` if it cannot be built."""
        with self._lock:
            group = self._futures.setdefault(view_camera, {})
            fut = group.get(camera)
            owner = fut is None
            if owner:
                fut = group[camera] = Future()
        if owner:
            try:
                fut.set_result(make_undistorter(camera))
            except DatasetError as e:
                fut.set_exception(DatasetError(f"{image_path}: {e}"))
        return fut.result()

    def release(self, view_camera: CameraModel) -> None:
        """One view of ``view_camera`` is done (whether or not it used a map)."""
        with self._lock:
            self._users[view_camera] -= 1
            if self._users[view_camera] <= 0:
                self._futures.pop(view_camera, None)
