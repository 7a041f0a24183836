"""A dataset folder holding both ``transforms.json`` and a COLMAP model (``sparse/0``),
as nerfstudio's ``ns-process-data`` leaves it.

Policy: ``transforms.json`` is read (it names each image file and its intrinsics itself;
the COLMAP model is its usual source), and a warning says so. The model is not ignored
silently: when transforms.json gives no points of its own (``ply_file_path``), the
model's ``points3D`` become the initial points -- but only after checking that the two
files agree on the poses of the images they share, since ns-process-data writes the
poses in another world frame (axes permuted and flipped, ``applied_transform``):

* the world rotation R between the frames is the chordal mean (Hartley et al. 2013,
  "Rotation averaging", eq. 7: the SVD projection of the summed matrices) of
  ``R_t_i^T R_c_i`` over the shared images i (``R_t``, ``R_c``: their world-to-camera
  rotations, both in OpenCV camera axes), since ``R_c = R_t R`` for a camera seen in both;
* scale s and translation T then map the COLMAP camera centres onto the transforms.json
  ones by least squares (``c_t = s R c_c + T``);
* the frames agree when every shared camera's rotation is within ``MAX_ANGLE_DEG`` of
  ``R_t R`` and the centres' RMS residual is at most ``MAX_RESIDUAL`` of the cameras'
  spread. The points are then mapped by ``s R p + T``, with a warning giving the fit;
  otherwise they are left out, with a warning giving the disagreement.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import numpy as np

from ..errors import DatasetError
from .colmap import find_model
from .colmap_format import read_model
from .scene import SceneSpec

MAX_ANGLE_DEG = 1.0
MAX_RESIDUAL = 1e-3
MIN_SHARED = 2


def add_colmap_beside_transforms(scene: SceneSpec, root: Path) -> None:
    """``scene`` was read from ``root``'s transforms.json; say so, and take the points of
    the COLMAP model beside it when the poses agree (module docstring)."""
    folder, _ = find_model(root)
    if folder is None:
        return
    where = folder.relative_to(root).as_posix() if folder != root else "the folder itself"
    head = (f"{root} holds both transforms.json and a COLMAP model ({where}): transforms.json is read "
            "(README, 'Bad input': it wins)")
    try:
        model = read_model(folder)
    except DatasetError as e:
        scene.warn(f"{head}; the model cannot be read, so its points are not used ({e})")
        return
    if scene.points is not None and len(scene.points):
        scene.warn(f"{head}; its own points (ply_file_path) are used, not the model's points3D")
        return
    if model.points is None or not len(model.points):
        scene.warn(f"{head}; the model has no points3D either")
        return
    by_name = {PurePosixPath(im.name).name: im for im in model.images.values()}
    shared = [(v, by_name[v.image_path.name]) for v in scene.views if v.image_path.name in by_name]
    n = len(model.points)
    if len(shared) < MIN_SHARED:
        scene.warn(f"{head}; its {n} points3D are not used: {len(shared)} image(s) are in both, too few to check "
                   "that the two agree on the poses")
        return
    s, r, t, angle, residual = fit_frames([v.w2c for v, _ in shared], [im.w2c() for _, im in shared])
    if angle > MAX_ANGLE_DEG or residual > MAX_RESIDUAL or s <= 0:
        scene.warn(f"{head}; its {n} points3D are not used: the poses of the {len(shared)} images in both disagree "
                   f"(after the best similarity transform: rotations up to {angle:.3g} degrees apart, camera "
                   f"centres off by {residual:.2%} of their spread)")
        return
    pts = (s * np.asarray(model.points, np.float64) @ r.T + t).astype(np.float32)
    keep = np.isfinite(pts).all(axis=1)
    scene.points, scene.colors = pts[keep], model.colors[keep]
    scene.warn(f"{head}; its {int(keep.sum())} points3D are the initial points, mapped into the transforms.json "
               f"frame (the {len(shared)} images in both agree on their poses after a similarity transform of "
               f"scale {s:.6g}: rotations within {angle:.2g} degrees, centres within {residual:.1e} of their spread)")


def fit_frames(w2c_t: list[np.ndarray], w2c_c: list[np.ndarray]) -> tuple[float, np.ndarray, np.ndarray, float, float]:
    """(s, R [3, 3], T [3], worst rotation disagreement in degrees, RMS centre residual
    / camera spread) of the similarity mapping frame c onto frame t, from the [4, 4]
    world-to-camera poses of the same cameras in both (module docstring)."""
    rt = np.stack([np.asarray(m, np.float64)[:3, :3] for m in w2c_t])
    rc = np.stack([np.asarray(m, np.float64)[:3, :3] for m in w2c_c])
    u, _, vt = np.linalg.svd(np.einsum("nji,njk->ik", rt, rc))  # sum of R_t^T R_c
    r = u @ np.diag([1.0, 1.0, np.linalg.det(u @ vt)]) @ vt
    diff = np.einsum("nij,jk,nlk->nil", rt, r, rc)  # R_t R R_c^T: identity where they agree
    cos = np.clip((np.trace(diff, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    angle = float(np.degrees(np.arccos(cos)).max())
    ct = np.stack([-m[:3, :3].T @ m[:3, 3] for m in map(np.asarray, w2c_t)])
    cc = np.stack([-m[:3, :3].T @ m[:3, 3] for m in map(np.asarray, w2c_c)])
    a = (cc - cc.mean(0)) @ r.T
    b = ct - ct.mean(0)
    denom = float((a * a).sum())
    s = float((a * b).sum()) / denom if denom > 0 else 1.0
    t = ct.mean(0) - s * (r @ cc.mean(0))
    spread = float(np.linalg.norm(b, axis=1).max())
    rms = float(np.sqrt(((s * a - b) ** 2).sum(1).mean()))
    return s, r, t, angle, (rms / spread if spread > 0 else 0.0 if rms == 0 else np.inf)
