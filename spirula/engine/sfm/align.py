"""Pose accuracy of an SfM model against a reference model of the same images.

The two models share image names but not a frame (SfM fixes poses only up to a
similarity), so the estimated camera centres are mapped onto the reference ones by the
least-squares Sim(3) (Umeyama, via :func:`pycolmap.estimate_sim3d`), then per image:

* rotation error: the angle in degrees of R_ref (R_est R_s^T)^T, where R_est, R_ref are
  world-to-camera rotations and R_s the rotation of the similarity (so R_est R_s^T is the
  estimated camera in the reference world);
* centre error: |s R_s c_est + t_s - c_ref|, reported in reference units and as a
  percentage of the trajectory extent (the diagonal of the axis-aligned box of the
  reference camera centres);
* relative rotation error (frame free, so not affected by a weakly determined alignment
  of a short camera path): for every pair (i, j) the angle between R_i R_j^T of the
  estimate and of the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from ..optional import need


@dataclass
class PoseAccuracy:
    """Errors of the images both models register (arrays in the order of ``names``)."""

    names: list[str]
    rot_err_deg: np.ndarray      # [N] float64
    center_err: np.ndarray       # [N] float64, reference units
    extent: float                # reference trajectory extent (box diagonal)
    rel_rot_err_deg: np.ndarray  # [N (N - 1) / 2] float64, all pairs

    @property
    def median_rot_err_deg(self) -> float:
        return float(np.median(self.rot_err_deg))

    @property
    def median_center_err_pct(self) -> float:
        return float(100.0 * np.median(self.center_err) / self.extent)

    def summary(self) -> dict:
        return {
            "images_compared": len(self.names),
            "median_rot_err_deg": self.median_rot_err_deg,
            "max_rot_err_deg": float(self.rot_err_deg.max()),
            "median_center_err_pct_extent": self.median_center_err_pct,
            "max_center_err_pct_extent": float(100.0 * self.center_err.max() / self.extent),
            "median_relative_rot_err_deg": float(np.median(self.rel_rot_err_deg)),
        }


def poses_by_name(model_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """image name -> (R [3, 3] world-to-camera, c [3] camera centre) of a COLMAP model
    folder (bin or txt), registered images only."""
    pycolmap = need("pycolmap")

    rec = pycolmap.Reconstruction(str(model_dir))
    out = {}
    for im in rec.images.values():
        if im.has_pose:
            pose = im.cam_from_world()
            out[im.name] = (np.asarray(pose.rotation.matrix()), np.asarray(im.projection_center()))
    return out


def compare_poses(estimate: dict, reference: dict) -> PoseAccuracy:
    """Sim(3)-align ``estimate`` to ``reference`` (both as from :func:`poses_by_name`) on
    the centres of their common images and measure the errors. Raises SpirulaError when
    fewer than 3 images are shared or the alignment is degenerate."""
    pycolmap = need("pycolmap")

    names = sorted(set(estimate) & set(reference))
    if len(names) < 3:
        raise SpirulaError(f"only {len(names)} images in common between the model and the reference")
    c_est = np.stack([estimate[n][1] for n in names])
    c_ref = np.stack([reference[n][1] for n in names])
    sim = pycolmap.estimate_sim3d(c_est, c_ref)
    if sim is None:
        raise SpirulaError("Sim(3) alignment failed (camera centres are degenerate)")
    m = np.asarray(sim.matrix())           # [3, 4] = [s R_s | t_s]
    s = float(sim.scale)
    r_s = m[:, :3] / s
    c_aligned = c_est @ m[:, :3].T + m[:, 3]
    r_est = np.stack([estimate[n][0] for n in names]) @ r_s.T   # [N, 3, 3] in the reference world
    r_ref = np.stack([reference[n][0] for n in names])
    extent = float(np.linalg.norm(c_ref.max(axis=0) - c_ref.min(axis=0)))
    i, j = np.triu_indices(len(names), k=1)
    rel_est = np.einsum("nab,ncb->nac", r_est[i], r_est[j])      # R_i R_j^T
    rel_ref = np.einsum("nab,ncb->nac", r_ref[i], r_ref[j])
    return PoseAccuracy(names, _angle_deg(r_ref, r_est), np.linalg.norm(c_aligned - c_ref, axis=1),
                        max(extent, 1e-12), _angle_deg(rel_ref, rel_est))


def _angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[N] angles in degrees of a_n b_n^T for [N, 3, 3] rotations a, b."""
    rel = np.einsum("nij,nkj->nik", a, b)
    cos = np.clip((np.trace(rel, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    return np.degrees(np.arccos(cos))
