"""What a dataset reader found, before any pixel is loaded: views, points, warnings.

Readers (COLMAP, transforms.json) return a :class:`SceneSpec`; :func:`spirula.engine.ingest.load_dataset`
turns it into a :class:`~spirula.engine.ingest.dataset.Dataset` by loading, undistorting, cropping
and downscaling the images.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .camera_model import CameraModel

log = logging.getLogger("spirula.engine.ingest")


@dataclass
class ViewSpec:
    """One posed image.

    name: path of the image relative to the images folder (posix separators).
    image_path: absolute path of the file (exists when the reader returns it).
    camera: intrinsics for the image as stored on disk (possibly distorted).
    w2c: [4, 4] float64 world-to-camera, OpenCV axes (x right, y down, z forward).
    mask_path: the image's own mask file when the dataset lists one (nerfstudio's per-frame
    ``mask_path``; it need not exist: a missing one is named by spirula/engine/ingest/masks.py), else
    None (the masks folder's rules apply).
    """

    name: str
    image_path: Path
    camera: CameraModel
    w2c: np.ndarray
    mask_path: Path | None = None


@dataclass
class SceneSpec:
    """Views and optional points of a dataset.

    points: [P, 3] float32 world positions or None; colors: [P, 3] uint8 RGB or None.
    warnings: human-readable notes; add with :meth:`warn` so they are logged too.
    """

    root: Path
    views: list[ViewSpec]
    points: np.ndarray | None = None
    colors: np.ndarray | None = None
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        """Record ``message`` in :attr:`warnings` and log it as a warning, once per process:
        the studio and `spirula run` read one dataset several times (review, split, training),
        and the same warning three times in the terminal reads as three problems."""
        self.warnings.append(message)
        if message not in _LOGGED:
            _LOGGED.add(message)
            log.warning("%s", message)


_LOGGED: set[str] = set()   # warnings already logged by this process (Scene.warn)


def name_list(names: list[str], limit: int = 20) -> str:
    """'a, b, c' for messages, with '... and N more' past ``limit`` names."""
    names = sorted(names)
    shown = ", ".join(names[:limit])
    return shown + (f" ... and {len(names) - limit} more" if len(names) > limit else "")


def rigid_w2c_from_c2w(c2w: np.ndarray, source: object) -> np.ndarray:
    """[4, 4] float64 world-to-camera from a camera-to-world matrix ([3, 4] or [4, 4]).

    The rotation is projected to the nearest rotation (SVD) when it is orthonormal to
    1e-2; a scaled, sheared or mirrored rotation raises DatasetError naming ``source``.
    """
    m = np.asarray(c2w, np.float64)
    if m.shape not in ((3, 4), (4, 4)) or not np.all(np.isfinite(m)):
        raise DatasetError(f"{source}: transform must be a finite 3x4 or 4x4 matrix, got shape {m.shape}")
    r, t = m[:3, :3], m[:3, 3]
    u, s, vt = np.linalg.svd(r)
    if np.abs(s - 1.0).max() > 1e-2 or np.linalg.det(r) <= 0:
        raise DatasetError(f"{source}: rotation is not a proper rotation (singular values {np.round(s, 4).tolist()})")
    r = u @ vt
    w2c = np.eye(4)
    w2c[:3, :3] = r.T
    w2c[:3, 3] = -r.T @ t
    return w2c

