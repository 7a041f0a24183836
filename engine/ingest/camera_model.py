"""Camera intrinsics as read from a dataset, before undistortion.

Every supported model (COLMAP ``SIMPLE_PINHOLE``, ``PINHOLE``, ``SIMPLE_RADIAL``,
``RADIAL``, ``OPENCV``; nerfstudio ``OPENCV``/``PINHOLE``) is a special case of the
OpenCV model with radial k1, k2 and tangential p1, p2, so one class holds them all.

Conventions: pixel coordinates (u, v) with pixel (0, 0) covering [0, 1) x [0, 1), so the
image centre of a W x H image is (W / 2, H / 2) (the COLMAP and instant-ngp convention).
Normalised coordinates are x = X / Z, y = Y / Z in OpenCV camera axes; the distortion
acts on them:

    r2 = x^2 + y^2,  radial = k1 r2 + k2 r2^2
    xd = x (1 + radial) + 2 p1 x y + p2 (r2 + 2 x^2)
    yd = y (1 + radial) + p1 (r2 + 2 y^2) + 2 p2 x y
    u = fx xd + cx,  v = fy yd + cy
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import DatasetError

# COLMAP model name -> (model id, number of params); the full list, so that a file with
# any known model can be parsed and refused by name.
COLMAP_MODELS: dict[str, tuple[int, int]] = {
    "SIMPLE_PINHOLE": (0, 3),
    "PINHOLE": (1, 4),
    "SIMPLE_RADIAL": (2, 4),
    "RADIAL": (3, 5),
    "OPENCV": (4, 8),
    "OPENCV_FISHEYE": (5, 8),
    "FULL_OPENCV": (6, 12),
    "FOV": (7, 5),
    "SIMPLE_RADIAL_FISHEYE": (8, 4),
    "RADIAL_FISHEYE": (9, 5),
    "THIN_PRISM_FISHEYE": (10, 12),
    "RAD_TAN_THIN_PRISM_FISHEYE": (11, 16),
}
COLMAP_MODEL_NAMES: dict[int, str] = {mid: name for name, (mid, _) in COLMAP_MODELS.items()}
SUPPORTED_MODELS = ("SIMPLE_PINHOLE", "PINHOLE", "SIMPLE_RADIAL", "RADIAL", "OPENCV")


@dataclass(frozen=True)
class CameraModel:
    """Intrinsics of a (possibly distorted) camera for a ``width`` x ``height`` image.

    model: the name in the source file (e.g. ``"SIMPLE_RADIAL"``), for messages only.
    fx, fy, cx, cy: pixels. k1, k2, p1, p2: dimensionless OpenCV distortion coefficients.
    Frozen and hashable, so images that share a camera share one undistortion map.
    """

    model: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    k1: float = 0.0
    k2: float = 0.0
    p1: float = 0.0
    p2: float = 0.0

    @classmethod
    def from_colmap(cls, model: str, width: int, height: int, params, source: object) -> CameraModel:
        """Build from a COLMAP model name and its parameter list; ``source`` (the file)
        is named in the DatasetError raised for an unsupported model or bad params."""
        if model not in SUPPORTED_MODELS:
            raise DatasetError(
                f"{source}: camera model {model} is not supported "
                f"(supported: {', '.join(SUPPORTED_MODELS)})"
            )
        p = [float(v) for v in params]
        if len(p) != COLMAP_MODELS[model][1]:
            raise DatasetError(f"{source}: camera model {model} needs {COLMAP_MODELS[model][1]} params, got {len(p)}")
        if model == "SIMPLE_PINHOLE":
            cam = cls(model, width, height, p[0], p[0], p[1], p[2])
        elif model == "PINHOLE":
            cam = cls(model, width, height, *p)
        elif model == "SIMPLE_RADIAL":
            cam = cls(model, width, height, p[0], p[0], p[1], p[2], k1=p[3])
        elif model == "RADIAL":
            cam = cls(model, width, height, p[0], p[0], p[1], p[2], k1=p[3], k2=p[4])
        else:  # OPENCV
            cam = cls(model, width, height, *p[:4], k1=p[4], k2=p[5], p1=p[6], p2=p[7])
        cam.check(source)
        return cam

    def check(self, source: object) -> None:
        """Raise DatasetError (naming ``source``) for non-positive sizes or focal lengths."""
        bad = []
        if self.width <= 0 or self.height <= 0:
            bad.append(f"image size {self.width}x{self.height}")
        if not (self.fx > 0 and self.fy > 0):
            bad.append(f"focal length fx={self.fx} fy={self.fy}")
        vals = (self.cx, self.cy, self.k1, self.k2, self.p1, self.p2)
        if not all(np.isfinite(v) for v in vals):
            bad.append("non-finite intrinsics")
        if bad:
            raise DatasetError(f"{source}: invalid {self.model} camera: {'; '.join(bad)}")

    @property
    def is_pinhole(self) -> bool:
        """True when all distortion coefficients are zero."""
        return self.k1 == 0.0 and self.k2 == 0.0 and self.p1 == 0.0 and self.p2 == 0.0

    def scaled(self, width: int, height: int) -> CameraModel:
        """The same camera for an image resized to ``width`` x ``height`` (per-axis scale
        of fx, cx and fy, cy; distortion, which acts on normalised coords, is unchanged)."""
        sx, sy = width / self.width, height / self.height
        return replace(self, width=width, height=height, fx=self.fx * sx, fy=self.fy * sy, cx=self.cx * sx, cy=self.cy * sy)

    def distort(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised undistorted (x, y) -> normalised distorted (xd, yd); any shape, float64."""
        r2 = x * x + y * y
        radial = 1.0 + r2 * (self.k1 + self.k2 * r2)
        xy2 = 2.0 * x * y
        xd = x * radial + self.p1 * xy2 + self.p2 * (r2 + 2.0 * x * x)
        yd = y * radial + self.p1 * (r2 + 2.0 * y * y) + self.p2 * xy2
        return xd, yd

    def undistort_normalized(self, xd: np.ndarray, yd: np.ndarray, iters: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Invert :meth:`distort` by Newton's method (analytic 2x2 Jacobian), vectorised.

        Returns (x, y, ok): ``ok`` is a bool mask of points whose residual is below 1e-9
        (normalised units, about 1e-6 px); points where the model is not invertible
        (beyond the turning point of the radial polynomial) come back with ok False.
        """
        xd = np.asarray(xd, np.float64)
        yd = np.asarray(yd, np.float64)
        x, y = xd.copy(), yd.copy()
        k1, k2, p1, p2 = self.k1, self.k2, self.p1, self.p2
        for _ in range(iters):
            fx_, fy_ = self.distort(x, y)
            ex, ey = fx_ - xd, fy_ - yd
            if np.all(np.abs(ex) + np.abs(ey) < 1e-12):
                break
            r2 = x * x + y * y
            rad = 1.0 + r2 * (k1 + k2 * r2)
            drad = 2.0 * k1 + 4.0 * k2 * r2  # d(radial)/d(r2) * 2
            j00 = rad + x * x * drad + 2.0 * p1 * y + 6.0 * p2 * x
            j01 = x * y * drad + 2.0 * p1 * x + 2.0 * p2 * y
            j10 = x * y * drad + 2.0 * p1 * x + 2.0 * p2 * y
            j11 = rad + y * y * drad + 6.0 * p1 * y + 2.0 * p2 * x
            det = j00 * j11 - j01 * j10
            det = np.where(np.abs(det) < 1e-12, 1e-12, det)
            dx = (j11 * ex - j01 * ey) / det
            dy = (j00 * ey - j10 * ex) / det
            # Damp huge steps so a bad start cannot jump onto the far branch of the polynomial.
            step = np.maximum(1.0, np.hypot(dx, dy) / 0.5)
            x = x - dx / step
            y = y - dy / step
        fx_, fy_ = self.distort(x, y)
        ok = (np.abs(fx_ - xd) + np.abs(fy_ - yd) < 1e-9) & np.isfinite(x) & np.isfinite(y)
        return x, y, ok
