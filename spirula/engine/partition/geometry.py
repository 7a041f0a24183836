"""The geometry a partition is made from: the scene's up axis and ground plane, and which
SfM points each camera sees.

Conventions: world units of the dataset; cameras in OpenCV axes (x right, y down, z
forward), ``w2c`` world-to-camera [4, 4] float64, as everywhere in spirula/engine/ingest.

* Up axis: the mean of the cameras' own up directions (-y of each camera in world
  axes). Where the camera centres spread over a plane (a walk, a drive, a drone grid:
  the smallest spread of their principal axes under a quarter of the middle one), the
  normal of that plane is used instead, signed to agree with the mean up (and kept only
  when within 45 degrees of it). Refused (PartitionError) when the cameras' up
  directions cancel out (no consistent up: a turntable shot upside down half the time).
* Ground frame: two unit axes (e1, e2) perpendicular to up; a world point p has ground
  coordinates (p . e1, p . e2).
* Visibility: a point is seen by a camera when it projects inside the image, in front
  of the camera (depth > 1e-6), and is not hidden: each camera splats the points into a
  coarse depth grid (``grid`` x ``grid`` cells over the image) and a point farther than
  ``1 + occlusion_slack`` (default 1.25) times its cell's nearest depth is hidden. SfM
  points lie on surfaces, so this approximates which surfaces a view sees without the
  COLMAP tracks (which not every dataset keeps); a surface seen at a grazing angle (the
  ground near the horizon) hides some of its own far points, which the slack bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DatasetError, SpirulaError


class PartitionError(SpirulaError):
    """A scene cannot be partitioned as asked; the message gives the reason and the fix."""


@dataclass
class SceneGeometry:
    """Poses, intrinsics and SfM points of a COLMAP dataset, without pixels.

    names: [C] image names (as in the model), sorted.
    image_ids, camera_ids: [C] int, the model's ids of each image and of its camera.
    w2c: [C, 4, 4] float64 world-to-camera. centers: [C, 3] float64 camera centres.
    intrinsics: [C, 6] float64 (fx, fy, cx, cy, width, height) in pixels of the stored image
    (distortion ignored: it moves a point by a few pixels, not across a cell).
    points: [P, 3] float64 SfM points (P may be 0); colors: [P, 3] uint8.
    model_folder: the sparse model read.
    """

    root: Path
    model_folder: Path
    names: list[str]
    image_ids: np.ndarray
    camera_ids: np.ndarray
    w2c: np.ndarray
    centers: np.ndarray
    intrinsics: np.ndarray
    points: np.ndarray
    colors: np.ndarray


def read_geometry(root: Path) -> SceneGeometry:
    """Read the COLMAP model of the dataset at ``root`` (spirula.engine.ingest.colmap's rules for
    where it is). DatasetError naming the folder when there is no COLMAP model (a
    transforms.json dataset cannot be partitioned yet) or no usable image."""
    from ..ingest.camera_model import CameraModel
    from ..ingest.colmap import find_model
    from ..ingest.colmap_format import read_model

    root = Path(root)
    folder, _ = find_model(root)
    if folder is None:
        raise DatasetError(f"{root}: no COLMAP model in sparse/0, sparse or the folder itself (partitioning "
                           "needs a COLMAP dataset)")
    model = read_model(folder)
    rows = []
    for im in model.images.values():
        cam = model.cameras.get(im.camera_id)
        if cam is None:
            continue
        try:
            k = CameraModel.from_colmap(cam.model, cam.width, cam.height, cam.params, model.cameras_file)
        except DatasetError:
            continue
        rows.append((im.name, im.image_id, im.camera_id, im.w2c(), (k.fx, k.fy, k.cx, k.cy, k.width, k.height)))
    if not rows:
        raise DatasetError(f"{folder}: no image with a usable camera and pose")
    rows.sort(key=lambda r: r[0])
    w2c = np.stack([r[3] for r in rows])
    centers = -np.einsum("cji,cj->ci", w2c[:, :3, :3], w2c[:, :3, 3])
    pts = np.zeros((0, 3)) if model.points is None else np.asarray(model.points, np.float64)
    cols = np.zeros((0, 3), np.uint8) if model.colors is None else np.asarray(model.colors, np.uint8)
    return SceneGeometry(root, folder, [r[0] for r in rows], np.array([r[1] for r in rows]),
                         np.array([r[2] for r in rows]), w2c, centers,
                         np.array([r[4] for r in rows], np.float64), pts, cols)


def up_axis(w2c: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """[3] unit up vector of the scene from world-to-camera poses [C, 4, 4] and camera
    centres [C, 3] (module docstring). PartitionError when the cameras agree on no up."""
    ups = -w2c[:, 1, :3]                     # camera -y axis in world coordinates (rows of R)
    mean_up = ups.mean(axis=0)
    norm = np.linalg.norm(mean_up)
    if norm < 0.3:
        raise PartitionError(f"the cameras' up directions disagree (their mean has length {norm:.2f} of 1): "
                             "no ground plane to split on")
    mean_up /= norm
    if len(centers) >= 3:
        d = centers - centers.mean(axis=0)
        _, s, vt = np.linalg.svd(d, full_matrices=False)
        if s[1] > 0 and s[2] < 0.25 * s[1]:
            normal = vt[2] * np.sign(vt[2] @ mean_up or 1.0)
            if normal @ mean_up > np.cos(np.radians(45)):
                return normal / np.linalg.norm(normal)
    return mean_up


def ground_frame(up: np.ndarray) -> np.ndarray:
    """[2, 3] float64: two orthonormal axes perpendicular to ``up`` (right-handed with it)."""
    up = up / np.linalg.norm(up)
    helper = np.eye(3)[int(np.argmin(np.abs(up)))]
    e1 = np.cross(helper, up)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(up, e1)
    return np.stack([e1, e2])


def to_ground(xyz: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """[N, 2] ground coordinates of world points [N, 3] in ``frame`` ([2, 3])."""
    return np.asarray(xyz, np.float64) @ frame.T


def visibility(w2c: np.ndarray, intrinsics: np.ndarray, points: np.ndarray, grid: int = 32,
               occlusion_slack: float = 0.25, occlusion: bool = True) -> np.ndarray:
    """[C, P] bool: camera c sees point p (module docstring; ``occlusion`` False: every
    point in the image and in front is seen). Cost O(C x P) in memory per camera only;
    callers subsample large point sets."""
    c_count, p_count = len(w2c), len(points)
    seen = np.zeros((c_count, p_count), bool)
    if p_count == 0:
        return seen
    pts = np.asarray(points, np.float64)
    for c in range(c_count):  # per camera: every point at once
        cam = pts @ w2c[c, :3, :3].T + w2c[c, :3, 3]
        z = cam[:, 2]
        fx, fy, cx, cy, w, h = intrinsics[c]
        front = z > 1e-6
        zs = np.where(front, z, 1.0)
        u = fx * cam[:, 0] / zs + cx
        v = fy * cam[:, 1] / zs + cy
        inside = front & (u >= 0) & (u < w) & (v >= 0) & (v < h)
        idx = np.flatnonzero(inside)
        if not len(idx) or not occlusion:
            seen[c, idx] = True
            continue
        cell = (np.minimum((v[idx] / h * grid).astype(np.int64), grid - 1) * grid
                + np.minimum((u[idx] / w * grid).astype(np.int64), grid - 1))
        nearest = np.full(grid * grid, np.inf)
        np.minimum.at(nearest, cell, z[idx])
        seen[c, idx] = z[idx] <= nearest[cell] * (1.0 + occlusion_slack)
    return seen
