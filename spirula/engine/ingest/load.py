"""Dataset folder -> :class:`Dataset`: detect the format, then load images in parallel.

Per image: read -> match to its camera -> undistort at native resolution -> crop to the
valid rectangle -> downscale so the longer side is at most ``max_size``. Images sharing a
camera share one undistortion map. A truncated or undecodable image is skipped with a
warning naming it (the dataset stays usable).

Matching an image to its camera:

* EXIF orientation: COLMAP never re-orients pixels (OpenImageIO with ``oiio:reorient``
  0), so a model describes the pixels as stored and images are used as stored; those
  carrying an EXIF orientation other than 1 are listed in a warning. Only when the
  stored size contradicts the camera and the EXIF-oriented size fits it (a model made
  from upright copies) is the orientation applied, with a warning.
* Resolution: an image whose size is the camera's at another scale (the same aspect
  within 1 %, or within a pixel of rounding) gets the camera rescaled per axis, with a
  warning giving the scale; any other size mismatch raises DatasetError naming the file
  and both sizes.

Masks (:mod:`spirula.engine.ingest.masks`: where they are found, the one rule for a mask that
cannot be used, the modes): a view's mask follows its image through the same orientation,
undistortion, crop and downscale, into :attr:`Camera.mask`.

A camera whose distortion cannot be undistorted to a pinhole image (not invertible at the
image border, no valid rectangle) costs its own images, skipped with a warning that gives
the camera and the reason; the dataset is refused only when no image is left.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..errors import DatasetError
from ..settings import WIDE_LENS_MODES
from .camera_model import CameraModel
from .both_formats import add_colmap_beside_transforms
from .colmap import is_colmap_dataset, read_colmap
from .dataset import Camera, Dataset
from .faces import Equirect, Face, face_name, image_circle_angle, is_wide, split_faces
from .images import ImageDecodeError, apply_orientation, fit_size, read_image_meta, resize
from .masks import MaskReader
from .nerfstudio import SPLIT_FILES, TRANSFORMS, is_transforms_dataset, read_transforms
from .scene import SceneSpec, ViewSpec, name_list
from .undistort import Undistorter, make_undistorter


def read_scene(path: Path) -> SceneSpec:
    """Detect the format of ``path`` and read it without loading pixels.

    ``transforms.json`` in the folder (or ``path`` being a .json file) -> nerfstudio /
    instant-ngp; else a COLMAP model in ``sparse/0``, ``sparse`` or the folder itself. A
    folder with both is read from transforms.json, with a warning saying so and what
    became of the model's points (:mod:`spirula.engine.ingest.both_formats`).
    """
    path = Path(os.path.abspath(path))
    if not path.exists():
        raise DatasetError(f"{path}: does not exist")
    if path.is_file() and path.suffix.lower() == ".json":
        return read_transforms(path)
    if not path.is_dir():
        raise DatasetError(f"{path}: not a dataset folder (expected a folder or a transforms.json)")
    if is_transforms_dataset(path):
        scene = read_transforms(path)
        add_colmap_beside_transforms(scene, path)  # a COLMAP model there too: said, its points used if they fit
        return scene
    if is_colmap_dataset(path):
        return read_colmap(path)
    raise DatasetError(
        f"{path}: no dataset found: neither {TRANSFORMS} ({', '.join(SPLIT_FILES)}) nor a COLMAP model "
        "(cameras/images .bin or .txt in sparse/0, sparse or the folder itself)"
    )


def load_dataset(
    path: str | os.PathLike,
    max_size: int | None = 1600,
    *,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    masks: str = "auto",
    wide_lens: str = "faces",
    face_size: int = 0,
) -> Dataset:
    """Load the dataset at ``path`` into undistorted, cropped, downscaled pinhole cameras.

    max_size: longest image side in pixels after downscaling (None or <= 0: keep size).
    workers: image-loading threads (default: min(8, CPU count)).
    progress: called as progress(done, total) from worker threads after each image.
    masks: "auto", "cutout", "ignore" or "off" (:mod:`spirula.engine.ingest.masks`); the mode in
    force is :attr:`Dataset.masks`.
    wide_lens: "faces": an image of a wide camera (spirula/engine/ingest/faces.py: fisheye, FOV,
    equirectangular) becomes its pinhole cube faces, each a camera named 'image#face';
    "crop": undistorted to one pinhole image cropped to its largest valid rectangle (an
    equirectangular camera's images are then skipped). face_size: faces.py's N (0: per face).
    A wide image's mask is split into its faces like the image.
    Returns cameras sorted by name; reader and loader notes are in ``Dataset.warnings``.
    """
    if wide_lens not in WIDE_LENS_MODES:
        raise ValueError(f"wide_lens must be one of {', '.join(WIDE_LENS_MODES)}, not {wide_lens!r}")
    scene = read_scene(Path(path))
    views = sorted(scene.views, key=lambda v: v.name)
    maps = _MapCache(views)
    masker = MaskReader(masks, views)
    lock = threading.Lock()
    done = [0]
    notes: dict[str, list] = {"resized": [], "exif_applied": [], "exif_ignored": [], "deep": []}
    pinhole: dict[CameraModel, dict] = {}  # distorted camera -> its pinhole camera and images
    split: dict = {}  # wide camera -> its faces and images (faces mode)

    def load_one(view: ViewSpec) -> Camera | list[Camera] | ImageDecodeError | tuple[str, str]:
        try:
            if is_wide(view.camera) and wide_lens == "faces":
                cam = _load_faces(view, maps, max_size, notes, lock, split, face_size, masker)
            elif isinstance(view.camera, Equirect):
                raise _UnusableCamera(f"camera {view.camera.describe()}: a 360-degree panorama has no single pinhole "
                                      "image (--wide-lens crop); use --wide-lens faces")
            else:
                cam = _load_camera(view, maps, max_size, notes, lock, pinhole, masker)
        except ImageDecodeError as e:
            cam = e
        except _UnusableCamera as e:
            cam = (str(e), view.name)
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

    cameras = [r for r in results if isinstance(r, Camera)] + [c for r in results if isinstance(r, list) for c in r]
    cameras.sort(key=lambda c: c.name)
    failed = [r for r in results if isinstance(r, ImageDecodeError)]
    no_map: dict[str, list[str]] = {}  # why a camera cannot be undistorted -> its images
    for r in results:
        if isinstance(r, tuple):
            no_map.setdefault(r[0], []).append(r[1])
    for note in _size_notes(notes) + masker.warnings():
        scene.warn(note)
    for err in failed:
        scene.warn(f"{err}; skipped")
    for why, names in no_map.items():
        scene.warn(f"{why}; the {len(names)} image{'s' if len(names) > 1 else ''} of this camera skipped: "
                   f"{name_list(names, limit=5)}")
    if not cameras:
        reasons = "; ".join([str(e) for e in failed[:3]] + list(no_map)[:3])
        raise DatasetError(f"{path}: no image could be loaded" + (f": {reasons}" if reasons else ""))
    mode = masker.resolved()
    if mode == "off":
        for c in cameras:
            c.mask = None
    return Dataset(
        root=scene.root, cameras=cameras, points=scene.points, colors=scene.colors, warnings=list(scene.warnings),
        undistortion=[pinhole[k] for k in sorted(pinhole, key=lambda c: pinhole[c]["camera"])] + face_entries(split, max_size),
        masks=mode, masks_source=masker.source if mode != "off" else "",
        masks_note=masker.summary(sum(c.mask is not None for c in cameras), len(cameras)),
    )


def _read_view(view: ViewSpec, notes: dict[str, list], lock: threading.Lock, masker: MaskReader | None):
    """(image [H, W, 3] uint8 as the camera sees it, the matched camera, its mask [H, W] uint8
    or None) of one view; its orientation, bit depth and rescale go to ``notes``."""
    stored, orientation, bits = read_image_meta(view.image_path)
    image, cam, how = match_camera(stored, orientation, view.camera, view.image_path)
    mask = masker.read(view, stored.shape[:2]) if masker is not None else None
    if mask is not None and how["exif"] == "applied":
        mask = apply_orientation(mask[..., None], orientation)[..., 0]
    with lock:
        if bits > 8:
            notes["deep"].append((view.name, bits))
        if how["exif"] == "applied":
            notes["exif_applied"].append(view.name)
        elif how["exif"] == "ignored":
            notes["exif_ignored"].append(view.name)
        if how["scale"] is not None:
            notes["resized"].append((view.name, how["scale"]))
    return image, cam, mask


def _load_camera(
    view: ViewSpec, maps: _MapCache, max_size: int | None, notes: dict[str, list], lock: threading.Lock,
    pinhole: dict[CameraModel, dict], masker: MaskReader | None = None,
) -> Camera:
    """Read, match, undistort, crop and downscale one view (see the module docstring)."""
    image, cam, mask = _read_view(view, notes, lock, masker)
    undistorter = maps.get(view.camera, cam, view.image_path)
    image = undistorter(image)
    pin = undistorter.dst
    if undistorter.index is not None:  # K changed: report it (Dataset.undistortion)
        with lock:
            entry = pinhole.setdefault(cam, {"camera": cam.describe(), "pinhole": _k(pin), "images": 0})
            entry["images"] += 1
    out_w, out_h = fit_size(pin.width, pin.height, max_size)
    image = resize(image, out_w, out_h)
    if mask is not None:
        mask = resize(undistorter(mask[..., None])[..., 0], out_w, out_h)
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
        mask=mask,
    )


def _load_faces(view: ViewSpec, maps: _MapCache, max_size: int | None, notes: dict[str, list], lock: threading.Lock,
                split: dict, face_size: int, masker: MaskReader | None = None) -> list[Camera]:
    """Read and match one view of a wide camera, then its pinhole faces (spirula/engine/ingest/faces.py),
    each downscaled to ``max_size``: one Camera per face, named face_name(view.name, face); the
    view's mask, if any, is resampled into each face like its image."""
    image, cam, mask = _read_view(view, notes, lock, masker)
    if mask is not None and mask.shape != image.shape[:2]:
        mask = None  # matched to the camera by a rescale: the reader's size rule already named it
    # a circular fisheye's image circle is found in the first image of its camera that is read
    faces: list[Face] = maps.get(view.camera, cam, view.image_path,
                                 lambda c: split_faces(c, face_size, max_angle=image_circle_angle(c, image)))
    with lock:
        entry = split.setdefault(cam, {"camera": cam.describe(), "faces": faces, "images": 0})
        entry["images"] += 1
    out = []
    for face in faces:
        pin = face.camera
        out_w, out_h = fit_size(pin.width, pin.height, max_size)
        sx, sy = out_w / pin.width, out_h / pin.height
        out.append(Camera(name=face_name(view.name, face.name), image_path=view.image_path, width=out_w, height=out_h,
                          fx=pin.fx * sx, fy=pin.fy * sy, cx=pin.cx * sx, cy=pin.cy * sy, w2c=face.w2c(view.w2c),
                          image=resize(face(image), out_w, out_h), source=view.name, face=face.name,
                          mask=None if mask is None else resize(face(mask[..., None])[..., 0], out_w, out_h)))
    return out


def face_entries(split: dict, max_size: int | None = None) -> list[dict]:
    """Dataset.undistortion's entries of the wide cameras split into faces: {"camera": its
    describe(), "faces": [{"face", "model": "PINHOLE", "width", "height", "fx", "fy", "cx",
    "cy"} (native, before the training size) | {"trained": [w, h]} (after ``max_size``)],
    "images": how many}, sorted by camera."""
    out = [{"camera": e["camera"], "images": e["images"], "max_size": max_size or 0,
            "faces": [{"face": f.name} | _k(f.camera) | {"trained": list(fit_size(f.camera.width, f.camera.height,
                                                                                  max_size))}
                      for f in e["faces"]]}
           | ({"image_circle_deg": round(math.degrees(e["faces"][0].max_angle), 2)}
              if e["faces"][0].max_angle is not None else {}) for e in split.values()]
    return sorted(out, key=lambda e: e["camera"])


def _k(pin: CameraModel) -> dict:
    return {"model": "PINHOLE", "width": pin.width, "height": pin.height, "fx": pin.fx, "fy": pin.fy,
            "cx": pin.cx, "cy": pin.cy}


def undistortion_notes(undistortion: list[dict]) -> list[str]:
    """One line per distorted camera of :attr:`Dataset.undistortion`: the camera read,
    the pinhole camera its images were undistorted and cropped to, how many images."""
    out = []
    for u in undistortion:
        if "faces" in u:  # a wide camera split into faces (spirula/engine/ingest/faces.py)
            out.append(_faces_note(u))
            continue
        k = u["pinhole"]
        out.append(f"undistorted {u['images']} image{'s' if u['images'] > 1 else ''} of {u['camera']} to PINHOLE "
                   f"{k['width']}x{k['height']} fx={k['fx']:.6g} fy={k['fy']:.6g} cx={k['cx']:.6g} cy={k['cy']:.6g} "
                   "(cropped to valid pixels; then scaled to the training size)")
    return out


def _faces_note(u: dict) -> str:
    """One line for a wide camera split into faces: the faces' sizes as trained (faces of one
    size named together), and how they came to be (the native size when --max-size scaled them)."""
    groups: dict[tuple, list[str]] = {}
    for f in u["faces"]:
        trained = tuple(f.get("trained", (f["width"], f["height"])))
        groups.setdefault((trained, (f["width"], f["height"])), []).append(f["face"])
    parts = []
    for (trained, native), names in groups.items():
        scaled = f" (from {native[0]}x{native[1]})" if tuple(native) != trained else ""
        parts.append(f"{', '.join(names)} {trained[0]}x{trained[1]} px{scaled}")
    circle = (f"; a circular image: the lens footprint ends at {u['image_circle_deg']:g} degrees"
              if "image_circle_deg" in u else "")
    scaled = any(tuple(f.get("trained", (f["width"], f["height"]))) != (f["width"], f["height"]) for f in u["faces"])
    how = "90-degree cube faces cropped to the lens footprint" + (f", scaled to --max-size {u['max_size']}"
                                                                   if scaled else "")
    n = u["images"]
    return (f"training on {n} image{'s' if n > 1 else ''} of {u['camera']} as {len(u['faces'])} pinhole faces "
            f"each: {'; '.join(parts)} ({how}{circle})")


def match_camera(stored, orientation: int, camera: CameraModel, path: Path):
    """(pixels, camera, how) for an image read as ``stored`` ([H, W, 3]) with EXIF
    ``orientation``, against its ``camera`` (module docstring for the rules).

    how: {"exif": None | "ignored" | "applied", "scale": None | (sx, sy, (w, h), (cw, ch))}.
    Raises DatasetError naming ``path`` when neither the stored nor the oriented pixels
    are the camera's picture at some scale.
    """
    candidates = [(stored, "ignored" if orientation != 1 else None)]
    if orientation != 1:
        candidates.append((apply_orientation(stored, orientation), "applied"))
    cw, ch = camera.width, camera.height
    for image, exif in candidates:
        if image.shape[1] == cw and image.shape[0] == ch:
            return image, camera, {"exif": exif, "scale": None}
    for image, exif in candidates:
        h, w = image.shape[:2]
        if same_picture_scaled(w, h, cw, ch):
            return image, camera.scaled(w, h), {"exif": exif, "scale": (w / cw, h / ch, (w, h), (cw, ch))}
    h, w = stored.shape[:2]
    rotated = f" (EXIF orientation {orientation}: {h}x{w} upright)" if orientation in (5, 6, 7, 8) else ""
    raise DatasetError(
        f"{path}: image is {w}x{h}{rotated} but its camera is {cw}x{ch}, "
        f"which is not the same picture at another scale (aspect {w / h:.4f} vs {cw / ch:.4f})"
    )


def same_picture_scaled(w: int, h: int, cw: int, ch: int) -> bool:
    """True when a w x h image can be a cw x ch one resized: the same aspect within 1 %,
    or each side within a pixel of the other side's scale (rounding of small images)."""
    sx, sy = w / cw, h / ch
    return abs(sx / sy - 1.0) < 0.01 or (abs(cw * sy - w) <= 1.0 and abs(ch * sx - h) <= 1.0)


def _size_notes(notes: dict[str, list]) -> list[str]:
    out = []
    if notes["resized"]:
        scales = sorted({(round(sx, 4), round(sy, 4)) for _, (sx, sy, _, _) in notes["resized"]})
        _, (_, _, (w, h), (cw, ch)) = min(notes["resized"])
        if len(scales) == 1:
            sx, sy = scales[0]
            how = f"by {sx:g}" if abs(sx - sy) < 1e-3 else f"by {sx:g} x {sy:g}"
        else:
            how = f"by {scales[0][0]:g} to {scales[-1][0]:g} (scales differ between images)"
        out.append(
            f"{len(notes['resized'])} images differ in size from their camera (e.g. {w}x{h} for {cw}x{ch}); "
            f"intrinsics rescaled {how}: {name_list([n for n, _ in notes['resized']])}"
        )
    if notes["exif_ignored"]:
        out.append(
            f"{len(notes['exif_ignored'])} images carry an EXIF orientation; used as stored, as COLMAP does "
            f"(the model describes the stored pixels): {name_list(notes['exif_ignored'])}"
        )
    if notes["deep"]:
        bits = sorted({b for _, b in notes["deep"]})
        out.append(
            f"{len(notes['deep'])} images have {' or '.join(map(str, bits))} bits per channel; used at 8 bits per "
            f"channel, rounded to the nearest level (the training's ground truth is 8-bit; README, 'Precision kept'): "
            f"{name_list([n for n, _ in notes['deep']], limit=5)}"
        )
    if notes["exif_applied"]:
        out.append(
            f"{len(notes['exif_applied'])} images are stored turned against their camera; their EXIF orientation "
            f"was applied to match it: {name_list(notes['exif_applied'])}"
        )
    return out


class _UnusableCamera(DatasetError):
    """A camera whose images cannot be undistorted (the distortion is not invertible at
    the border, or leaves no valid rectangle): its images are skipped, with the reason."""


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

    def get(self, view_camera: CameraModel, camera: CameraModel, image_path: Path,
            build: Callable = make_undistorter) -> Undistorter:
        """The map of ``camera`` (``view_camera`` rescaled to the image size on disk, or
        itself) made by ``build`` (the undistorter, or the faces' split); _UnusableCamera
        naming the camera if it cannot be built."""
        with self._lock:
            group = self._futures.setdefault(view_camera, {})
            fut = group.get(camera)
            owner = fut is None
            if owner:
                fut = group[camera] = Future()
        if owner:
            try:
                fut.set_result(build(camera))
            except DatasetError as e:
                fut.set_exception(_UnusableCamera(f"camera {e}"))
        return fut.result()

    def release(self, view_camera: CameraModel) -> None:
        """One view of ``view_camera`` is done (whether or not it used a map)."""
        with self._lock:
            self._users[view_camera] -= 1
            if self._users[view_camera] <= 0:
                self._futures.pop(view_camera, None)
