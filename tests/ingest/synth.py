"""Synthetic datasets written by the tests: COLMAP text models, transforms.json, images.

Poses are random rigid transforms; images are small random-texture PNGs so decoding and
resizing are exercised without the real data.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    """[3, 3] float64 uniformly random rotation (QR of a Gaussian matrix, det +1)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def rotation_to_qvec(r: np.ndarray) -> np.ndarray:
    """[3, 3] rotation -> COLMAP quaternion (w, x, y, z); only the w-branch of the
    conversion, valid for rotations with w well above 0 (as random_pose makes)."""
    w = np.sqrt(max(1e-12, 1.0 + np.trace(r))) / 2.0
    x = (r[2, 1] - r[1, 2]) / (4 * w)
    y = (r[0, 2] - r[2, 0]) / (4 * w)
    z = (r[1, 0] - r[0, 1]) / (4 * w)
    q = np.array([w, x, y, z])
    return q / np.linalg.norm(q)


def random_pose(rng: np.random.Generator) -> np.ndarray:
    """[4, 4] float64 world-to-camera with quaternion w > 0.3 (well-conditioned)."""
    while True:
        r = random_rotation(rng)
        if 1.0 + np.trace(r) > 0.36:
            break
    m = np.eye(4)
    m[:3, :3] = r
    m[:3, 3] = rng.normal(size=3)
    return m


def write_image(path: Path, width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """Write a random RGB PNG; returns the [H, W, 3] uint8 pixels."""
    pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return pixels


def write_colmap_text(folder: Path, cameras: list[tuple], images: list[tuple], points: np.ndarray, colors: np.ndarray) -> None:
    """Write cameras.txt, images.txt, points3D.txt (COLMAP text format, with comments).

    cameras: (camera_id, model, width, height, params); images: (image_id, w2c [4, 4],
    camera_id, name, n_points2d); points: [P, 3] float; colors: [P, 3] uint8.
    An image with n_points2d = 0 gets the empty second line COLMAP writes.
    """
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["# Camera list with one line of data per camera:", "#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]"]
    for cid, model, w, h, params in cameras:
        lines.append(" ".join([str(cid), model, str(w), str(h)] + [repr(float(p)) for p in params]))
    (folder / "cameras.txt").write_text("\n".join(lines) + "\n")

    lines = ["# Image list with two lines of data per image:", "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME"]
    for iid, w2c, cid, name, n2d in images:
        q, t = rotation_to_qvec(w2c[:3, :3]), w2c[:3, 3]
        lines.append(" ".join([str(iid)] + [repr(float(v)) for v in (*q, *t)] + [str(cid), name]))
        lines.append(" ".join(f"{10.0 + k} {20.0 + k} {k if k < len(points) else -1}" for k in range(n2d)))
    (folder / "images.txt").write_text("\n".join(lines) + "\n")

    lines = ["# 3D point list with one line of data per point:"]
    for k, (p, c) in enumerate(zip(points, colors)):
        lines.append(" ".join([str(k + 1)] + [repr(float(v)) for v in p] + [str(int(v)) for v in c] + ["0.5", "1", "0"]))
    (folder / "points3D.txt").write_text("\n".join(lines) + "\n")


def write_transforms(path: Path, meta: dict) -> None:
    """Write ``meta`` as JSON to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta, indent=1))
