"""Undistort images of a distorted camera to a pinhole camera, cropped to valid pixels.

Works for every camera model of :mod:`spirula.engine.ingest.camera_model` (fisheye included).
The output keeps fx and fy. Its rectangle is chosen in the undistorted image plane so
that every output pixel centre maps (through the distortion) inside the source image,
i.e. its bilinear sample lies between source pixel centres: no black or smeared border.
The rectangle is bounded by the undistorted image border (each side limited by the
innermost point of the corresponding border edge), then shrunk a row or column at a
time in the rare case where a curved border still leaves invalid pixels inside it.

A fisheye image can reach 90 degrees from the axis and beyond, which a pinhole image
cannot hold (it would be infinitely large): each side of the rectangle is therefore also
limited to ``MAX_SCALE`` times the source image's own extent on that side (measured
from the principal point), like COLMAP's undistorter (``max_scale`` 2); the periphery
beyond it is cut off.

Conventions as in :mod:`spirula.engine.ingest.camera_model` (pixel centres at integer + 0.5).
Resampling is bilinear, vectorised over all pixels (no Python loop over pixels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DatasetError
from .camera_model import CameraModel, normal_from_fisheye

_EPS_PX = 1e-6  # tolerance on "inside the source image" for float round-off
MAX_SCALE = 2.0  # a side of the output extends at most this many times the source's


@dataclass(frozen=True, eq=False)
class Undistorter:
    """Precomputed bilinear map from a distorted ``src`` camera to a pinhole ``dst``.

    dst: the output pinhole camera (model ``"PINHOLE"``, its width x height is the crop).
    index: [dst.height * dst.width] intp flat index (row * src.width + col) of the
    top-left source pixel of each output pixel; weights: [4, dst.height * dst.width]
    float32 bilinear weights of the top-left, top-right, bottom-left, bottom-right
    source pixels (summing to 1). Both None for a camera without distortion (identity).
    """

    src: CameraModel
    dst: CameraModel
    index: np.ndarray | None
    weights: np.ndarray | None

    def __call__(self, image: np.ndarray) -> np.ndarray:
        """[src.height, src.width, C] uint8 -> [dst.height, dst.width, C] uint8."""
        if image.shape[:2] != (self.src.height, self.src.width):
            raise ValueError(f"image is {image.shape[1]}x{image.shape[0]}, camera is {self.src.width}x{self.src.height}")
        if self.index is None:
            return image
        w, n, channels = self.src.width, self.index.size, image.shape[2]
        out = np.empty((n, channels), np.uint8)
        acc = np.empty(n, np.float32)
        tmp = np.empty(n, np.float32)
        for c in range(channels):  # 1-D gathers per channel plane are the fastest in numpy
            plane = np.ascontiguousarray(image[:, :, c]).ravel()
            np.multiply(plane.take(self.index), self.weights[0], out=acc)
            for k, offset in enumerate((1, w, w + 1), start=1):
                np.multiply(plane[offset:].take(self.index), self.weights[k], out=tmp)
                acc += tmp
            acc += 0.5  # round half up: values are >= 0 and the cast truncates
            out[:, c] = acc
        return out.reshape(self.dst.height, self.dst.width, channels)


def make_undistorter(camera: CameraModel) -> Undistorter:
    """Build the map for ``camera``; identity when it has no distortion.

    Raises DatasetError when the distortion cannot be inverted at the image border (a
    radial polynomial that turns back inside the image) or leaves no valid rectangle.
    """
    if camera.is_pinhole:
        return Undistorter(camera, _pinhole(camera, camera.width, camera.height, camera.cx, camera.cy), None, None)
    w, h = camera.width, camera.height
    if w < 2 or h < 2:
        raise DatasetError(f"{camera.describe()}: image too small to undistort")
    xl, xr, yt, yb = _undistorted_bounds(camera)
    out_w, cx = _fit_axis(xl, xr, camera.fx)
    out_h, cy = _fit_axis(yt, yb, camera.fy)
    sx, sy = _source_coords(camera, out_w, out_h, cx, cy)
    valid = (sx >= -_EPS_PX) & (sx <= w - 1 + _EPS_PX) & (sy >= -_EPS_PX) & (sy <= h - 1 + _EPS_PX)
    top, bottom, left, right = shrink_to_valid(valid, camera)
    sx, sy = sx[top:bottom, left:right], sy[top:bottom, left:right]
    dst = _pinhole(camera, right - left, bottom - top, cx - left, cy - top)
    sx = np.clip(sx, 0.0, w - 1.0).ravel()
    sy = np.clip(sy, 0.0, h - 1.0).ravel()
    x0 = np.minimum(np.floor(sx), w - 2).astype(np.intp)
    y0 = np.minimum(np.floor(sy), h - 2).astype(np.intp)
    wx = (sx - x0).astype(np.float32)
    wy = (sy - y0).astype(np.float32)
    weights = np.stack([(1 - wx) * (1 - wy), wx * (1 - wy), (1 - wx) * wy, wx * wy])
    return Undistorter(camera, dst, y0 * w + x0, weights)


def undistort_image(image: np.ndarray, camera: CameraModel) -> tuple[np.ndarray, CameraModel]:
    """One-off convenience: ([H', W', C] uint8 undistorted and cropped, pinhole camera)."""
    u = make_undistorter(camera)
    return u(image), u.dst


def _pinhole(camera: CameraModel, width: int, height: int, cx: float, cy: float) -> CameraModel:
    return CameraModel("PINHOLE", int(width), int(height), camera.fx, camera.fy, float(cx), float(cy))


def _undistorted_bounds(camera: CameraModel) -> tuple[float, float, float, float]:
    """(x_left, x_right, y_top, y_bottom) normalised: the innermost undistorted position
    of each border edge, sampled at every border pixel centre, each limited to
    MAX_SCALE times the source's extent on its side (fisheye border points with no
    pinhole image count as infinitely far out)."""
    w, h = camera.width, camera.height
    us = np.arange(w) + 0.5
    vs = np.arange(h) + 0.5
    edges = {
        "left": (np.full(h, 0.5), vs, -1.0),
        "right": (np.full(h, w - 0.5), vs, 1.0),
        "top": (us, np.full(w, 0.5), -1.0),
        "bottom": (us, np.full(w, h - 0.5), 1.0),
    }
    out = {}
    for side, (u, v, sign) in edges.items():
        a, b, converged = camera.undistort_plane((u - camera.cx) / camera.fx, (v - camera.cy) / camera.fy)
        if not converged.all():
            raise DatasetError(f"{camera.describe()}: distortion cannot be inverted at the {side} image border")
        if camera.is_fisheye:
            x, y, _ = normal_from_fisheye(a, b)  # inf beyond 90 degrees: no limit from there
        else:
            x, y = a, b
        vals = x if side in ("left", "right") else y
        vals = np.where(np.isfinite(vals), vals, sign * np.inf)
        out[side] = vals.min() if sign > 0 else vals.max()
    limit = {
        "left": MAX_SCALE * (0.0 - camera.cx) / camera.fx,
        "right": MAX_SCALE * (w - camera.cx) / camera.fx,
        "top": MAX_SCALE * (0.0 - camera.cy) / camera.fy,
        "bottom": MAX_SCALE * (h - camera.cy) / camera.fy,
    }
    bounds = (
        max(out["left"], limit["left"]),
        min(out["right"], limit["right"]),
        max(out["top"], limit["top"]),
        min(out["bottom"], limit["bottom"]),
    )
    if not (bounds[0] < bounds[1] and bounds[2] < bounds[3]):
        raise DatasetError(f"{camera.describe()}: undistorted image border encloses no rectangle")
    return bounds


def _fit_axis(lo: float, hi: float, f: float) -> tuple[int, float]:
    """(pixel count n, principal point c) so that the n pixel centres k + 0.5 map to
    normalised (k + 0.5 - c) / f inside [lo, hi], centred in it."""
    span_px = f * (hi - lo)
    n = int(np.floor(span_px + 1e-9)) + 1
    slack = span_px - (n - 1)
    return n, 0.5 - f * lo - 0.5 * slack


def _source_coords(camera: CameraModel, width: int, height: int, cx: float, cy: float) -> tuple[np.ndarray, np.ndarray]:
    """[height, width] float64 source array coordinates (column, row; pixel centres at
    integers) of each output pixel centre of the pinhole camera (fx, fy, cx, cy)."""
    x = ((np.arange(width) + 0.5 - cx) / camera.fx)[None, :]
    y = ((np.arange(height) + 0.5 - cy) / camera.fy)[:, None]
    xd, yd = camera.distort(np.broadcast_to(x, (height, width)), np.broadcast_to(y, (height, width)))
    return camera.fx * xd + camera.cx - 0.5, camera.fy * yd + camera.cy - 0.5


def shrink_to_valid(valid: np.ndarray, camera: CameraModel) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) slice bounds of a sub-rectangle of the [H, W] bool mask
    ``valid`` with no invalid pixel, peeling the border row/column with most invalid pixels
    (also the faces' crop, spirula/engine/ingest/faces.py). DatasetError naming ``camera`` when
    nothing is left."""
    top, bottom, left, right = 0, valid.shape[0], 0, valid.shape[1]
    while bottom - top >= 2 and right - left >= 2:
        sub = valid[top:bottom, left:right]
        if sub.all():
            return top, bottom, left, right
        bad = [(~sub[0]).sum(), (~sub[-1]).sum(), (~sub[:, 0]).sum(), (~sub[:, -1]).sum()]
        side = int(np.argmax(bad))
        if bad[side] == 0:  # invalid pixels only inside: peel the side nearest to one
            rows, cols = np.nonzero(~sub)
            d = [rows.min(), sub.shape[0] - 1 - rows.max(), cols.min(), sub.shape[1] - 1 - cols.max()]
            side = int(np.argmin(d))
        top += side == 0
        bottom -= side == 1
        left += side == 2
        right -= side == 3
    raise DatasetError(f"{camera.describe()}: no valid undistorted rectangle")
