"""nerfstudio / instant-ngp / NeRF-synthetic ``transforms.json`` reader.

Files: ``transforms.json`` in the folder; without it the NeRF-synthetic split files
``transforms_train.json``, ``transforms_val.json`` and ``transforms_test.json`` that are
present are read together (an image listed in several is used once).

Intrinsics may be top-level (shared) or per frame (a frame's keys win), given as
``fl_x``/``fl_y`` (pixels), ``camera_angle_x``/``camera_angle_y`` (radians, full field of
view; ``fl_y`` defaults to ``fl_x`` and the other way round) or an ``intrinsic_matrix``
(3x3 or 4x4, NeuS2 and others); principal point ``cx``/``cy`` (default: image centre);
size ``w``/``h`` (default: the stored size of the image, read from its header).
Numbers written as strings are accepted.

Camera models (``camera_model``, or instant-ngp's ``is_fisheye``), distortion keys
``k1 k2 k3 k4 p1 p2``:

* ``OPENCV`` (the default), ``PINHOLE``, ``SIMPLE_PINHOLE``, ``PERSPECTIVE``: nerfstudio's
  polynomial radial (k1, k2, k3) and tangential (p1, p2) distortion -> COLMAP ``PINHOLE``
  (none), ``OPENCV`` (k3 = 0) or ``FULL_OPENCV`` (k3 != 0); k4 != 0 (an r^8 term no COLMAP
  model has) is refused.
* ``OPENCV_FISHEYE`` / ``FISHEYE`` / ``is_fisheye``: k1..k4 -> COLMAP ``OPENCV_FISHEYE``;
  p1, p2 != 0 are refused.
* ``EQUIRECTANGULAR``: a 360-degree panorama (2:1; another aspect is refused), split into
  pinhole faces by the loader (spirula/engine/ingest/faces.py). nerfstudio's convention for it
  is the full sphere (fx = fy = h, cx = w / 2, cy = h / 2; in its OpenGL camera axes the image
  centre looks down -z, the top row up +y, x grows to the right), which after the axis flip
  below is exactly :class:`~spirula.engine.ingest.faces.Equirect`'s mapping; the focal length,
  principal point and distortion keys are therefore not read.
* Anything else (``FISHEYE624``, ``OMNIDIRECTIONALSTEREO_L``, ...) is refused by name.

``transform_matrix`` is camera-to-world in OpenGL/NeRF axes (x right, y up, z backward);
it is converted to an OpenCV world-to-camera by flipping the camera y and z axes.
instant-ngp's ``scale``/``offset``/``aabb_scale`` and nerfstudio's ``applied_transform``
are ignored (poses stay in the file's world frame). nerfstudio's ``ply_file_path`` (the
SfM points, in the same frame as the poses) gives the initial points when it can be read.

Paths (``file_path``) are looked up by the rules of :mod:`spirula.engine.ingest.paths`: as
written (relative to the json's folder, or absolute; ``\\`` read as ``/``; either Unicode
normal form), then with an image extension added (NeRF-synthetic writes none), then in
another letter case, then by their trailing components under the json's folder (an
absolute path from another machine: ``images/0001.jpg``, then ``0001.jpg``). Paths found
by letter case or trailing components are listed in a warning, and so are names that
more than one file could be (``a.png`` and ``a.jpg`` for ``a``): the file taken, the
others, and the rule. Frames whose image is missing are
skipped with a warning naming them; so are frames whose pose or intrinsics cannot be
used (a NaN, a scaled or mirrored rotation, an unsupported model): the warning names
the file, the frame and the reason; only when no frame is left is the dataset refused.

Masks: a frame's ``mask_path`` (nerfstudio's; relative to the json's folder or absolute,
looked up as ``ply_file_path`` is) is that image's mask, with the masks folder's rules
(spirula/engine/ingest/masks.py: white = keep, a missing or differently sized one named in a
warning and the image used unmasked); frames without one fall back to a ``masks/`` folder.

Images are used as stored (EXIF orientation not applied), as nerfstudio and
instant-ngp load them; see :mod:`spirula.engine.ingest.load`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .camera_model import CameraModel
from .images import ImageDecodeError, image_size
from .paths import EXTENSIONS as IMAGE_SUFFIXES, Finder, ambiguity_warning, expected_and_found, relative_name
from .scene import SceneSpec, ViewSpec, name_list, rigid_w2c_from_c2w

TRANSFORMS = "transforms.json"
SPLIT_FILES = ("transforms_train.json", "transforms_val.json", "transforms_test.json")
_GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])  # flips camera y and z (right-multiplied on c2w)
_PERSPECTIVE = ("OPENCV", "PINHOLE", "SIMPLE_PINHOLE", "PERSPECTIVE")
_FISHEYE = ("OPENCV_FISHEYE", "FISHEYE")


def transforms_files(path: Path) -> list[Path]:
    """The json files a dataset at ``path`` consists of ([] when none): ``path`` itself
    when it is a file, else ``transforms.json``, else the split files present."""
    path = Path(path)
    if path.is_file():
        return [path]
    if (path / TRANSFORMS).is_file():
        return [path / TRANSFORMS]
    return [path / n for n in SPLIT_FILES if (path / n).is_file()]


def is_transforms_dataset(path: Path) -> bool:
    return bool(transforms_files(path))


def read_transforms(root: Path) -> SceneSpec:
    """Read the transforms file(s) of ``root`` (a folder or a json file).

    Raises DatasetError naming the file for invalid JSON or a missing ``frames`` list, and
    when no frame is left: no listed image exists, or every frame's pose or intrinsics
    cannot be used (an unsupported camera model or distortion, a missing focal length, a
    bad pose: the first reason is given). Frames that cannot be used while others can
    are skipped with a warning.
    """
    files = transforms_files(Path(root))
    if not files:
        raise DatasetError(f"{root}: no {TRANSFORMS} (nor {', '.join(SPLIT_FILES)})")
    base = files[0].parent
    scene = SceneSpec(root=base, views=[])
    found: list[tuple[Path, dict, dict, np.ndarray, str, Path]] = []
    seen: set[Path] = set()
    missing: list[str] = []
    guessed: list[str] = []
    bad: list[str] = []  # frames whose entry cannot be used: '<file> frame <i> ...: why'
    ambiguous: list[str] = []  # names that more than one file could be (spirula/engine/ingest/paths.py)
    finders: dict[Path, Finder] = {}
    n_frames = 0
    ply = None
    for path in files:
        meta, frames = _load_json(path)
        n_frames += len(frames)
        ply = ply or meta.get("ply_file_path")
        for i, frame in enumerate(frames):
            where = f"{path} frame {i}"
            if not isinstance(frame, dict) or "file_path" not in frame or "transform_matrix" not in frame:
                bad.append(f"{where}: needs 'file_path' and 'transform_matrix'")
                continue
            file_path = frame["file_path"]
            if not isinstance(file_path, str):
                bad.append(f"{where}: file_path is not a string ({file_path!r})")
                continue
            hit = finders.setdefault(path.parent, Finder(path.parent)).find(file_path)
            if hit is None:
                missing.append(file_path)
                continue
            image_path = hit.path
            if hit.rule in ("letter case", "trailing components"):
                guessed.append(f"{file_path} -> {relative_name(image_path, path.parent)} ({hit.rule})")
            note = hit.ambiguity(file_path, path.parent)
            if note:
                ambiguous.append(note)
            try:
                w2c = rigid_w2c_from_c2w(_as_4x4(frame["transform_matrix"], where) @ _GL_TO_CV, f"{where} ({file_path})")
            except DatasetError as e:
                bad.append(str(e))
                continue
            if image_path in seen:
                continue
            seen.add(image_path)
            found.append((image_path, frame, meta, w2c, f"{path} ({image_path.name})", path))

    listing = " and ".join(str(p) for p in files)
    if missing:
        scene.warn(f"{len(missing)} of {n_frames} frames in {listing} have no image file, skipped: {name_list(missing)}")
    if guessed:
        scene.warn(f"{len(guessed)} image paths in {listing} do not exist as written; found by another letter case "
                   f"or their trailing components: {name_list(guessed, limit=5)}")
    if ambiguous:
        scene.warn(ambiguity_warning(listing, ambiguous))
    if not found and bad:
        raise _no_frame_left(bad, listing)
    if not found:
        on_disk = sorted(relative_name(q, base) for q in base.rglob("*")
                         if q.suffix.lower() in IMAGE_SUFFIXES and q.is_file())
        raise DatasetError(f"{listing}: none of the {n_frames} listed images exists: "
                           + expected_and_found(missing, on_disk, "the folder"))

    common = Path(os.path.commonpath([str(p.parent) for p, *_ in found]))
    for image_path, frame, meta, w2c, where, json_path in found:
        try:
            camera = _intrinsics(meta, frame, image_path, where)
        except ImageDecodeError as e:  # size needed from an image that cannot be read
            scene.warn(f"{e}; skipped")
            continue
        except DatasetError as e:  # this frame's intrinsics (the frame's keys, or shared ones)
            bad.append(str(e))
            continue
        scene.views.append(ViewSpec(image_path.relative_to(common).as_posix(), image_path, camera, w2c,
                                    _mask_path(frame, image_path, where, json_path.parent, scene)))
    if bad and scene.views:
        more = f"; ... and {len(bad) - 5} more" if len(bad) > 5 else ""
        scene.warn(f"{len(bad)} of {n_frames} frames in {listing} cannot be used, skipped: {'; '.join(bad[:5])}{more}")
    if not scene.views and bad:
        raise _no_frame_left(bad, listing)
    if not scene.views:
        raise DatasetError(f"{listing}: none of the listed images can be read")
    if ply:
        _read_points(scene, base, str(ply))
    return scene


def _mask_path(frame: dict, image_path: Path, where: str, base: Path, scene: SceneSpec) -> Path | None:
    """The frame's ``mask_path`` as a path (None without one): found as written or by the
    path rules (spirula/engine/ingest/paths.py, no extension added), else as written under the
    json's folder (the mask reader names it missing)."""
    value = frame.get("mask_path")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        scene.warn(f"{where}: mask_path is not a file name ({value!r}); the mask folder's rules apply to "
                   f"{image_path.name}")
        return None
    hit = Finder(base, extensions=()).find(value)
    return hit.path if hit is not None else base / value.replace("\\", "/")


