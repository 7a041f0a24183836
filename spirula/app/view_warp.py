"""The window's own answer to a camera move while the engine is busy: the last frame the
engine rendered, reprojected for the camera the user has moved to (as VR's timewarp shows
the last frame turned with the head until the next one comes).

The reprojection is the homography a plane induces between two pinhole cameras: the plane
is the one through the orbit's pivot (the target, or the point under the cursor the drag
turns about) parallel to the frame's image plane. Points on that plane land exactly where
the new camera sees them; so does everything for a pure rotation about the eye; off the plane
a translation shows a parallax error growing with the distance from it. The frame's pixels
outside the new view are gone and the new view's pixels the frame never saw show the
background: an honest, approximate preview that the engine's render of the new camera
replaces as soon as it arrives (spirula/app/image_view.py).

Conventions: OpenCV camera axes (x right, y down, z forward), ``w2c`` world-to-camera
[4, 4], intrinsics (fx, fy, cx, cy) in pixels of their image, pixel (x, y) = (fx X / Z + cx,
fy Y / Z + cy); a homography maps column vectors (x, y, 1). Pure NumPy (no Qt)."""

from __future__ import annotations

import math

import numpy as np

MIN_DEPTH = 1e-6   # a pivot closer to (or behind) the frame's camera than this: no reprojection


def free_intrinsics(fov_y_deg: float, width: float, height: float) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) in pixels of the viewport's free camera: vertical field of view
    ``fov_y_deg`` (degrees) over ``height`` pixels, square pixels, the centre as principal
    point (spirula/engine/studio/viewer.py Viewer.view_camera's)."""
    f = 0.5 * height / math.tan(math.radians(fov_y_deg) / 2)
    return f, f, width / 2, height / 2


def _k(intrinsics) -> np.ndarray:
    fx, fy, cx, cy = (float(v) for v in intrinsics)
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def plane_homography(w2c_from, k_from, w2c_to, k_to, pivot) -> np.ndarray | None:
    """[3, 3] float64 homography from the pixels of the image of camera (``w2c_from`` [4, 4],
    intrinsics ``k_from``) to those of camera (``w2c_to``, ``k_to``), exact for the world
    points on the plane through ``pivot`` [3] (world) parallel to the first image plane; the
    third coordinate of a mapped pixel has the sign of the point's depth in the second camera.
    None when the pivot is not in front of the first camera (no such plane in view)."""
    a = np.asarray(w2c_from, np.float64).reshape(4, 4)
    b = np.asarray(w2c_to, np.float64).reshape(4, 4)
    depth = float(a[2, :3] @ np.asarray(pivot, np.float64) + a[2, 3])
    if not depth > MIN_DEPTH:
        return None
    rel = b @ np.linalg.inv(a)                      # first camera's coordinates -> second's
    r, t = rel[:3, :3], rel[:3, 3]
    h = _k(k_to) @ (r + np.outer(t, [0.0, 0.0, 1.0 / depth])) @ np.linalg.inv(_k(k_from))
    return h / abs(h[2, 2]) if abs(h[2, 2]) > 1e-12 else h  # a positive scale: the third row's sign is depth's


def maps_in_front(h: np.ndarray, width: float, height: float) -> bool:
    """Whether every point of the source image's rectangle (``width`` x ``height`` pixels)
    lands in front of the second camera (a positive third coordinate at the four corners,
    hence inside): a homography folding part of the plane behind the eye draws nothing true."""
    corners = np.array([[0, 0, 1], [width, 0, 1], [0, height, 1], [width, height, 1]], np.float64)
    return bool(np.all(corners @ np.asarray(h, np.float64)[2] > 0))


def same_view(w2c_a, k_a, w2c_b, k_b, tol: float = 1e-9) -> bool:
    """The two cameras are one (poses and intrinsics equal within ``tol``): the frame is
    shown as it is, pixel for pixel."""
    return (np.allclose(np.asarray(w2c_a, np.float64).reshape(4, 4), np.asarray(w2c_b, np.float64).reshape(4, 4),
                        rtol=0.0, atol=tol)
            and np.allclose(np.asarray(k_a, np.float64), np.asarray(k_b, np.float64), rtol=0.0, atol=tol))
