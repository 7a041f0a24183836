"""Camera paths for a video of a scene (`spirula render`): an orbit about the subject, the
training cameras' path smoothed, or keyframes interpolated. NumPy only (no GPU).

Conventions: our world frame (the training's: COLMAP / OpenCV, y down in a typical capture);
a camera is a [4, 4] float64 camera-to-world ``c2w`` with OpenCV axes (x right, y down, z
forward) and a vertical field of view ``fov`` in degrees; a frame's intrinsics for a W x H
image are square pixels about the centre: ``fy = fx = (H / 2) / tan(fov / 2)``,
``cx = W / 2``, ``cy = H / 2`` (:func:`intrinsics`).

- :func:`orbit`: ``n`` cameras at angles ``2 pi i / n`` (the loop closes without a repeated
  frame) about ``centre`` on a circle of ``radius`` perpendicular to ``up`` at ``height``
  along it, each looking at the centre, starting at ``start`` (a direction).
- :func:`orbit_from_cameras`: the centre is the point nearest every training camera's
  optical axis (least squares; the cameras' mean centre pushed along their mean forward
  axis by the median camera distance when the axes are near parallel), up is minus the
  cameras' mean y axis, radius and height the medians of the cameras' horizontal and
  vertical offsets from the centre, the start the first camera's direction (by name), the
  field of view the cameras' median.
- :func:`orbit_from_splats`: the robust extent of the centres (the 5th-95th percentile box
  per axis), up = -y (our frame's), the camera 20 degrees above the horizon at the distance
  where the box's bounding sphere fills the field of view (default 50 degrees).
- :func:`smoothed_path`: the training cameras in name order (a video's frames), centres
  and rotations smoothed by a Gaussian over the sequence (sigma ``smooth`` cameras;
  centres and fields of view continued past the ends by point reflection so the path
  starts and ends at the first and last cameras; quaternions sign-aligned to their
  neighbours, averaged and normalised), then resampled to ``n`` frames evenly along the
  sequence (linear centres, slerp rotations).
- :func:`keyframe_path` / :func:`read_keyframes` / :func:`write_keyframes`: keyframes at given times (seconds) or
  evenly spaced over the duration; frame ``i`` is at ``i / fps`` seconds; between two
  keyframes the centre and the field of view are linear, the rotation a slerp; before the
  first and after the last the nearest keyframe holds.

Errors: :class:`spirula.engine.errors.SpirulaError` in one line naming the keyframe file for a file
that is not JSON, no keyframes, a c2w (keyframes counted from 1) that is not a finite 4 x 4 (or 3 x 4) rigid
transform with a rotation (orthonormal to 1e-3, determinant +1), a field of view outside
(0, 180) degrees, or times that do not increase.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import SpirulaError

__all__ = ["look_at", "orbit", "orbit_from_cameras", "orbit_from_splats", "smoothed_path", "keyframe_path",
           "read_keyframes", "write_keyframes", "intrinsics", "fov_of", "rot_to_quat", "quat_to_rot", "slerp"]


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray) -> np.ndarray:
    """[4, 4] c2w (OpenCV axes) at ``eye`` looking at ``target`` with ``up`` (world) upward
    on screen (the camera's y axis, which points down, is as near to -up as it can be)."""
    z = np.asarray(target, np.float64) - np.asarray(eye, np.float64)
    z /= np.linalg.norm(z)
    x = np.cross(-np.asarray(up, np.float64), z)
    if np.linalg.norm(x) < 1e-9:                      # looking straight along up: any sideways axis
        x = np.cross(z, [1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.cross(z, [0.0, 1.0, 0.0])
    x /= np.linalg.norm(x)
    c2w = np.eye(4)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = x, np.cross(z, x), z, eye
    return c2w


def orbit(n: int, centre, radius: float, up, height: float = 0.0, start=None) -> np.ndarray:
    """[n, 4, 4] c2w on the circle described in the module docstring."""
    up = np.asarray(up, np.float64) / np.linalg.norm(up)
    a = np.asarray(start if start is not None else [1.0, 0.0, 0.0], np.float64)
    a = a - up * (a @ up)
    if np.linalg.norm(a) < 1e-9:
        a = np.cross(up, [1.0, 0.0, 0.0]) if abs(up[0]) < 0.9 else np.cross(up, [0.0, 1.0, 0.0])
    a /= np.linalg.norm(a)
    b = np.cross(up, a)
    theta = 2.0 * np.pi * np.arange(n) / n
    centre = np.asarray(centre, np.float64)
    eyes = centre + radius * (np.cos(theta)[:, None] * a + np.sin(theta)[:, None] * b) + height * up
    return np.stack([look_at(e, centre, up) for e in eyes]) if n else np.zeros((0, 4, 4))


def fov_of(fy: float, height: int) -> float:
    """Vertical field of view in degrees of a focal length ``fy`` px over ``height`` px."""
    return math.degrees(2.0 * math.atan(0.5 * height / fy))


def intrinsics(fov: float, width: int, height: int) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) px of a vertical ``fov`` (degrees), square pixels, centred."""
    f = 0.5 * height / math.tan(math.radians(fov) / 2.0)
    return f, f, 0.5 * width, 0.5 * height


def orbit_from_cameras(c2w: np.ndarray, fovs: np.ndarray, n: int) -> tuple[np.ndarray, float]:
    """([n, 4, 4] c2w, fov degrees) of the orbit about what the training cameras ``c2w``
    [K, 4, 4] (name order) look at (module docstring)."""
    c2w = np.asarray(c2w, np.float64)
    centres, fwd = c2w[:, :3, 3], c2w[:, :3, 2]
    proj = np.eye(3)[None] - fwd[:, :, None] * fwd[:, None, :]          # [K, 3, 3] off-axis projectors
    a, b = proj.sum(0), np.einsum("kij,kj->i", proj, centres)
    mean = centres.mean(0)
    spread = float(np.median(np.linalg.norm(centres - mean, axis=1))) or 1.0
    if np.linalg.cond(a) < 1e6:
        focus = np.linalg.solve(a, b)
    else:
        f = fwd.mean(0)
        focus = mean + f / (np.linalg.norm(f) or 1.0) * spread
    up = -c2w[:, :3, 1].mean(0)
    up /= np.linalg.norm(up) or 1.0
    off = centres - focus
    h = off @ up
    horiz = off - h[:, None] * up
    radius = float(np.median(np.linalg.norm(horiz, axis=1)))
    if radius <= 1e-9:
        radius = spread
    fov = float(np.median(fovs))
    return orbit(n, focus, radius, up, float(np.median(h)), start=horiz[0]), fov


def orbit_from_splats(means: np.ndarray, n: int, fov: float = 50.0, elevation: float = 20.0) -> np.ndarray:
    """[n, 4, 4] c2w of the orbit about the robust extent of [N, 3] centres (module docstring)."""
    means = np.asarray(means, np.float64)
    lo, hi = np.percentile(means, 5, axis=0), np.percentile(means, 95, axis=0)
    centre, half = (lo + hi) / 2.0, float(np.linalg.norm(hi - lo) / 2.0) or 1.0
    dist = half / math.sin(math.radians(fov) / 2.0)
    el = math.radians(elevation)
    return orbit(n, centre, dist * math.cos(el), np.array([0.0, -1.0, 0.0]), dist * math.sin(el),
                 start=np.array([0.0, 0.0, -1.0]))


def rot_to_quat(r: np.ndarray) -> np.ndarray:
    """[K, 4] unit quaternions (w, x, y, z), w >= 0, of rotation matrices [K, 3, 3]."""
    r = np.asarray(r, np.float64)
    m = np.stack([  # the symmetric 4 x 4 whose top eigenvector is the quaternion (Bar-Itzhack)
        np.stack([r[:, 0, 0] + r[:, 1, 1] + r[:, 2, 2], r[:, 2, 1] - r[:, 1, 2], r[:, 0, 2] - r[:, 2, 0],
                  r[:, 1, 0] - r[:, 0, 1]], -1),
        np.stack([r[:, 2, 1] - r[:, 1, 2], r[:, 0, 0] - r[:, 1, 1] - r[:, 2, 2], r[:, 0, 1] + r[:, 1, 0],
                  r[:, 0, 2] + r[:, 2, 0]], -1),
        np.stack([r[:, 0, 2] - r[:, 2, 0], r[:, 0, 1] + r[:, 1, 0], r[:, 1, 1] - r[:, 0, 0] - r[:, 2, 2],
                  r[:, 1, 2] + r[:, 2, 1]], -1),
        np.stack([r[:, 1, 0] - r[:, 0, 1], r[:, 0, 2] + r[:, 2, 0], r[:, 1, 2] + r[:, 2, 1],
                  r[:, 2, 2] - r[:, 0, 0] - r[:, 1, 1]], -1)], -2) / 3.0
    _, vec = np.linalg.eigh(m)
    q = vec[:, :, -1]
    return q * np.where(q[:, :1] < 0, -1.0, 1.0)


def quat_to_rot(q: np.ndarray) -> np.ndarray:
    """[K, 3, 3] rotation matrices of quaternions [K, 4] (w, x, y, z; normalised here)."""
    q = np.asarray(q, np.float64)
    w, x, y, z = (q / np.linalg.norm(q, axis=1, keepdims=True)).T
    return np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                     np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                     np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def slerp(q0: np.ndarray, q1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """[K, 4] spherical interpolation from ``q0`` to ``q1`` ([K, 4] unit, w x y z) at ``t``
    [K] in [0, 1], along the shorter arc."""
    q0, q1, t = np.asarray(q0, np.float64), np.asarray(q1, np.float64), np.asarray(t, np.float64)[:, None]
    d = np.sum(q0 * q1, axis=1, keepdims=True)
    q1 = np.where(d < 0, -q1, q1)
    d = np.clip(np.abs(d), -1.0, 1.0)
    ang = np.arccos(d)
    s = np.sin(ang)
    near = s < 1e-6
    w0 = np.where(near, 1.0 - t, np.sin((1.0 - t) * ang) / np.where(near, 1.0, s))
    w1 = np.where(near, t, np.sin(t * ang) / np.where(near, 1.0, s))
    q = w0 * q0 + w1 * q1
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _sample(times: np.ndarray, centres: np.ndarray, quats: np.ndarray, fovs: np.ndarray,
            at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([M, 4, 4] c2w, [M] fov) at the times ``at`` of a path through keys at increasing
    ``times`` [K] (linear centre and fov, slerp rotation; the ends hold)."""
    at = np.clip(np.asarray(at, np.float64), times[0], times[-1])
    if len(times) == 1:
        j = np.zeros(len(at), np.int64)
        u = np.zeros(len(at))
        k = j
    else:
        j = np.clip(np.searchsorted(times, at, side="right") - 1, 0, len(times) - 2)
        k = j + 1
        u = (at - times[j]) / np.maximum(times[k] - times[j], 1e-12)
    c = centres[j] + u[:, None] * (centres[k] - centres[j])
    q = slerp(quats[j], quats[k], u)
    out = np.tile(np.eye(4), (len(at), 1, 1))
    out[:, :3, :3], out[:, :3, 3] = quat_to_rot(q), c
    return out, fovs[j] + u * (fovs[k] - fovs[j])


def smoothed_path(c2w: np.ndarray, fovs: np.ndarray, n: int, smooth: float | None = None) -> tuple[np.ndarray,
                                                                                                    np.ndarray]:
    """([n, 4, 4] c2w, [n] fov) along the training cameras ``c2w`` [K, 4, 4] (name order),
    smoothed over ``smooth`` cameras (default K / 30, at least 1)."""
    c2w = np.asarray(c2w, np.float64)
    k = len(c2w)
    sigma = max(1.0, k / 30.0) if smooth is None else max(float(smooth), 1e-6)
    q = rot_to_quat(c2w[:, :3, :3])
    signs = np.cumprod(np.concatenate([[1.0], np.where(np.sum(q[1:] * q[:-1], axis=1) < 0, -1.0, 1.0)]))
    q = q * signs[:, None]                                           # each on its neighbour's side
    idx = np.arange(k, dtype=np.float64)
    qs = _smooth_reflected(q, sigma, rotations=True)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    centres = _smooth_reflected(c2w[:, :3, 3], sigma)
    fov = _smooth_reflected(np.asarray(fovs, np.float64)[:, None], sigma)[:, 0]
    return _sample(idx, centres, qs, fov, np.linspace(0.0, k - 1.0, n) if n > 1 else np.zeros(n))


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[K, 4] Hamilton products of quaternions (w, x, y, z) [K, 4] or [1, 4]."""
    w1, x1, y1, z1 = np.moveaxis(a, -1, 0)
    w2, x2, y2, z2 = np.moveaxis(b, -1, 0)
    return np.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], -1)


def _reflect(end: np.ndarray, x: np.ndarray, rotations: bool) -> np.ndarray:
    """Point reflections of ``x`` [J, D] about ``end`` [1, D]: ``2 end - x``, or for unit
    quaternions ``end x^-1 end`` (the rotation as far past the end as x is before it),
    sign-aligned with ``end``."""
    if not rotations:
        return 2 * end - x
    r = _qmul(_qmul(end, x * np.array([1.0, -1.0, -1.0, -1.0])), end)
    return r * np.where(np.sum(r * end, axis=1, keepdims=True) < 0, -1.0, 1.0)


def _smooth_reflected(x: np.ndarray, sigma: float, rotations: bool = False) -> np.ndarray:
    """[K, D] Gaussian-smoothed (sigma in samples) with the sequence continued past each end
    by its point reflection about the end (:func:`_reflect`): the ends stay where they are
    and a straight (or steadily turning) stretch stays so; plain truncated weights pull the
    ends inwards. ``rotations``: rows are sign-aligned unit quaternions (the result is not
    normalised)."""
    k = len(x)
    p = min(k - 1, int(math.ceil(4 * sigma)))
    ext = np.concatenate([_reflect(x[:1], x[p:0:-1], rotations), x,
                          _reflect(x[-1:], x[-2:-p - 2:-1], rotations)]) if p > 0 else x
    j = np.arange(len(ext), dtype=np.float64) - p
    w = np.exp(-0.5 * ((np.arange(k, dtype=np.float64)[:, None] - j[None, :]) / sigma) ** 2)
    return (w / w.sum(1, keepdims=True)) @ ext


def keyframe_path(c2w: np.ndarray, fovs: np.ndarray, times: np.ndarray | None, n: int, fps: float) -> tuple[
        np.ndarray, np.ndarray]:
    """([n, 4, 4] c2w, [n] fov) at ``i / fps`` seconds through keyframes ``c2w`` [K, 4, 4]
    with ``fovs`` [K] at ``times`` [K] seconds (None: evenly over ``(n - 1) / fps``)."""
    c2w = np.asarray(c2w, np.float64)
    if times is None:
        times = np.linspace(0.0, (n - 1) / fps, len(c2w)) if len(c2w) > 1 else np.zeros(1)
    q = rot_to_quat(c2w[:, :3, :3])
    return _sample(np.asarray(times, np.float64), c2w[:, :3, 3], q, np.asarray(fovs, np.float64),
                   np.arange(n) / float(fps))


def read_keyframes(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(c2w [K, 4, 4], fov [K] degrees, times [K] seconds or None) of a keyframe file: JSON,
    a list of keyframes or {"keyframes": [...]}, each {"c2w": 4 x 4 (or 3 x 4) rows,
    "fov": vertical degrees, optional "time": seconds}. SpirulaError in one line naming the
    file for anything else (module docstring)."""
    path = Path(path)

    def bad(what: str):
        return SpirulaError(f"{path}: keyframe file: {what}")

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise bad(f"cannot read ({e.strerror or e})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise bad(f"not valid JSON ({e})") from None
    keys = doc.get("keyframes") if isinstance(doc, dict) else doc
    if not isinstance(keys, list) or not keys:
        raise bad('no keyframes (expected a list, or {"keyframes": [...]}, of {"c2w": 4x4, "fov": degrees})')
    mats, fovs, times = [], [], []
    for i, k in enumerate(keys):
        if not isinstance(k, dict):
            raise bad(f"keyframe {i + 1} (of {len(keys)}) is not an object")
        try:
            m = np.asarray(k.get("c2w"), np.float64)
        except (TypeError, ValueError):
            m = np.zeros(0)
        if m.shape == (3, 4):
            m = np.vstack([m, [0.0, 0.0, 0.0, 1.0]])
        if m.shape != (4, 4) or not np.all(np.isfinite(m)):
            raise bad(f"keyframe {i + 1}'s c2w is not a 4 x 4 (or 3 x 4) matrix of finite numbers")
        r = m[:3, :3]
        if np.abs(r @ r.T - np.eye(3)).max() > 1e-3 or np.linalg.det(r) < 0 or np.abs(m[3] - [0, 0, 0, 1]).max() > 1e-9:
            raise bad(f"keyframe {i + 1}'s c2w is not a rigid transform (its 3 x 3 part must be a rotation)")
        fov = k.get("fov")
        if not isinstance(fov, (int, float)) or isinstance(fov, bool) or not 0.0 < fov < 180.0:
            raise bad(f"keyframe {i + 1}'s fov is {json.dumps(fov)}, not a vertical field of view in (0, 180) degrees")
        mats.append(m)
        fovs.append(float(fov))
        times.append(k.get("time"))
    if all(t is None for t in times):
        t = None
    else:
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) for v in times):
            raise bad("every keyframe needs a number \"time\" (seconds) when one has it")
        t = np.asarray(times, np.float64)
        if np.any(np.diff(t) <= 0) or t[0] < 0:
            raise bad("the keyframes' times must start at 0 or later and increase")
    return np.stack(mats), np.asarray(fovs), t


def write_keyframes(path: str | Path, c2w: np.ndarray, fovs: np.ndarray, times: np.ndarray | None = None) -> None:
    """Write keyframes (``c2w`` [K, 4, 4] camera-to-world, OpenCV axes; ``fovs`` [K] vertical
    degrees; ``times`` [K] seconds or None: spread evenly) as the JSON file :func:`read_keyframes`
    reads and `spirula render --keyframes` takes: {"keyframes": [{"c2w", "fov"[, "time"]}]}.
    OSError as raised by the write (the caller names the file)."""
    c2w = np.asarray(c2w, np.float64).reshape(-1, 4, 4)
    rows = []
    for i in range(len(c2w)):
        row = {"c2w": c2w[i].tolist(), "fov": float(fovs[i])}
        if times is not None:
            row["time"] = float(times[i])
        rows.append(row)
    Path(path).write_text(json.dumps({"keyframes": rows}, indent=1), encoding="utf-8")