def _no_frame_left(bad: list[str], listing: str) -> DatasetError:
    more = f" (and {len(bad) - 1} more frames like it)" if len(bad) > 1 else ""
    return DatasetError(f"{bad[0]}{more}; no frame of {listing} is left")


def _load_json(path: Path) -> tuple[dict, list]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as e:
        raise DatasetError(f"{path}: cannot read ({e.strerror or e})") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: not valid JSON ({e})") from e
    frames = meta.get("frames") if isinstance(meta, dict) else None
    if not isinstance(frames, list):
        raise DatasetError(f"{path}: no 'frames' list")
    return meta, frames


def _read_points(scene: SceneSpec, base: Path, ply_path: str) -> None:
    from ..errors import PlyError
    from ..io.ply import read_point_cloud

    hit = Finder(base, extensions=()).find(ply_path)
    if hit is None:
        scene.warn(f"{base}: ply_file_path {ply_path} does not exist; no initial points")
        return
    path = hit.path
    note = hit.ambiguity(ply_path, base)
    if note:
        scene.warn(f"ply_file_path of {base} matches more than one file: {note}")
    try:
        scene.points, scene.colors = read_point_cloud(path)
    except PlyError as e:
        scene.warn(f"{e}; no initial points")


# ------------------------------------------------------------------------- intrinsics


