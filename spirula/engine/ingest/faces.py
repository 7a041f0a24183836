"""Wide lenses (fisheye, FOV, 360-degree equirectangular) split into pinhole cube faces.

A pinhole image cannot hold a wide lens: undistorting a fisheye to one pinhole image and
cropping it to its largest valid rectangle (:mod:`spirula.engine.ingest.undistort`) throws away the
periphery. Here each wide image becomes up to six pinhole images, the faces of a cube
centred on the camera, each cropped to the lens footprint, each with its own camera; the
rasterizer trains them like any pinhole view.

Conventions (as :mod:`spirula.engine.ingest.camera_model`): OpenCV camera axes (x right, y down,
z forward), pixel centres at integer + 0.5, ``w2c`` world-to-camera.

* **Faces** (:data:`FACE_ROTATIONS`): ``front`` (+z), ``right`` (+x), ``back`` (-z),
  ``left`` (-x), ``up`` (-y), ``down`` (+y), each a [3, 3] rotation R taking source camera
  coordinates to the face's camera coordinates (d_face = R d_src); the face's w2c is
  ``R4 @ w2c_src`` (R4: R in a 4 x 4 with no translation: the faces share the centre).
  A face of size N has a 90-degree field of view: fx = fy = N / 2, cx = cy = N / 2,
  before the crop.
* **Lens footprint**: a face pixel is valid when its direction maps (through the source
  model) to a point whose bilinear sample lies between source pixel centres
  (0.5 <= u <= W - 0.5, same for v) and, for a distortion model, before the model folds
  back (the first angle from the axis at which the model's Jacobian determinant stops
  being positive, per azimuth, :func:`fold_angles`); a non-fisheye model (FOV) also needs
  the direction in front of the camera. Equirectangular images cover every direction
  (u wraps around).
* **Image circle**: a circular fisheye's image is black beyond its lens circle, which no
  COLMAP model says; :func:`image_circle_angle` finds it in an image (every ring of pixels
  beyond some radius around the principal point black, covering at least
  CIRCLE_MIN_AREA of the frame) and the footprint then ends 1.5 % inside that circle.
* **Crop**: each face is cropped to a rectangle holding only valid pixels (the border
  row or column with most invalid pixels is peeled until none is left); a face whose
  rectangle keeps less than :data:`MIN_FACE_FRACTION` of the N x N face is dropped (a
  front-facing fisheye of 180 degrees or less has no back face: 5 faces).
* **Face size** (the dataset setting ``face_size``): N > 0: every face N x N before its
  crop; 0: per face, N chosen so that the face's median valid pixel covers one source
  pixel (the source area under a face pixel, from the projection's Jacobian): the face
  keeps the source's resolution where it typically samples it, not its oversampled
  periphery (the poles of an equirectangular image, the corners of a face).
* **Equirectangular** (:class:`Equirect`, COLMAP's EQUIRECTANGULAR model, params w, h):
  longitude lon = atan2(x, z), latitude lat = atan2(y, hypot(x, z)) (y down, so the top
  row looks up); u = W / 2 + lon W / (2 pi), v = H / 2 + lat H / pi.

Resampling is bilinear, vectorised over all pixels (one gather per corner and channel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import DatasetError
from .camera_model import CameraModel, FISHEYE_MODELS
from .undistort import shrink_to_valid

FACE_NAMES = ("front", "right", "back", "left", "up", "down")
FACE_ROTATIONS: dict[str, np.ndarray] = {  # rows: the face's x, y, z axes in source camera coordinates
    "front": np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1]]),
    "right": np.array([[0.0, 0, -1], [0, 1, 0], [1, 0, 0]]),
    "back": np.array([[-1.0, 0, 0], [0, 1, 0], [0, 0, -1]]),
    "left": np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]]),
    "up": np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]]),
    "down": np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]]),
}
MIN_FACE_FRACTION = 0.05   # a face keeping less of its N x N square than this is dropped
MIN_FACE_SIDE = 16         # the smallest N the per-face size picks
WIDE_MODELS = FISHEYE_MODELS | {"FOV"}   # CameraModel models split into faces (with Equirect)
_PROBE = 128               # the face grid side on which the per-face size measures the footprint
_FOLD_AZIMUTHS = 720
DARK = 12                  # a pixel whose every channel is below this (8-bit) is black
CIRCLE_MIN_AREA = 0.02     # the black outside of an image circle covers at least this much of the frame


@dataclass(frozen=True)
class Equirect:
    """A 360-degree equirectangular image of ``width`` x ``height`` px (2:1; the module
    docstring gives the mapping). Frozen and hashable like CameraModel."""

    width: int
    height: int
    model: str = "EQUIRECTANGULAR"

    def describe(self) -> str:
        return f"EQUIRECTANGULAR {self.width}x{self.height}"

    def scaled(self, width: int, height: int) -> Equirect:
        return Equirect(width, height)

    def check(self, source: object) -> None:
        """DatasetError naming ``source`` unless the image is 2:1 (within a pixel) and not empty."""
        if self.width < 4 or self.height < 2 or abs(self.width - 2 * self.height) > 1:
            raise DatasetError(f"{source}: an equirectangular image must be 2:1, not {self.width}x{self.height}")


def is_wide(camera) -> bool:
    """True for a camera split into faces: an Equirect, or a CameraModel of WIDE_MODELS."""
    return isinstance(camera, Equirect) or getattr(camera, "model", "") in WIDE_MODELS


def fold_angles(camera: CameraModel, azimuths: int = _FOLD_AZIMUTHS, steps: int = 2048) -> np.ndarray:
    """[azimuths] float64: per azimuth phi_k = 2 pi k / azimuths, the angle from the optical
    axis (radians) up to which the model's distortion has a positive Jacobian determinant
    (past it the image folds back); pi (fisheye) or pi / 2 (other models) when it never folds."""
    fisheye = camera.model in FISHEYE_MODELS
    top = math.pi if fisheye else math.pi / 2
    phi = np.arange(azimuths) * (2 * math.pi / azimuths)
    theta = np.linspace(0.0, top, steps + 1)[1:]
    rad = theta if fisheye else np.tan(np.minimum(theta, top - 1e-6))
    a = rad[None, :] * np.cos(phi)[:, None]
    b = rad[None, :] * np.sin(phi)[:, None]
    h = 1e-6 * np.maximum(1.0, np.abs(a) + np.abs(b))
    with np.errstate(all="ignore"):
        pa, pb = camera._plane_distort(a + h, b)
        ma, mb = camera._plane_distort(a - h, b)
        qa, qb = camera._plane_distort(a, b + h)
        na, nb = camera._plane_distort(a, b - h)
        det = ((pa - ma) * (qb - nb) - (qa - na) * (pb - mb)) / (4 * h * h)
    bad = ~(det > 0)
    first = np.where(bad.any(1), bad.argmax(1), steps)
    return np.concatenate([[0.0], theta])[first]


def source_pixels(camera, dirs: np.ndarray, folds: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(u [...], v [...], ok [...] bool) source pixel coordinates of directions ``dirs``
    [..., 3] float64 in source camera coordinates (need not be unit length); ``ok``: inside
    the lens footprint (module docstring). ``folds``: :func:`fold_angles` of the camera
    (computed when None)."""
    d = np.asarray(dirs, np.float64)
    x, y, z = d[..., 0], d[..., 1], d[..., 2]
    if isinstance(camera, Equirect):
        lon = np.arctan2(x, z)
        lat = np.arctan2(y, np.hypot(x, z))
        u = camera.width / 2 + lon * camera.width / (2 * math.pi)
        v = camera.height / 2 + lat * camera.height / math.pi
        return u, v, np.isfinite(u) & np.isfinite(v)
    if folds is None:
        folds = fold_angles(camera)
    rho = np.hypot(x, y)
    theta = np.arctan2(rho, z)
    phi = np.mod(np.arctan2(y, x), 2 * math.pi)
    k = phi * (len(folds) / (2 * math.pi))
    k0 = np.floor(k).astype(np.intp) % len(folds)
    limit = np.minimum(folds[k0], folds[(k0 + 1) % len(folds)])  # the nearer of the two sampled azimuths
    with np.errstate(divide="ignore", invalid="ignore"):
        if camera.model in FISHEYE_MODELS:
            s = np.where(rho > 1e-300, theta / rho, 1.0)
            xd, yd = camera._plane_distort(x * s, y * s)
            front = np.ones(theta.shape, bool)
        else:
            front = z > 0
            zz = np.where(front, z, 1.0)
            xd, yd = camera._plane_distort(x / zz, y / zz)
        u = camera.fx * xd + camera.cx
        v = camera.fy * yd + camera.cy
    ok = front & (theta < limit) & np.isfinite(u) & np.isfinite(v)
    ok &= (u >= 0.5 - 1e-6) & (u <= camera.width - 0.5 + 1e-6) & (v >= 0.5 - 1e-6) & (v <= camera.height - 0.5 + 1e-6)
    return u, v, ok


