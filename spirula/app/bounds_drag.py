"""Dragging a face of a box in the viewport: the mesh stage's box (world axis-aligned, or the
oriented box it proposes) and the splat edit's crop box (spirula/engine/studio/bounds_box.py: a box
is its bounds in the coordinates of its ``frame``, None the world's axes). No Qt: the picking
and the move are NumPy over the viewport camera (spirula/app/camera.py), testable without a display.

A press within HANDLE_RADIUS_PX of a face handle's projection grabs that face; while the
mouse moves, the face follows the cursor along its axis: it goes to the point of the
axis line (through the face centre) nearest to the cursor's viewing ray, less where the
press was, so the handle stays under a cursor that moves along the axis and does not
jump when grabbed off-centre. An axis seen end-on (its screen length below MIN_AXIS_PX
per box size) does not move: there, the nearest point is ill-defined."""

from __future__ import annotations

import numpy as np

from spirula.engine.studio.bounds_box import face_centers, frame_of, move_face

from .camera import OrbitCamera

HANDLE_RADIUS_PX = 14.0
MIN_AXIS_PX = 4.0


def pick_face(camera: OrbitCamera, bounds, width: int, height: int, x: float, y: float,
              radius_px: float = HANDLE_RADIUS_PX, frame=None) -> int | None:
    """The face whose handle is nearest to pixel (x, y) within ``radius_px``; the nearer
    one to the eye when two overlap on screen. None when there is none."""
    if len(bounds) != 6:
        return None
    centers = face_centers(bounds, frame)
    uv, front = camera.project(centers, width, height)
    d = np.hypot(uv[:, 0] - x, uv[:, 1] - y)
    d[~front] = np.inf
    near = np.flatnonzero(d <= radius_px)
    if len(near) == 0:
        return None
    depth = np.linalg.norm(centers[near] - camera.eye, axis=1)
    return int(near[np.lexsort((depth, d[near].round(1)))[0]])


class FaceDrag:
    """One drag of face ``face`` of ``bounds`` (in ``frame``) that started at pixel ``start``;
    :meth:`at` gives the bounds in the same frame."""

    def __init__(self, camera: OrbitCamera, bounds, face: int, width: int, height: int, start, frame=None):
        self.bounds, self.face = tuple(float(v) for v in bounds), face
        self.frame = frame_of(frame)
        self.start = np.asarray(start, np.float64)
        lo, hi = np.asarray(self.bounds[:3]), np.asarray(self.bounds[3:])
        self.unit = max(float(np.max(hi - lo)), 1e-9)   # a world step of a box size
        c = face_centers(self.bounds, self.frame)[face]
        axis = self.frame[face % 3] * self.unit   # the face's axis, world
        uv, front = camera.project(np.stack([c, c + axis]), width, height)
        self.screen_axis = uv[1] - uv[0] if front.all() else np.zeros(2)   # pixels per box size
        self.camera, self.size, self.center = camera, (width, height), c
        self.t0 = self._along(self.start)

    def _along(self, pos) -> float | None:
        """World offset along the axis (from the face centre) nearest to the ray through ``pos``."""
        if float(self.screen_axis @ self.screen_axis) < MIN_AXIS_PX ** 2:
            return None
        fx, fy, cx, cy = self.camera.intrinsics(*self.size)
        w2c = self.camera.w2c()
        ray = w2c[:3, :3].T @ np.array([(pos[0] - cx) / fx, (pos[1] - cy) / fy, 1.0])
        ray /= np.linalg.norm(ray)
        axis = self.frame[self.face % 3]
        w = self.center - self.camera.eye
        b = float(axis @ ray)
        den = 1.0 - b * b
        if den < 1e-9:
            return None
        return float(b * (w @ ray) - (w @ axis)) / den

    def at(self, pos) -> tuple:
        """The bounds with the face moved for the cursor at ``pos``."""
        t = self._along(pos)
        if t is None or self.t0 is None:
            return self.bounds
        return move_face(self.bounds, self.face, self.bounds[self.face] + t - self.t0)
