"""The mesh bounds box (xmin, ymin, zmin, xmax, ymax, zmax) as drawn in the viewport and
dragged there: its edges, its six face handles and the move of one face.

Face ``f`` (0..5) is the bound ``bounds[f]``: 0..2 the min faces of x, y, z, 3..5 the max
faces. Pure NumPy (the window picks and drags with it, the engine draws with it)."""

from __future__ import annotations

import numpy as np

HANDLE_FRACTION = 0.06   # a handle's half size, of the box's longest side
HIGHLIGHT_GROWTH = 1.6   # the handle under the mouse is drawn this much larger
MIN_SIZE_FRACTION = 1e-3  # a dragged face stops this close (of the longest side) to its opposite one


def face_centers(bounds) -> np.ndarray:
    """[6, 3] centres of the faces, in face order."""
    lo, hi = np.asarray(bounds[:3], np.float64), np.asarray(bounds[3:], np.float64)
    mid = (lo + hi) / 2
    out = np.repeat(mid[None], 6, axis=0)
    for f in range(6):
        out[f, f % 3] = (lo, hi)[f // 3][f % 3]
    return out


def handle_segments(bounds, highlight: int = -1) -> np.ndarray:
    """[18, 6] world segments: per face a cross in the face's plane and a stub outwards,
    so a handle reads as one whichever way the box is seen; face ``highlight``'s (the one
    under the mouse) HIGHLIGHT_GROWTH times larger."""
    lo, hi = np.asarray(bounds[:3], np.float64), np.asarray(bounds[3:], np.float64)
    s0 = HANDLE_FRACTION * max(float(np.max(hi - lo)), 1e-9)
    segs = []
    for f, c in enumerate(face_centers(bounds)):
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
    return np.array(segs, np.float32)


def move_face(bounds, face: int, value: float) -> tuple:
    """``bounds`` with face ``face`` at ``value``, kept on its side of the opposite face."""
    b = [float(x) for x in bounds]
    axis = face % 3
    gap = MIN_SIZE_FRACTION * max(b[3 + k] - b[k] for k in range(3))
    if face < 3:
        b[face] = min(value, b[axis + 3] - gap)
    else:
        b[face] = max(value, b[axis] + gap)
    return tuple(b)
