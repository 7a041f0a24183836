"""Which Gaussians read from a file cannot be shown or trained, and why.

Two checks, both vectorised over [N] Gaussians (no Python loop over them):

- :func:`invalid_values`: a non-finite value in a Gaussian property group (position, scale,
  rotation, opacity, colour) or an all-zero quaternion (no rotation can be made of it).
- :func:`huge_scale`: a Gaussian whose largest standard deviation exceeds
  :data:`HUGE_SCALE_RATIO` times the scene's robust extent. Such a splat (files with
  sigma ~1e17 exist) covers every view as a streak and, taken into the framing, puts the
  camera at an absurd distance. Real background splats (sky, far walls) of trained scenes
  stay well inside a hundred scene extents.

The robust extent is the 90th-percentile distance of the centres from their
component-wise median, so a few far or huge splats cannot inflate it. When the centres
coincide (one splat, or a degenerate file) it falls back to the median of the splats'
largest sigma, and to no check at all if that is zero too.
"""

from __future__ import annotations

import numpy as np

__all__ = ["HUGE_SCALE_RATIO", "invalid_values", "huge_scale", "robust_extent"]

HUGE_SCALE_RATIO = 100.0   # largest sigma allowed, in units of the scene's robust extent
_EXTENT_PERCENTILE = 90.0


def invalid_values(means: np.ndarray, scales: np.ndarray, quats: np.ndarray, opacities: np.ndarray,
                   sh0: np.ndarray, sh_rest: np.ndarray) -> dict[str, np.ndarray]:
    """{reason: [N] bool} for the reasons "non-finite position", "non-finite scale",
    "non-finite rotation", "zero rotation", "non-finite opacity", "non-finite colour".

    means [N, 3], scales [N, 3] (log sigma), quats [N, 4], opacities [N] (logits), sh0
    [N, 3], sh_rest [N, K] (any layout); float arrays. A Gaussian can be flagged by several
    reasons; "zero rotation" is only set for a finite all-zero quaternion.
    """
    finite_q = np.isfinite(quats).all(axis=1)
    return {
        "non-finite position": ~np.isfinite(means).all(axis=1),
        "non-finite scale": ~np.isfinite(scales).all(axis=1),
        "non-finite rotation": ~finite_q,
        "zero rotation": finite_q & ~(quats != 0).any(axis=1),
        "non-finite opacity": ~np.isfinite(opacities),
        "non-finite colour": ~(np.isfinite(sh0).all(axis=1) & np.isfinite(sh_rest).all(axis=1)),
    }


def robust_extent(means: np.ndarray) -> float:
    """The 90th-percentile distance (world units) of the centres [N, 3] from their
    component-wise median; 0.0 for no centres."""
    if len(means) == 0:
        return 0.0
    m = np.asarray(means, np.float64)
    d = np.linalg.norm(m - np.median(m, axis=0), axis=1)
    return float(np.percentile(d, _EXTENT_PERCENTILE))


def huge_scale(means: np.ndarray, scales: np.ndarray, ratio: float = HUGE_SCALE_RATIO) -> tuple[np.ndarray, str]:
    """([N] bool: largest sigma > ratio x extent, a one-line reason with the numbers).

    means [N, 3] finite centres; scales [N, 3] finite log sigmas. The reason reads e.g.
    "largest sigma 1e+17; limit 230 = 100 x 2.3, the 90th-percentile distance of the
    centres from their median".
    """
    with np.errstate(over="ignore"):   # a log sigma over 709 is an infinite sigma: huge
        sigma = np.exp(np.asarray(scales, np.float64).max(axis=1)) if len(scales) else np.zeros(0)
    extent, basis = robust_extent(means), "the 90th-percentile distance of the centres from their median"
    if not extent > 0.0 and len(sigma):
        extent, basis = float(np.median(sigma)), "the median sigma (the centres coincide)"
    if not (extent > 0.0 and np.isfinite(extent)):
        return np.zeros(len(sigma), bool), "no extent to compare with"
    limit = ratio * extent
    huge = sigma > limit
    big = float(sigma.max()) if len(sigma) else 0.0
    return huge, f"largest sigma {big:.3g}; limit {limit:.3g} = {ratio:g} x {extent:.3g}, {basis}"
