"""What the viewport draws over the splats as world-space line segments: the dataset cameras'
frustums, the video's keyframes and path, the mesh bounds box and the crop box with their drag handles
(spirula/engine/studio/viewer.py projects and draws them with shaders/view/viewer.slang draw_segments)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BG_TOP = (0.16, 0.17, 0.20)     # the viewport's background gradient, RGB in 0..1, at the top ...
BG_BOTTOM = (0.05, 0.05, 0.06)  # ... and at the bottom (the window's reprojected frames share it)
COLOR_TRAIN = (255, 170, 60)
COLOR_TEST = (90, 200, 255)
COLOR_SELECTED = (255, 255, 255)
COLOR_EXCLUDED = (110, 110, 116)


def _bgra(rgb) -> int:
    r, g, b = rgb
    return int(b) | (int(g) << 8) | (int(r) << 16) | (0xFF << 24)


COLOR_BOUNDS = (250, 230, 80)
COLOR_KEYFRAME = (120, 255, 140)
COLOR_PATH = (80, 220, 120)
COLOR_HANDLES = (255, 140, 40)
COLOR_HOVER = (255, 255, 255)


def box_segments(bounds, highlight: int = -1, frame=None, color=COLOR_BOUNDS) -> tuple[np.ndarray, np.ndarray]:
    """The 12 edges of the box ``bounds`` (xmin, ymin, zmin, xmax, ymax, zmax in ``frame``'s
    coordinates, its rows the box's axes; None: the world's) in ``color`` and its 6 face handles
    (spirula/engine/studio/bounds_box.py, what the mouse drags), face ``highlight``'s handle (under the
    mouse, or dragged) larger and in COLOR_HOVER: ([30, 6], [30] BGRA)."""
    from .bounds_box import box_edges, handle_segments

    segs = box_edges(bounds, frame)
    handles = handle_segments(bounds, highlight, frame)
    hcols = np.full(len(handles), _bgra(COLOR_HANDLES), np.uint32)
    if 0 <= highlight < 6:
        hcols[3 * highlight:3 * highlight + 3] = _bgra(COLOR_HOVER)
    cols = np.concatenate([np.full(len(segs), _bgra(color), np.uint32), hcols])
    return np.concatenate([segs, handles]), cols


def frustum_segments(cameras, size: float, selected: int | None = None,
                     splits: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Line segments of camera frustums: ([S, 6] float32 world endpoints, [S] uint32 BGRA).

    Each camera: 4 edges from the centre to the image corners at depth ``size``, the image
    rectangle, and a small triangle over the top edge showing which way is up."""
    if not cameras:
        return np.zeros((0, 6), np.float32), np.zeros(0, np.uint32)
    segs, cols = [], []
    for i, c in enumerate(cameras):
        c2w = np.linalg.inv(np.asarray(c.w2c, np.float64))
        # image corners in camera coordinates (OpenCV: x right, y down, z forward) at depth 1
        u = np.array([0.0, c.width, c.width, 0.0])
        v = np.array([0.0, 0.0, c.height, c.height])
        pts = np.stack([(u - c.cx) / c.fx, (v - c.cy) / c.fy, np.ones(4)], axis=1)
        pts *= size / np.linalg.norm(pts, axis=1).max()
        tl, tr = pts[0] * 0.75 + pts[1] * 0.25, pts[0] * 0.25 + pts[1] * 0.75
        apex = (pts[0] + pts[1]) / 2 - np.array([0.0, 0.3 * (pts[3, 1] - pts[0, 1]), 0.0])
        local = np.vstack([np.zeros((1, 3)), pts, tl, apex, tr])
        world = local @ c2w[:3, :3].T + c2w[:3, 3]
        o, k, t0, up, t1 = world[0], world[1:5], world[5], world[6], world[7]
        lines = [(o, k[j]) for j in range(4)] + [(k[j], k[(j + 1) % 4]) for j in range(4)]
        lines += [(t0, up), (up, t1)]
        if splits is not None and i < len(splits) and splits[i] == "test":
            color = COLOR_TEST
        elif splits is not None and i < len(splits) and splits[i] == "excluded":
            color = COLOR_EXCLUDED
        else:
            color = COLOR_TRAIN
        if i == selected:
            color = COLOR_SELECTED
        segs += [np.concatenate([a, b]) for a, b in lines]
        cols += [_bgra(color)] * len(lines)
    return np.asarray(segs, np.float32), np.asarray(cols, np.uint32)


@dataclass(frozen=True)
class _PathCamera:
    """A keyframe as frustum_segments draws a camera (an image 1 unit tall, ``aspect`` wide)."""
    w2c: np.ndarray
    fx: float
    fy: float
    cx: float
    cy: float
    width: float
    height: float


def keyframe_segments(keyframes, points, size: float, aspect: float = 16 / 9) -> tuple[np.ndarray, np.ndarray]:
    """The video's keyframe cameras as frustums (``keyframes``: ((c2w 16 floats row-major,
    OpenCV axes, vertical fov degrees), ...), depth ``size`` world units, images ``aspect``
    wide for 1 tall) and its interpolated path as a polyline through ``points`` [P, 3]:
    ([10 K + P - 1, 6] float32, [S] uint32 BGRA)."""
    cams = []
    for c2w, fov in keyframes:
        f = 0.5 / np.tan(np.radians(float(fov)) / 2)
        cams.append(_PathCamera(np.linalg.inv(np.reshape(np.asarray(c2w, np.float64), (4, 4))), f, f,
                                aspect / 2, 0.5, aspect, 1.0))
    segs, cols = frustum_segments(cams, size)
    cols = np.full(len(cols), _bgra(COLOR_KEYFRAME), np.uint32)
    p = np.asarray(points, np.float32).reshape(-1, 3)
    if len(p) >= 2:
        segs = np.concatenate([segs, np.concatenate([p[:-1], p[1:]], axis=1)])
        cols = np.concatenate([cols, np.full(len(p) - 1, _bgra(COLOR_PATH), np.uint32)])
    return segs.astype(np.float32), cols
