"""A box drawn in the viewport and dragged there by its faces: the mesh stage's box (axis
aligned, or the oriented box ``--bounds auto`` proposes) and the splat edit's crop box. Its
edges, its six face handles and the move of one face.

A box is ``bounds`` (lo [3], hi [3]: xmin, ymin, zmin, xmax, ymax, zmax) in the coordinates of
its ``frame`` [3, 3], whose rows are the box's unit axes in world coordinates (x_frame = frame
@ x_world, as spirula/engine/mesh/bounds.py's Bounds); ``frame`` None or () is the identity (a world
axis-aligned box). Face ``f`` (0..5) is the bound ``bounds[f]``: 0..2 the min faces of the
frame's x, y, z, 3..5 the max faces. Pure NumPy (the window picks and drags with it, the
engine draws with it). The crop box of spirula/engine/io/splat_edit.py (centre, half extents, rotation
whose columns are the axes) converts with :func:`crop_to_box` / :func:`box_to_crop`."""

from __future__ import annotations

import numpy as np

HANDLE_FRACTION = 0.06   # a handle's half size, of the box's longest side
HIGHLIGHT_GROWTH = 1.6   # the handle under the mouse is drawn this much larger
MIN_SIZE_FRACTION = 1e-3  # a dragged face stops this close (of the longest side) to its opposite one


def frame_of(frame) -> np.ndarray:
    """[3, 3] float64: ``frame`` (9 numbers, row-major, or [3, 3]); the identity for None or ()."""
    if frame is None or len(frame) == 0:
        return np.eye(3)
    return np.asarray(frame, np.float64).reshape(3, 3)


def face_centers(bounds, frame=None) -> np.ndarray:
    """[6, 3] world centres of the faces, in face order."""
    lo, hi = np.asarray(bounds[:3], np.float64), np.asarray(bounds[3:], np.float64)
    mid = (lo + hi) / 2
    out = np.repeat(mid[None], 6, axis=0)
    for f in range(6):
        out[f, f % 3] = (lo, hi)[f // 3][f % 3]
    return out @ frame_of(frame)


def box_corners(bounds, frame=None) -> np.ndarray:
    """[8, 3] world corners, corner k taking hi on axis i when bit i of k is set (the order of
    spirula/engine/mesh/bounds.py Bounds.corners)."""
    lo, hi = np.asarray(bounds[:3], np.float64), np.asarray(bounds[3:], np.float64)
    bits = np.array([[(k >> i) & 1 for i in range(3)] for k in range(8)], np.float64)
    return (lo + bits * (hi - lo)) @ frame_of(frame)


def box_edges(bounds, frame=None) -> np.ndarray:
    """[12, 6] float32 world segments: the box's edges (corner pairs of :func:`box_corners`)."""
    c = box_corners(bounds, frame)
    edges = [(a, a | (1 << i)) for a in range(8) for i in range(3) if not (a >> i) & 1]
    return np.array([np.concatenate([c[a], c[b]]) for a, b in edges], np.float32)


def handle_segments(bounds, highlight: int = -1, frame=None) -> np.ndarray:
    """[18, 6] world segments: per face a cross in the face's plane and a stub outwards,
    so a handle reads as one whichever way the box is seen; face ``highlight``'s (the one
    under the mouse) HIGHLIGHT_GROWTH times larger."""
    lo, hi = np.asarray(bounds[:3], np.float64), np.asarray(bounds[3:], np.float64)
    s0 = HANDLE_FRACTION * max(float(np.max(hi - lo)), 1e-9)
    mid = (lo + hi) / 2
    segs = []
    for f in range(6):
        c = mid.copy()
        c[f % 3] = (lo, hi)[f // 3][f % 3]
        axis, sign = f % 3, (-1.0, 1.0)[f // 3]
        s = s0 * (HIGHLIGHT_GROWTH if f == highlight else 1.0)
        for k in range(3):
            d = np.zeros(3)
            if k == axis:
                d[k] = 2 * s * sign
                segs.append(np.concatenate([c, c + d]))
            else:
                d[k] = s
                segs.append(np.concatenate([c - d, c + d]))
    segs = np.array(segs, np.float64).reshape(-1, 3) @ frame_of(frame)
    return segs.reshape(-1, 6).astype(np.float32)


def move_face(bounds, face: int, value: float) -> tuple:
    """``bounds`` with face ``face`` at ``value`` (frame coordinates), kept on its side of the
    opposite face."""
    b = [float(x) for x in bounds]
    axis = face % 3
    gap = MIN_SIZE_FRACTION * max(b[3 + k] - b[k] for k in range(3))
    if face < 3:
        b[face] = min(value, b[axis + 3] - gap)
    else:
        b[face] = max(value, b[axis] + gap)
    return tuple(b)


def crop_to_box(crop) -> tuple[tuple, tuple]:
    """(bounds 6, frame 9 row-major) of a crop box given as 15 numbers (centre [3], half
    extents [3], rotation [3, 3] row-major, its columns the box's axes: EditState.crop_box)."""
    c, h = np.asarray(crop[:3], np.float64), np.asarray(crop[3:6], np.float64)
    frame = np.asarray(crop[6:15], np.float64).reshape(3, 3).T
    m = frame @ c
    return tuple(float(v) for v in (*(m - h), *(m + h))), tuple(float(v) for v in frame.reshape(-1))


def box_to_crop(bounds, frame=None) -> tuple:
    """The 15 numbers of a crop box (EditSplats.crop) of the box ``bounds`` in ``frame``."""
    f = frame_of(frame)
    lo, hi = np.asarray(bounds[:3], np.float64), np.asarray(bounds[3:], np.float64)
    return tuple(float(v) for v in (*(((lo + hi) / 2) @ f), *np.abs(hi - lo) / 2, *f.T.reshape(-1)))