def _as_4x4(value, where: str) -> np.ndarray:
    """[4, 4] float64 from a 4x4 or 3x4 nested list."""
    try:
        m = np.asarray(value, np.float64)
    except (TypeError, ValueError) as e:
        raise DatasetError(f"{where}: transform_matrix is not numeric ({e})") from e
    if m.shape == (3, 4):
        m = np.vstack([m, [0.0, 0.0, 0.0, 1.0]])
    if m.shape != (4, 4):
        raise DatasetError(f"{where}: transform_matrix must be 4x4 or 3x4, got shape {m.shape}")
    return m


def _number(value, key: str, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: {key} is not a number ({value!r})") from None
    if not math.isfinite(v):
        raise DatasetError(f"{where}: {key} is not finite ({value!r})")
    return v


def _lookup(levels: list[dict], key: str, where: str) -> float | None:
    for level in levels:
        if level.get(key) is not None:
            return _number(level[key], key, where)
    return None


def _focal(levels: list[dict], fl_key: str, angle_key: str, size: int, where: str) -> float | None:
    """Focal length in pixels from the first level (frame, then top) giving either key."""
    for level in levels:
        if level.get(fl_key) is not None:
            return _number(level[fl_key], fl_key, where)
        if level.get(angle_key) is not None:
            angle = _number(level[angle_key], angle_key, where)
            if not 0.0 < angle < math.pi:
                raise DatasetError(f"{where}: {angle_key}={angle} is not in (0, pi)")
            return 0.5 * size / math.tan(0.5 * angle)
    return None


def _matrix_intrinsics(levels: list[dict], where: str) -> tuple[float, float, float, float] | None:
    for level in levels:
        k = level.get("intrinsic_matrix")
        if k is None:
            continue
        try:
            m = np.asarray(k, np.float64)
        except (TypeError, ValueError):
            m = np.zeros(0)
        if m.shape not in ((3, 3), (4, 4)) or not np.all(np.isfinite(m)):
            raise DatasetError(f"{where}: intrinsic_matrix must be a finite 3x3 or 4x4 matrix")
        return m[0, 0], m[1, 1], m[0, 2], m[1, 2]
    return None


def _intrinsics(meta: dict, frame: dict, image_path: Path, where: str) -> CameraModel:
    levels = [frame, meta]
    name = next((str(lv["camera_model"]) for lv in levels if lv.get("camera_model") is not None), "OPENCV")
    if any(lv.get("is_fisheye") for lv in levels):
        name = "OPENCV_FISHEYE"
    w, h = _lookup(levels, "w", where), _lookup(levels, "h", where)
    if w is None or h is None:
        w, h = image_size(image_path, apply_exif=False)
    w, h = int(round(w)), int(round(h))
    if name.upper() == "EQUIRECTANGULAR":  # the full sphere (module docstring): only the size is read
        from .faces import Equirect

        eq = Equirect(w, h)
        eq.check(where)
        return eq
    fx = _focal(levels, "fl_x", "camera_angle_x", w, where)
    fy = _focal(levels, "fl_y", "camera_angle_y", h, where)
    cx, cy = _lookup(levels, "cx", where), _lookup(levels, "cy", where)
    k_matrix = _matrix_intrinsics(levels, where)
    if k_matrix is not None:
        fx = k_matrix[0] if fx is None else fx
        fy = k_matrix[1] if fy is None else fy
        cx = k_matrix[2] if cx is None else cx
        cy = k_matrix[3] if cy is None else cy
    if fx is None and fy is None:
        raise DatasetError(f"{where}: no focal length (fl_x/fl_y, camera_angle_x/camera_angle_y or intrinsic_matrix)")
    fx = fy if fx is None else fx
    fy = fx if fy is None else fy
    cx = w / 2.0 if cx is None else cx
    cy = h / 2.0 if cy is None else cy
    k1, k2, k3, k4, p1, p2 = (_lookup(levels, key, where) or 0.0 for key in ("k1", "k2", "k3", "k4", "p1", "p2"))
    upper = name.upper()
    if upper in _PERSPECTIVE:
        if k4 != 0.0:
            raise DatasetError(f"{where}: distortion coefficient k4 of camera model {name} is not supported "
                               "(an r^8 radial term; only k1 k2 k3 p1 p2)")
        if k3 != 0.0:
            camera = CameraModel("FULL_OPENCV", w, h, fx, fy, cx, cy, (k1, k2, p1, p2, k3, 0.0, 0.0, 0.0))
        elif any((k1, k2, p1, p2)):
            camera = CameraModel("OPENCV", w, h, fx, fy, cx, cy, (k1, k2, p1, p2))
        else:
            camera = CameraModel("PINHOLE", w, h, fx, fy, cx, cy)
    elif upper in _FISHEYE:
        if p1 != 0.0 or p2 != 0.0:
            raise DatasetError(f"{where}: camera model {name} has no tangential distortion (p1, p2 must be 0)")
        camera = CameraModel("OPENCV_FISHEYE", w, h, fx, fy, cx, cy, (k1, k2, k3, k4))
    else:
        raise DatasetError(f"{where}: camera model {name} is not supported "
                           f"(supported: {', '.join(_PERSPECTIVE + _FISHEYE)}, EQUIRECTANGULAR)")
    camera.check(where)
    return camera
