"""Camera intrinsics as read from a dataset, before undistortion: every COLMAP camera model.

Conventions: pixel coordinates (u, v) with pixel (0, 0) covering [0, 1) x [0, 1), so the
image centre of a W x H image is (W / 2, H / 2) (the COLMAP and instant-ngp convention).
Normalised coordinates are x = X / Z, y = Y / Z in OpenCV camera axes (x right, y down,
z forward). A model maps them to "distorted" normalised coordinates (xd, yd), and

    u = fx xd + cx,  v = fy yd + cy.

The models and their ``extra`` (distortion) parameters, in COLMAP's order and with
COLMAP's formulas (``src/colmap/sensor/models.h``), r2 = x^2 + y^2:

* ``SIMPLE_PINHOLE``, ``PINHOLE``: none; xd = x.
* ``SIMPLE_RADIAL`` (k), ``RADIAL`` (k1, k2), ``OPENCV`` (k1, k2, p1, p2):
  xd = x (1 + k1 r2 + k2 r2^2) + 2 p1 x y + p2 (r2 + 2 x^2),
  yd = y (1 + k1 r2 + k2 r2^2) + 2 p2 x y + p1 (r2 + 2 y^2).
* ``FULL_OPENCV`` (k1, k2, p1, p2, k3, k4, k5, k6): the radial factor is the rational
  (1 + k1 r2 + k2 r4 + k3 r6) / (1 + k4 r2 + k5 r4 + k6 r6).
* ``FOV`` (omega): xd = x atan(2 r tan(omega / 2)) / (r omega), with COLMAP's series
  for small omega or r.
* Fisheye models first map (x, y) to the equidistant fisheye plane,
  (a, b) = (x, y) theta / r with theta = atan(r), then distort (a, b):
  ``SIMPLE_FISHEYE``, ``FISHEYE``: none; ``SIMPLE_RADIAL_FISHEYE`` (k),
  ``RADIAL_FISHEYE`` (k1, k2), ``OPENCV_FISHEYE`` (k1, k2, k3, k4): radial polynomial in
  theta^2 = a^2 + b^2; ``THIN_PRISM_FISHEYE`` (k1, k2, p1, p2, k3, k4, sx1, sy1): radial
  up to theta^8, tangential and thin prism; ``RAD_TAN_THIN_PRISM_FISHEYE`` (k0..k5, p0,
  p1, s0..s3): radial up to theta^12, then tangential and thin prism on the result.

Refused by name (DatasetError): ``SIMPLE_DIVISION``, ``DIVISION``, ``EUCM`` and
``EQUIRECTANGULAR`` (COLMAP 3.13+; a full sphere, never a pinhole image: the COLMAP reader
reads it as :class:`spirula.engine.ingest.faces.Equirect` instead, split into pinhole faces).

Inversion (:meth:`CameraModel.undistort_normalized`) is Newton's method on the forward
model with a central-difference Jacobian, vectorised over all points; for fisheye
models it runs in the fisheye plane, and a direction at 90 degrees or more from the
optical axis has no pinhole image (reported through ``ok`` / ``beyond``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import DatasetError

# COLMAP model name -> (model id, number of params); the full list of COLMAP 3.13, so
# that a file with any known model can be parsed and refused by name.
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
    "SIMPLE_DIVISION": (12, 4),
    "DIVISION": (13, 5),
    "SIMPLE_FISHEYE": (14, 3),
    "FISHEYE": (15, 4),
    "EUCM": (16, 6),
    "EQUIRECTANGULAR": (17, 2),
}
COLMAP_MODEL_NAMES: dict[int, str] = {mid: name for name, (mid, _) in COLMAP_MODELS.items()}

# Models with one focal length f (fx = fy = f) in their parameter list.
_SINGLE_FOCAL = {"SIMPLE_PINHOLE", "SIMPLE_RADIAL", "RADIAL", "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE",
                 "SIMPLE_FISHEYE"}
FISHEYE_MODELS = frozenset({"OPENCV_FISHEYE", "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE", "THIN_PRISM_FISHEYE",
                            "RAD_TAN_THIN_PRISM_FISHEYE", "SIMPLE_FISHEYE", "FISHEYE"})
SUPPORTED_MODELS = (
    "SIMPLE_PINHOLE", "PINHOLE", "SIMPLE_RADIAL", "RADIAL", "OPENCV", "OPENCV_FISHEYE", "FULL_OPENCV", "FOV",
    "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE", "THIN_PRISM_FISHEYE", "RAD_TAN_THIN_PRISM_FISHEYE",
    "SIMPLE_FISHEYE", "FISHEYE",
)
_REFUSED_WHY = {
    "SIMPLE_DIVISION": "the division model is not implemented",
    "DIVISION": "the division model is not implemented",
    "EUCM": "the enhanced unified camera model is not implemented",
    "EQUIRECTANGULAR": "a 360-degree panorama has no pinhole image",
}


def extra_count(model: str) -> int:
    """Number of distortion parameters of a supported ``model`` (params minus focal and
    principal point)."""
    return COLMAP_MODELS[model][1] - (3 if model in _SINGLE_FOCAL else 4)


@dataclass(frozen=True)
class CameraModel:
    """Intrinsics of a (possibly distorted) camera for a ``width`` x ``height`` image.

    model: a name of :data:`SUPPORTED_MODELS` (``"PINHOLE"`` after undistortion).
    fx, fy, cx, cy: pixels (a single-focal COLMAP model has fx = fy).
    extra: the model's distortion parameters in COLMAP's order (see the module
    docstring), dimensionless. Frozen and hashable, so images that share a camera
    share one undistortion map.
    """

    model: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    extra: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.model not in SUPPORTED_MODELS:
            raise ValueError(f"camera model {self.model!r} is not supported")
        object.__setattr__(self, "extra", tuple(float(v) for v in self.extra))
        if len(self.extra) != extra_count(self.model):
            raise ValueError(f"camera model {self.model} takes {extra_count(self.model)} distortion parameters, "
                             f"got {len(self.extra)}")

    @classmethod
    def from_colmap(cls, model: str, width: int, height: int, params, source: object) -> CameraModel:
        """Build from a COLMAP model name and its parameter list; ``source`` (the file)
        is named in the DatasetError raised for a refused model or bad params."""
        if model not in SUPPORTED_MODELS:
            why = _REFUSED_WHY.get(model, "unknown model")
            raise DatasetError(
                f"{source}: camera model {model} is not supported ({why}; supported: {', '.join(SUPPORTED_MODELS)})"
            )
        p = [float(v) for v in params]
        if len(p) != COLMAP_MODELS[model][1]:
            raise DatasetError(f"{source}: camera model {model} needs {COLMAP_MODELS[model][1]} params, got {len(p)}")
        if model in _SINGLE_FOCAL:
            cam = cls(model, width, height, p[0], p[0], p[1], p[2], tuple(p[3:]))
        else:
            cam = cls(model, width, height, p[0], p[1], p[2], p[3], tuple(p[4:]))
        cam.check(source)
        return cam

    def check(self, source: object) -> None:
        """Raise DatasetError (naming ``source``) for non-positive sizes or focal lengths
        or non-finite parameters."""
        bad = []
        if self.width <= 0 or self.height <= 0:
            bad.append(f"image size {self.width}x{self.height}")
        if not (self.fx > 0 and self.fy > 0 and np.isfinite(self.fx) and np.isfinite(self.fy)):
            bad.append(f"focal length fx={self.fx} fy={self.fy}")
        if not all(np.isfinite(v) for v in (self.cx, self.cy, *self.extra)):
            bad.append("non-finite intrinsics")
        if bad:
            raise DatasetError(f"{source}: invalid {self.model} camera: {'; '.join(bad)}")

    @property
    def is_fisheye(self) -> bool:
        return self.model in FISHEYE_MODELS

    @property
    def is_pinhole(self) -> bool:
        """True when the model maps like a pinhole (no distortion, not a fisheye)."""
        return not self.is_fisheye and all(v == 0.0 for v in self.extra)

    def describe(self) -> str:
        """'MODEL fx=.. fy=.. cx=.. cy=.. extra=(..)' for messages."""
        extra = ", ".join(f"{v:.6g}" for v in self.extra)
        return (f"{self.model} {self.width}x{self.height} fx={self.fx:.6g} fy={self.fy:.6g} cx={self.cx:.6g} "
                f"cy={self.cy:.6g}" + (f" distortion=({extra})" if extra else ""))

    def scaled(self, width: int, height: int) -> CameraModel:
        """The same camera for an image resized to ``width`` x ``height`` (per-axis scale
        of fx, cx and fy, cy; distortion, which acts on normalised coords, is unchanged)."""
        sx, sy = width / self.width, height / self.height
        return replace(self, width=width, height=height, fx=self.fx * sx, fy=self.fy * sy, cx=self.cx * sx, cy=self.cy * sy)

    # ------------------------------------------------------------------ forward model

    def distort(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised undistorted (x, y) -> normalised distorted (xd, yd); any shape,
        float64. For fisheye models (x, y) must lie in front of the camera (finite)."""
        x = np.asarray(x, np.float64)
        y = np.asarray(y, np.float64)
        if self.is_fisheye:
            a, b = fisheye_from_normal(x, y)
            return self._plane_distort(a, b)
        return self._plane_distort(x, y)

    def project(self, points: np.ndarray) -> np.ndarray:
        """[N, 3] camera-space points (z > 0) -> [N, 2] pixel coordinates (u, v)."""
        p = np.asarray(points, np.float64)
        xd, yd = self.distort(p[:, 0] / p[:, 2], p[:, 1] / p[:, 2])
        return np.stack([self.fx * xd + self.cx, self.fy * yd + self.cy], 1)

    def _plane_distort(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The model's distortion in its own plane (normalised, or fisheye for fisheye
        models)."""
        m, e = self.model, self.extra
        if m in ("SIMPLE_PINHOLE", "PINHOLE", "SIMPLE_FISHEYE", "FISHEYE"):
            return x, y
        if m in ("SIMPLE_RADIAL", "RADIAL", "OPENCV", "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE"):
            k1, k2, p1, p2 = (*e, 0.0, 0.0, 0.0)[:4]  # (k), (k1, k2) or (k1, k2, p1, p2)
            r2 = x * x + y * y
            radial = 1.0 + r2 * (k1 + k2 * r2)
            return _tangential(x, y, x * radial, y * radial, r2, p1, p2)
        if m == "FULL_OPENCV":
            k1, k2, p1, p2, k3, k4, k5, k6 = e
            r2 = x * x + y * y
            radial = (1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))) / (1.0 + r2 * (k4 + r2 * (k5 + r2 * k6)))
            return _tangential(x, y, x * radial, y * radial, r2, p1, p2)
        if m == "OPENCV_FISHEYE":
            k1, k2, k3, k4 = e
            t2 = x * x + y * y
            radial = 1.0 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4)))
            return x * radial, y * radial
        if m == "THIN_PRISM_FISHEYE":
            k1, k2, p1, p2, k3, k4, sx1, sy1 = e
            r2 = x * x + y * y
            radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * (k3 + r2 * k4)))
            xd, yd = _tangential(x, y, x * radial, y * radial, r2, p1, p2)
            return xd + sx1 * r2, yd + sy1 * r2
        if m == "RAD_TAN_THIN_PRISM_FISHEYE":
            k = e[:6]
            p0, p1, s0, s1, s2, s3 = e[6:]
            t2 = x * x + y * y
            th = 1.0 + t2 * (k[0] + t2 * (k[1] + t2 * (k[2] + t2 * (k[3] + t2 * (k[4] + t2 * k[5])))))
            xr, yr = th * x, th * y
            r2 = xr * xr + yr * yr
            r4 = r2 * r2
            xd = xr + 2.0 * p1 * xr * yr + p0 * (r2 + 2.0 * xr * xr) + s0 * r2 + s1 * r4
            yd = yr + 2.0 * p0 * xr * yr + p1 * (r2 + 2.0 * yr * yr) + s2 * r2 + s3 * r4
            return xd, yd
        if m == "FOV":
            return _fov(x, y, e[0])
        raise AssertionError(m)  # pragma: no cover - __post_init__ admits supported models only

    # ------------------------------------------------------------------ inverse

    def undistort_normalized(self, xd: np.ndarray, yd: np.ndarray, iters: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Invert :meth:`distort`, vectorised.

        Returns (x, y, ok): ``ok`` is a bool mask of points whose residual is below 1e-9
        (normalised units, about 1e-6 px) and which have a pinhole image. Points where
        the model is not invertible (beyond the turning point of a radial polynomial)
        come back with ok False; so do fisheye directions at 90 degrees or more from the
        axis (see :meth:`undistort_plane` to tell them apart).
        """
        a, b, ok = self.undistort_plane(xd, yd, iters)
        if not self.is_fisheye:
            return a, b, ok
        x, y, front = normal_from_fisheye(a, b)
        return x, y, ok & front

    def undistort_plane(self, xd: np.ndarray, yd: np.ndarray, iters: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Invert the distortion in the model's own plane (the fisheye plane for fisheye
        models, where a point's norm is its angle from the axis): (a, b, converged)."""
        xd = np.asarray(xd, np.float64)
        yd = np.asarray(yd, np.float64)
        a, b = xd.copy(), yd.copy()
        if self.is_pinhole or (self.is_fisheye and not any(self.extra)):
            return a, b, np.isfinite(a) & np.isfinite(b)
        for _ in range(iters):
            fa, fb = self._plane_distort(a, b)
            ex, ey = fa - xd, fb - yd
            if np.all(np.abs(ex) + np.abs(ey) < 1e-13):
                break
            h = 1e-6 * np.maximum(1.0, np.abs(a) + np.abs(b))
            pa, pb = self._plane_distort(a + h, b)
            ma, mb = self._plane_distort(a - h, b)
            j00, j10 = (pa - ma) / (2 * h), (pb - mb) / (2 * h)
            pa, pb = self._plane_distort(a, b + h)
            ma, mb = self._plane_distort(a, b - h)
            j01, j11 = (pa - ma) / (2 * h), (pb - mb) / (2 * h)
            det = j00 * j11 - j01 * j10
            det = np.where(np.abs(det) < 1e-12, 1e-12, det)
            da = (j11 * ex - j01 * ey) / det
            db = (j00 * ey - j10 * ex) / det
            # Damp huge steps so a bad start cannot jump onto the far branch of the polynomial.
            step = np.maximum(1.0, np.hypot(da, db) / 0.5)
            a = a - da / step
            b = b - db / step
        with np.errstate(all="ignore"):
            fa, fb = self._plane_distort(a, b)
            ok = (np.abs(fa - xd) + np.abs(fb - yd) < 1e-9) & np.isfinite(a) & np.isfinite(b)
        return a, b, ok


def _tangential(x, y, xr, yr, r2, p1, p2):
    if p1 == 0.0 and p2 == 0.0:
        return xr, yr
    xy2 = 2.0 * x * y
    return xr + p1 * xy2 + p2 * (r2 + 2.0 * x * x), yr + p2 * xy2 + p1 * (r2 + 2.0 * y * y)


def _fov(x: np.ndarray, y: np.ndarray, omega: float) -> tuple[np.ndarray, np.ndarray]:
    """COLMAP's FOV distortion, with its series branches (kEpsilon = 1e-4)."""
    r2 = x * x + y * y
    o2 = omega * omega
    eps = 1e-4
    if o2 < eps:
        factor = (o2 * r2) / 3.0 - o2 / 12.0 + 1.0
    else:
        t = np.tan(omega / 2.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.sqrt(r2)
            full = np.arctan(r * 2.0 * t) / (r * omega)
        small = (-2.0 * t * (4.0 * r2 * t * t - 3.0)) / (3.0 * omega)
        factor = np.where(r2 < eps, small, full)
    return x * factor, y * factor


def fisheye_from_normal(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) * atan(r) / r (COLMAP's FisheyeFromNormal; unchanged for r <= DBL_EPSILON)."""
    r = np.sqrt(x * x + y * y)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(r > np.finfo(np.float64).eps, np.arctan(r) / r, 1.0)
    return x * s, y * s


def normal_from_fisheye(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of :func:`fisheye_from_normal`: (x, y, in_front). ``in_front`` is False
    for angles of 90 degrees or more (no pinhole image); x, y are then inf/nan."""
    theta = np.sqrt(a * a + b * b)
    in_front = theta < np.pi / 2 - 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        tc = theta * np.cos(theta)
        s = np.where(tc > np.finfo(np.float64).eps, np.sin(theta) / tc, 1.0)
        s = np.where(in_front, s, np.inf)
        return a * s, b * s, in_front
