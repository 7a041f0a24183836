"""nerfstudio / instant-ngp ``transforms.json`` reader.

Intrinsics may be top-level (shared) or per frame (a frame's keys win): focal length from
``fl_x``/``fl_y`` or ``camera_angle_x``/``camera_angle_y`` (radians, full field of view;
``fl_y`` defaults to ``fl_x``), principal point ``cx``/``cy`` (default: image centre),
size ``w``/``h`` (default: read from the image header), OpenCV distortion ``k1 k2 p1 p2``.
``transform_matrix`` is camera-to-world in OpenGL/NeRF axes (x right, y up, z backward);
it is converted to an OpenCV world-to-camera by flipping the camera y and z axes.
instant-ngp's ``scale``/``offset``/``aabb_scale`` and nerfstudio's ``applied_transform``
and ``ply_file_path`` are ignored (poses stay in the file's world frame, points None).
Frames whose image file is missing are skipped with a warning.
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
from .scene import SceneSpec, ViewSpec, name_list, rigid_w2c_from_c2w

TRANSFORMS = "transforms.json"
_TRY_EXTENSIONS = (".png", ".jpg", ".jpeg", ".PNG", ".JPG", ".JPEG")
_GL_TO_CV = np.diag([1.0, -1.0, -1.0, 1.0])  # flips camera y and z (right-multiplied on c2w)


def read_transforms(root: Path) -> SceneSpec:
    """Read ``root/transforms.json`` (or ``root`` itself when it is the json file).

    Raises DatasetError naming the file for invalid JSON, a missing ``frames`` list, an
    unsupported ``camera_model``, non-zero k3/k4, missing focal length or a bad pose, and
    when no listed image exists.
    """
    path = Path(root)
    if path.is_dir():
        path = path / TRANSFORMS
    base = path.parent
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise DatasetError(f"{path}: cannot read ({e.strerror or e})") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: not valid JSON ({e})") from e
    frames = meta.get("frames") if isinstance(meta, dict) else None
    if not isinstance(frames, list):
        raise DatasetError(f"{path}: no 'frames' list")

    scene = SceneSpec(root=base, views=[])
    missing: list[str] = []
    found: list[tuple[Path, dict, np.ndarray]] = []
    for i, frame in enumerate(frames):
        where = f"{path} frame {i}"
        if not isinstance(frame, dict) or "file_path" not in frame or "transform_matrix" not in frame:
            raise DatasetError(f"{where}: needs 'file_path' and 'transform_matrix'")
        image_path = _resolve(base, str(frame["file_path"]))
        if image_path is None:
            missing.append(str(frame["file_path"]))
            continue
        w2c = rigid_w2c_from_c2w(_as_4x4(frame["transform_matrix"], where) @ _GL_TO_CV, where)
        found.append((image_path, frame, w2c))

    if missing:
        scene.warn(f"{len(missing)} of {len(frames)} frames in {path} have no image file, skipped: {name_list(missing)}")
    if not found:
        raise DatasetError(f"{path}: none of the {len(frames)} listed images exists")

    common = Path(os.path.commonpath([str(p.parent) for p, _, _ in found]))
    for image_path, frame, w2c in found:
        try:
            camera = _intrinsics(meta, frame, image_path, f"{path} ({image_path.name})")
        except ImageDecodeError as e:  # size needed from an image that cannot be read
            scene.warn(f"{e}; skipped")
            continue
        scene.views.append(ViewSpec(image_path.relative_to(common).as_posix(), image_path, camera, w2c))
    if not scene.views:
        raise DatasetError(f"{path}: none of the listed images can be read")
    return scene


def _resolve(base: Path, file_path: str) -> Path | None:
    """The existing image for ``file_path`` (as written, else with an image extension)."""
    p = Path(file_path)
    p = p if p.is_absolute() else base / p
    p = Path(os.path.abspath(p))  # normalise "." and ".." without resolving links
    if p.is_file():
        return p
    for ext in _TRY_EXTENSIONS:
        q = p.with_name(p.name + ext)
        if q.is_file():
            return q
    return None


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


def _lookup(levels: list[dict], key: str):
    for level in levels:
        if key in level and level[key] is not None:
            return level[key]
    return None


def _focal(levels: list[dict], fl_key: str, angle_key: str, size: int, where: str) -> float | None:
    """Focal length in pixels from the first level (frame, then top) giving either key."""
    for level in levels:
        if level.get(fl_key) is not None:
            return float(level[fl_key])
        if level.get(angle_key) is not None:
            angle = float(level[angle_key])
            if not 0.0 < angle < math.pi:
                raise DatasetError(f"{where}: {angle_key}={angle} is not in (0, pi)")
            return 0.5 * size / math.tan(0.5 * angle)
    return None


def _intrinsics(meta: dict, frame: dict, image_path: Path, where: str) -> CameraModel:
    levels = [frame, meta]
    model = str(_lookup(levels, "camera_model") or "OPENCV")
    if _lookup(levels, "is_fisheye"):
        model = "fisheye (is_fisheye)"
    if model not in ("OPENCV", "PINHOLE"):
        raise DatasetError(f"{where}: camera model {model} is not supported (supported: OPENCV, PINHOLE)")
    for key in ("k3", "k4"):
        if float(_lookup(levels, key) or 0.0) != 0.0:
            raise DatasetError(f"{where}: distortion coefficient {key} is not supported (only k1 k2 p1 p2)")
    w, h = _lookup(levels, "w"), _lookup(levels, "h")
    if w is None or h is None:
        w, h = image_size(image_path)
    w, h = int(round(float(w))), int(round(float(h)))
    fx = _focal(levels, "fl_x", "camera_angle_x", w, where)
    fy = _focal(levels, "fl_y", "camera_angle_y", h, where)
    if fx is None and fy is None:
        raise DatasetError(f"{where}: no focal length (fl_x/fl_y or camera_angle_x/camera_angle_y)")
    fx = fy if fx is None else fx
    fy = fx if fy is None else fy
    cx, cy = _lookup(levels, "cx"), _lookup(levels, "cy")
    dist = [float(_lookup(levels, k) or 0.0) for k in ("k1", "k2", "p1", "p2")]
    camera = CameraModel(
        model, w, h, fx, fy,
        w / 2.0 if cx is None else float(cx),
        h / 2.0 if cy is None else float(cy),
        *dist,
    )
    camera.check(where)
    return camera
