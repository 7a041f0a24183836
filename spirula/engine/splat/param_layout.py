"""Packed Gaussian parameter layout, shared with shaders/common/gaussian.slang.

One float32 row of ``row_stride(max_sh_degree)`` values per Gaussian:
``[means(3) | log scales(3) | quats wxyz(4) | opacity logit(1) | sh0 RGB(3) | shN(3*(K-1))]``
with shN coefficient-major and RGB last (shN[n, k, c] at column 14 + 3*k + c).
"""

from __future__ import annotations

import numpy as np

OFF_MEAN, OFF_SCALE, OFF_QUAT, OFF_OPACITY, OFF_SH = 0, 3, 6, 10, 11
from ..io.ply_points import SH_C0  # noqa: F401 (Y_0^0: sh0 = (rgb - 0.5) / SH_C0; declared with the PLY format)


def sh_coeffs(degree: int) -> int:
    return (degree + 1) ** 2


def row_stride(max_sh_degree: int) -> int:
    return OFF_SH + 3 * sh_coeffs(max_sh_degree)


def pack(means, scales, quats, opacities, sh0, shN, max_sh_degree: int) -> np.ndarray:
    """Rows [N, D] float32 from means [N,3], log scales [N,3], quats [N,4] (wxyz),
    opacity logits [N], sh0 [N,3], shN [N,M,3] (M <= K-1, missing coefficients are zero)."""
    n = len(means)
    rows = np.zeros((n, row_stride(max_sh_degree)), np.float32)
    rows[:, OFF_MEAN:OFF_MEAN + 3] = means
    rows[:, OFF_SCALE:OFF_SCALE + 3] = scales
    rows[:, OFF_QUAT:OFF_QUAT + 4] = quats
    rows[:, OFF_OPACITY] = opacities
    rows[:, OFF_SH:OFF_SH + 3] = sh0
    if shN is not None and shN.shape[1] > 0:
        m = min(shN.shape[1], sh_coeffs(max_sh_degree) - 1)
        rows[:, OFF_SH + 3:OFF_SH + 3 + 3 * m] = shN[:, :m].reshape(n, -1)
    return rows


def unpack(rows: np.ndarray, sh_degree: int) -> dict[str, np.ndarray]:
    """Inverse of :func:`pack`, keeping SH coefficients up to ``sh_degree``."""
    n = len(rows)
    m = sh_coeffs(sh_degree) - 1
    return {
        "means": rows[:, OFF_MEAN:OFF_MEAN + 3].copy(),
        "scales": rows[:, OFF_SCALE:OFF_SCALE + 3].copy(),
        "quats": rows[:, OFF_QUAT:OFF_QUAT + 4].copy(),
        "opacities": rows[:, OFF_OPACITY].copy(),
        "sh0": rows[:, OFF_SH:OFF_SH + 3].copy(),
        "shN": rows[:, OFF_SH + 3:OFF_SH + 3 + 3 * m].reshape(n, m, 3).copy(),
    }
