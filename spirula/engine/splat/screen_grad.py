"""Host view of the screen-space gradient rows the rasterizer's backward accumulates and the
projection's backward reads (shaders/common/screen_grad.slang): [N, 9] float32 per Gaussian."""

from __future__ import annotations

import numpy as np

# name -> (first column, width)
SCREEN_GRAD_STRIDE = 9
SCREEN_GRAD_COLUMNS = {"g_rgb": (0, 3), "g_means2d": (3, 2), "g_conic": (5, 3), "g_opacity": (8, 1)}


def split_screen_grads(rows: np.ndarray) -> dict[str, np.ndarray]:
    """[N, 9] screen-space gradient rows -> {g_rgb [N, 3], g_means2d [N, 2], g_conic [N, 3],
    g_opacity [N]} (views)."""
    out = {k: rows[:, c:c + w] for k, (c, w) in SCREEN_GRAD_COLUMNS.items()}
    out["g_opacity"] = out["g_opacity"][:, 0]
    return out


def pack_screen_grads(g_rgb, g_means2d, g_conic, g_opacity) -> np.ndarray:
    """The inverse of :func:`split_screen_grads`: [N, 9] float32 rows."""
    parts = {"g_rgb": g_rgb, "g_means2d": g_means2d, "g_conic": g_conic, "g_opacity": np.asarray(g_opacity)[:, None]}
    rows = np.zeros((len(g_rgb), SCREEN_GRAD_STRIDE), np.float32)
    for k, (c, w) in SCREEN_GRAD_COLUMNS.items():
        rows[:, c:c + w] = parts[k]
    return rows
