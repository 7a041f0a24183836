"""The viewport camera: orbit / pan / zoom around a target, and fly (WASD). Pure NumPy, no
Qt, so it is testable without a display.

Conventions are the engine's: OpenCV camera axes (x right, y down, z forward) and a
world-to-camera matrix ``w2c``. ``up`` is the world's up direction (estimated from the
dataset cameras by the engine); yaw turns around it, pitch tilts towards it.
"""

from __future__ import annotations

import math

import numpy as np


def _unit(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    n = np.linalg.norm(v)
    return v / n if n > 1e-12 else v


class OrbitCamera:
    PITCH_LIMIT = math.radians(89.0)

    def __init__(self, target=(0.0, 0.0, 0.0), distance: float = 3.0, up=(0.0, -1.0, 0.0),
                 fov_y_deg: float = 50.0, scale: float = 1.0):
        self.target = np.asarray(target, np.float64).copy()
        self.distance = float(distance)
        self.fov_y_deg = float(fov_y_deg)
        self.scale = float(scale)  # scene size: fly speed, zoom limits
        self.yaw = 0.0
        self.pitch = 0.0
        self.set_up(up)

    # --- frame -------------------------------------------------------------------------------
    def set_up(self, up) -> None:
        self.up = _unit(up)
        # a horizontal reference frame (e1, e2) perpendicular to up
        a = np.array([1.0, 0.0, 0.0]) if abs(self.up[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        self.e1 = _unit(a - self.up * (a @ self.up))
        self.e2 = np.cross(self.up, self.e1)

    @property
    def forward(self) -> np.ndarray:
        """Unit viewing direction (camera +z in world)."""
        cp = math.cos(self.pitch)
        horiz = math.cos(self.yaw) * self.e1 + math.sin(self.yaw) * self.e2
        return _unit(cp * horiz - math.sin(self.pitch) * self.up)

    @property
    def eye(self) -> np.ndarray:
        return self.target - self.distance * self.forward

    def axes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(right, down, forward) unit vectors in world coordinates."""
        f = self.forward
        x = _unit(np.cross(-self.up, f))
        y = np.cross(f, x)
        return x, y, f

    def w2c(self) -> np.ndarray:
        x, y, f = self.axes()
        m = np.eye(4)
        m[0, :3], m[1, :3], m[2, :3] = x, y, f
        m[:3, 3] = -m[:3, :3] @ self.eye
        return m

    def look_at(self, eye, target) -> None:
        """Place the camera at ``eye`` looking at ``target`` (roll follows ``up``)."""
        eye, target = np.asarray(eye, np.float64), np.asarray(target, np.float64)
        d = target - eye
        self.distance = max(float(np.linalg.norm(d)), 1e-6)
        self.target = target.copy()
        self._set_direction(d / self.distance)

    def look_along(self, eye, forward, distance: float | None = None) -> None:
        """Place the camera at ``eye`` looking along ``forward``, orbiting a target
        ``distance`` ahead (default: the current distance)."""
        f = _unit(forward)
        self.distance = float(distance if distance is not None else self.distance)
        self.target = np.asarray(eye, np.float64) + self.distance * f
        self._set_direction(f)

    def _set_direction(self, f: np.ndarray) -> None:
        s = float(np.clip(-(f @ self.up), -1.0, 1.0))
        self.pitch = float(np.clip(math.asin(s), -self.PITCH_LIMIT, self.PITCH_LIMIT))
        self.yaw = math.atan2(f @ self.e2, f @ self.e1)

    # --- interaction ---------------------------------------------------------------------------
    def orbit(self, dx_px: float, dy_px: float, speed: float = 0.005) -> None:
        """Drag right turns the scene right (camera goes left around the target)."""
        self.yaw -= dx_px * speed
        self.pitch = float(np.clip(self.pitch + dy_px * speed, -self.PITCH_LIMIT, self.PITCH_LIMIT))

    def pan(self, dx_px: float, dy_px: float, viewport_h: int) -> None:
        """The point under the cursor follows the cursor (at the target's depth)."""
        x, y, _ = self.axes()
        px = self.distance * 2.0 * math.tan(math.radians(self.fov_y_deg) / 2) / max(viewport_h, 1)
        self.target = self.target - (x * dx_px + y * dy_px) * px

    def zoom(self, steps: float) -> None:
        """Positive steps move towards the target (mouse wheel forward)."""
        self.distance = float(np.clip(self.distance * 0.85 ** steps, 1e-4 * self.scale, 1e3 * self.scale))

    def zoom_to(self, steps: float, point) -> None:
        """Zoom by ``steps`` (as :meth:`zoom`) towards world ``point`` (the point under the
        cursor): the eye moves along the line to ``point`` by the share the distance to the
        target shrinks, so ``point`` stays under the cursor; the target moves with it."""
        p = np.asarray(point, np.float64)
        before, eye = self.distance, self.eye
        self.zoom(steps)
        k = 1.0 - self.distance / before      # the share of the way to the point
        eye = eye + k * (p - eye)
        self.target = eye + self.distance * self.forward

    def orbit_about(self, pivot, dx_px: float, dy_px: float, speed: float = 0.005) -> None:
        """:meth:`orbit`, turning about world ``pivot`` instead of the target: the eye and
        the target rotate about it with the view, so the point under the cursor stays put."""
        p = np.asarray(pivot, np.float64)
        a0 = np.stack(self.axes())
        eye = self.eye
        self.orbit(dx_px, dy_px, speed)
        r = np.stack(self.axes()).T @ a0          # world rotation taking the old axes to the new
        eye = p + r @ (eye - p)
        self.target = eye + self.distance * self.forward

    def frame_box(self, box, width: int, height: int, margin: float = 0.9) -> None:
        """Look at the centre of world box ``box`` (xmin ymin zmin xmax ymax zmax) along the
        current direction, from the nearest distance at which its eight corners lie inside
        ``margin`` of the view (the vertical and the horizontal field of view, ``width`` x
        ``height`` pixels) and in front of the camera."""
        b = np.asarray(box, np.float64).reshape(2, 3)
        c = b.mean(0)
        corners = np.array([[b[(k >> a) & 1, a] for a in range(3)] for k in range(8)]) - c
        x, y, f = self.axes()
        ty = math.tan(math.radians(self.fov_y_deg) / 2) * margin
        tx = ty * (width / height if height > 0 else 1.0)
        along = corners @ f
        need = np.maximum(np.abs(corners @ x) / tx, np.abs(corners @ y) / ty) - along
        near = float(np.max(np.abs(corners @ f))) * 1.01       # the box in front, not around the eye
        self.target = c
        self.distance = max(float(need.max()), near, 1e-6)

    def ray(self, x: float, y: float, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
        """(eye [3], unit direction [3]) of the viewing ray through pixel (x, y)."""
        fx, fy, cx, cy = self.intrinsics(width, height)
        xa, ya, f = self.axes()
        d = _unit((x - cx) / fx * xa + (y - cy) / fy * ya + f)
        return self.eye, d

    def fly(self, forward: float, right: float, up: float, dt: float, speed: float | None = None) -> None:
        """Move eye and target together (WASD + Q/E); speed in scene sizes per second."""
        x, _, f = self.axes()
        v = (speed if speed is not None else 0.5) * self.scale * dt
        self.target = self.target + v * (forward * f + right * x + up * self.up)

    # --- projection (picking) -------------------------------------------------------------------
    def intrinsics(self, width: int, height: int) -> tuple[float, float, float, float]:
        f = 0.5 * height / math.tan(math.radians(self.fov_y_deg) / 2)
        return f, f, width / 2.0, height / 2.0

    def project(self, points, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates [N, 2] of world points and whether each is in front."""
        p = np.atleast_2d(np.asarray(points, np.float64))
        m = self.w2c()
        c = p @ m[:3, :3].T + m[:3, 3]
        fx, fy, cx, cy = self.intrinsics(width, height)
        z = c[:, 2]
        safe = np.where(np.abs(z) < 1e-9, 1e-9, z)
        uv = np.stack([fx * c[:, 0] / safe + cx, fy * c[:, 1] / safe + cy], axis=1)
        return uv, z > 1e-6


def point_under(camera: OrbitCamera, points, width: int, height: int, x: float, y: float,
                radius_px: float = 12.0) -> np.ndarray | None:
    """The world point under pixel (x, y): of ``points`` [N, 3] (a sample of the scene's
    points), the nearest to the eye among those whose projection lies within ``radius_px``
    of (x, y) and in front; None when none does."""
    if points is None or len(points) == 0:
        return None
    p = np.asarray(points, np.float64).reshape(-1, 3)
    uv, front = camera.project(p, width, height)
    near = front & (np.hypot(uv[:, 0] - x, uv[:, 1] - y) <= radius_px)
    if not near.any():
        return None
    q = p[near]
    return q[int(np.argmin(np.linalg.norm(q - camera.eye, axis=1)))]


def pick(camera: OrbitCamera, centers, width: int, height: int, x: float, y: float,
         radius_px: float = 14.0) -> int | None:
    """Index of the camera centre nearest to pixel (x, y) within ``radius_px``, or None."""
    if centers is None or len(centers) == 0:
        return None
    uv, front = camera.project(centers, width, height)
    d = np.hypot(uv[:, 0] - x, uv[:, 1] - y)
    d[~front] = np.inf
    i = int(np.argmin(d))
    return i if d[i] <= radius_px else None