def image_circle_angle(camera: CameraModel, image: np.ndarray) -> float | None:
    """The angle from the optical axis (radians) at which a circular fisheye's image circle
    ends, from one of its images ([H, W, C] uint8 of the camera's size); None when the image
    has no black outside a circle (a full-frame lens, or not a fisheye model). The circle's
    radius R (px, around the principal point) is the smallest such that every ring of pixel
    centres at R or beyond is at least 98 % black (DARK); the angle is the least over 64
    azimuths of the model's angle at 0.985 R."""
    if camera.model not in FISHEYE_MODELS or image.shape[:2] != (camera.height, camera.width):
        return None
    step = max(1, min(camera.width, camera.height) // 256)  # a sample of rows and columns suffices
    img = image[::step, ::step]
    v, u = np.mgrid[0:img.shape[0], 0:img.shape[1]] * step + 0.5
    r = np.hypot(u - camera.cx, v - camera.cy)
    dark = img.max(axis=2) < DARK
    ring = np.floor(r / step).astype(np.intp).ravel()
    count = np.bincount(ring)
    frac = np.bincount(ring, weights=dark.ravel()) / np.maximum(count, 1)
    black = (frac >= 0.98) | (count == 0)
    tail = np.logical_and.accumulate(black[::-1])[::-1]  # every ring from here on is black
    if not tail.any() or tail[0]:
        return None
    radius = float(np.argmax(tail)) * step
    if (dark & (r >= radius)).sum() < CIRCLE_MIN_AREA * dark.size:
        return None
    phi = np.arange(64) * (2 * math.pi / 64)
    rr = 0.985 * radius
    a, b, ok = camera.undistort_plane(rr * np.cos(phi) / camera.fx, rr * np.sin(phi) / camera.fy)
    if not ok.all():
        return None
    return float(np.hypot(a, b).min())


def face_directions(rotation: np.ndarray, n: int) -> np.ndarray:
    """[n, n, 3] float64 source-camera directions of the pixel centres of an n x n face of
    90 degrees (fx = fy = cx = cy = n / 2) with ``rotation`` (source -> face)."""
    t = (np.arange(n) + 0.5 - n / 2) / (n / 2)
    fx, fy = np.meshgrid(t, t)  # [row, col]: x from the column, y from the row
    d = np.stack([fx, fy, np.ones_like(fx)], -1)
    return d @ np.asarray(rotation, np.float64)  # row vectors: R^T d


@dataclass(frozen=True, eq=False)
class Face:
    """One pinhole face of a wide camera and its bilinear map from the source image.

    name: one of FACE_NAMES. rotation: [3, 3] float64 source camera -> face camera.
    camera: the face's PINHOLE CameraModel after the crop (pixels). side: N, the face's
    side before the crop. source: the wide camera. index: [4, M] intp flat source indices (row * W + col) of the
    top-left, top-right, bottom-left, bottom-right source pixels of each of the M =
    width * height face pixels; weights: [4, M] float32 bilinear weights (summing to 1).
    """

    name: str
    rotation: np.ndarray
    camera: CameraModel
    side: int
    source: object
    index: np.ndarray = field(repr=False)
    weights: np.ndarray = field(repr=False)
    max_angle: float | None = None   # the image circle's angle (radians) the split ended at, if any

    def w2c(self, source_w2c: np.ndarray) -> np.ndarray:
        """[4, 4] float64 world-to-face of a source image's world-to-camera ``source_w2c``."""
        r = np.eye(4)
        r[:3, :3] = self.rotation
        return r @ np.asarray(source_w2c, np.float64)

    def __call__(self, image: np.ndarray) -> np.ndarray:
        """[H, W, C] uint8 source image -> [height, width, C] uint8 face image."""
        src = self.source
        if image.shape[:2] != (src.height, src.width):
            raise ValueError(f"image is {image.shape[1]}x{image.shape[0]}, camera is {src.width}x{src.height}")
        channels = image.shape[2]
        out = np.empty((self.index.shape[1], channels), np.uint8)
        for c in range(channels):  # one gather per corner and channel plane
            plane = np.ascontiguousarray(image[:, :, c]).ravel()
            acc = plane.take(self.index[0]) * self.weights[0]
            for k in (1, 2, 3):
                acc += plane.take(self.index[k]) * self.weights[k]
            out[:, c] = np.clip(acc + 0.5, 0, 255)
        return out.reshape(self.camera.height, self.camera.width, channels)


def _bilinear(camera, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([4, M] intp, [4, M] float32) bilinear corners and weights of source pixel
    coordinates u, v (centres at + 0.5); an Equirect wraps around horizontally."""
    w, h = camera.width, camera.height
    sx = u.ravel() - 0.5
    sy = np.clip(v.ravel() - 0.5, 0.0, h - 1.0)
    y0 = np.minimum(np.floor(sy), h - 2).astype(np.intp)
    if isinstance(camera, Equirect):
        x0f = np.floor(sx)
        wx = sx - x0f
        x0 = x0f.astype(np.intp) % w
        x1 = (x0 + 1) % w
    else:
        sx = np.clip(sx, 0.0, w - 1.0)
        x0 = np.minimum(np.floor(sx), w - 2).astype(np.intp)
        wx = sx - x0
        x1 = x0 + 1
    wy = sy - y0
    index = np.stack([y0 * w + x0, y0 * w + x1, (y0 + 1) * w + x0, (y0 + 1) * w + x1])
    wx, wy = wx.astype(np.float32), wy.astype(np.float32)
    weights = np.stack([(1 - wx) * (1 - wy), wx * (1 - wy), (1 - wx) * wy, wx * wy])
    return index, weights


def _density(camera, rotation: np.ndarray, folds) -> tuple[float, float]:
    """(median source px per probe px, valid fraction) of a face probed on a _PROBE x _PROBE
    grid: each valid probe pixel's source area (|det| of the projection's Jacobian by central
    differences, in source px), their median, and the fraction of probe pixels that are valid."""
    n = _PROBE
    t = (np.arange(-1, n + 1) + 0.5 - n / 2) / (n / 2)  # the probe grid with a pixel of margin
    fx, fy = np.meshgrid(t, t)
    d = np.stack([fx, fy, np.ones_like(fx)], -1) @ np.asarray(rotation, np.float64)
    u, v, ok = source_pixels(camera, d, folds)
    du_x = (u[1:-1, 2:] - u[1:-1, :-2]) / 2
    dv_x = (v[1:-1, 2:] - v[1:-1, :-2]) / 2
    du_y = (u[2:, 1:-1] - u[:-2, 1:-1]) / 2
    dv_y = (v[2:, 1:-1] - v[:-2, 1:-1]) / 2
    if isinstance(camera, Equirect):  # longitude wraps
        w = camera.width
        du_x = (du_x + w / 2) % w - w / 2
        du_y = (du_y + w / 2) % w - w / 2
    with np.errstate(invalid="ignore"):
        area = np.abs(du_x * dv_y - du_y * dv_x)
    valid = ok[1:-1, 1:-1] & np.isfinite(area)
    if not valid.any():
        return 0.0, 0.0
    return float(np.median(area[valid])), float(valid.mean())


def face_side(camera, rotation: np.ndarray, face_size: int, folds=None) -> int:
    """N of a face: ``face_size`` when > 0; else (0) the per-face size: the face's median
    pixel covers one source pixel (the median over its valid pixels of the source area
    under each), at least MIN_FACE_SIDE; 0 when no pixel of the face is valid."""
    if face_size > 0:
        return int(face_size)
    per_px, frac = _density(camera, rotation, folds)
    if frac <= 0.0:
        return 0
    return max(MIN_FACE_SIDE, int(round(_PROBE * math.sqrt(per_px))))


def split_faces(camera, face_size: int = 0, faces: tuple[str, ...] = FACE_NAMES,
                max_angle: float | None = None) -> list[Face]:
    """The pinhole faces of a wide ``camera`` (CameraModel of WIDE_MODELS, or Equirect),
    each with its bilinear map (module docstring for the footprint, crop and size rules).

    face_size: N px per face before the crop (> 0), or 0 for the per-face size.
    max_angle: radians from the axis where the lens footprint ends (a circular fisheye's
    image circle, :func:`image_circle_angle`), or None.
    Returns the faces kept, in FACE_NAMES order. Raises DatasetError naming the camera
    when no face keeps MIN_FACE_FRACTION of its square.
    """
    if not is_wide(camera):
        raise ValueError(f"{camera.describe()} is not a wide camera")
    folds = None if isinstance(camera, Equirect) else fold_angles(camera)
    if folds is not None and max_angle is not None:
        folds = np.minimum(folds, max_angle)
    out = []
    for name in faces:
        rot = FACE_ROTATIONS[name]
        n = face_side(camera, rot, face_size, folds)
        if n < 2:
            continue
        u, v, ok = source_pixels(camera, face_directions(rot, n), folds)
        if ok.sum() < MIN_FACE_FRACTION * n * n:
            continue
        rows, cols = np.nonzero(ok)
        r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        try:
            top, bottom, left, right = shrink_to_valid(ok[r0:r1, c0:c1], camera)
        except DatasetError:
            continue
        top, bottom, left, right = top + r0, bottom + r0, left + c0, right + c0
        if (bottom - top) * (right - left) < MIN_FACE_FRACTION * n * n:
            continue
        index, weights = _bilinear(camera, u[top:bottom, left:right], v[top:bottom, left:right])
        cam = CameraModel("PINHOLE", int(right - left), int(bottom - top), n / 2, n / 2, n / 2 - left, n / 2 - top)
        out.append(Face(name, rot.copy(), cam, n, camera, index, weights, max_angle))
    if not out:
        raise DatasetError(f"{camera.describe()}: no cube face keeps {MIN_FACE_FRACTION:.0%} of its square inside "
                           "the lens footprint")
    return out


def face_name(image_name: str, face: str) -> str:
    """The dataset name of ``face`` of the image ``image_name``: 'name#face' (sorts with
    its image, so the faces of one image stay together)."""
    return f"{image_name}#{face}"
