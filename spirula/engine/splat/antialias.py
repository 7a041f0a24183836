"""Anti-aliased training (TrainConfig.antialias): Yu et al. 2024, "Mip-Splatting: Alias-free
3D Gaussian Splatting" (CVPR), with gsplat's ``rasterize_mode="antialiased"`` as the peer.

Two filters, both in shaders/project/:

* the 3D smoothing filter (eq. 7-9): Gaussian k is rendered with variance s^2 + f_k on each
  of its axes and opacity times sqrt(prod s^2 / prod(s^2 + f_k)), where f_k = 0.2 / nu_k^2
  and nu_k = max over the training cameras that see its centre of focal / depth (its
  maximal sampling rate; filter3d.slang says what "see" means and what the unseen get).
  :class:`SmoothingFilter` keeps f [N] float32 on the GPU. It is a constant of the
  optimisation (no gradient), recomputed when the trainer asks: at the start, after every
  refine (ADC's densify and MCMC's relocation reorder and append Gaussians) and every
  ``densify_interval`` steps besides, as the paper does after its densification ends.
* the 2D Mip filter (eq. 12): the 0.3 px^2 screen-space dilation the projection always adds,
  with the opacity times sqrt(det(cov2d) / det(cov2d + 0.3 I)) (proj_math.slang, ANTIALIAS).

:func:`bake_smoothing_filter` folds the 3D filter into exported rows, so a standard 3DGS
PLY renders what was trained when its renderer applies the 2D Mip filter (gsplat's
"antialiased" mode, or ours with a zero 3D filter).
"""

from __future__ import annotations

import numpy as np
import slangpy as spy

from ..device import Gpu
from .param_layout import OFF_OPACITY, OFF_SCALE

FILTER_S2 = 0.2   # s^2 of Mip-Splatting eq. 9 (filter3d.slang FILTER_S2)
NEAR = 0.01       # a camera sees a centre beyond this depth (proj_math.slang NEAR) ...
MARGIN = 0.15     # ... projecting inside the image widened by this fraction on each side


class SmoothingFilter:
    """The 3D filter variances f [capacity] float32 (world units^2; the first ``model.n``
    valid after :meth:`update`) of one GaussianModel, over the training cameras
    ``train_idx`` (rows of the camera table ``cams``, spirula/engine/splat/camera_table.py)."""

    def __init__(self, gpu: Gpu, model, cams: spy.Buffer, train_idx: list[int]):
        if not len(train_idx):
            raise ValueError("the 3D smoothing filter needs at least one training camera")
        self.gpu, self.model, self.cams = gpu, model, cams
        self.num_cams = len(train_idx)
        self.cam_ids = gpu.upload(np.asarray(train_idx, np.uint32), "filter3d.cam_ids")
        self.max_seen = gpu.buffer(16, "filter3d.max_seen")
        self.k_compute = gpu.kernel("project/filter3d", "filter3d_compute", MAX_SH_DEGREE=model.max_sh_degree)
        self.k_fill = gpu.kernel("project/filter3d", "filter3d_fill_unseen")
        self.buf: spy.Buffer | None = None
        self.rows = 0

    def _fit(self) -> None:
        """A buffer of the model's capacity (its contents are recomputed right after)."""
        if self.model.capacity > self.rows:
            self.buf = None
            self.rows = self.model.capacity
            self.buf = self.gpu.buffer(4 * self.rows, "splat.filter3d")

    def record(self, enc) -> None:
        """Record the recomputation from the current means into ``enc`` (no host wait)."""
        self._fit()
        n = self.model.n
        if n == 0:
            return
        self.gpu.clear(enc, self.max_seen)
        self.k_compute.record(enc, [n, 1, 1], params=self.model.buf["params"], cams=self.cams,
                              cam_ids=self.cam_ids, filter3d=self.buf, max_seen=self.max_seen, n=n,
                              num_cams=self.num_cams)
        self.k_fill.record(enc, [n, 1, 1], filter3d=self.buf, max_seen=self.max_seen, n=n)

    def update(self) -> None:
        """Recompute in a submission of its own (queued after the work submitted so far)."""
        enc = self.gpu.encoder()
        self.record(enc)
        self.gpu.submit(enc)

    def read(self) -> np.ndarray:
        """Host copy of f [N] float32 (waits for the GPU)."""
        self._fit()
        return self.gpu.read(self.buf, np.float32, self.model.n)

    def load(self, values: np.ndarray) -> None:
        """Set f [N] (a checkpoint's; its N must be the model's)."""
        values = np.asarray(values, np.float32).reshape(-1)
        if len(values) != self.model.n:
            raise ValueError(f"3D filter of {len(values)} Gaussians for a model of {self.model.n}")
        self._fit()
        padded = np.zeros(self.rows, np.float32)
        padded[:len(values)] = values
        self.gpu.write(self.buf, padded)


def bake_smoothing_filter(rows: np.ndarray, filter3d: np.ndarray) -> np.ndarray:
    """Packed rows [N, D] (spirula/engine/splat/param_layout.py) with the 3D filter f [N] (world units^2)
    folded in, as float32: log scales log sqrt(s^2 + f) and opacity logits of
    sigmoid(logit) * prod_k s_k / sqrt(s_k^2 + f) (Mip-Splatting eq. 9), computed in
    float64 in log space so that f = 0 leaves a row unchanged and no logit overflows."""
    r = np.asarray(rows, np.float64).copy()
    f = np.maximum(np.asarray(filter3d, np.float64).reshape(-1, 1), 0.0)
    logs = r[:, OFF_SCALE:OFF_SCALE + 3].copy()
    with np.errstate(divide="ignore"):  # f = 0: log f = -inf, and the scale stays
        baked = 0.5 * np.logaddexp(2.0 * logs, np.log(f))   # log sqrt(s^2 + f)
    r[:, OFF_SCALE:OFF_SCALE + 3] = baked
    log_rho = (logs - baked).sum(axis=1)                     # log prod s / sqrt(s^2 + f), <= 0
    x = r[:, OFF_OPACITY]
    log_o, log_1mo = -np.logaddexp(0.0, -x), -np.logaddexp(0.0, x)   # log sigmoid(x), log sigmoid(-x)
    # logit(o rho) = log(o rho) - log(1 - o rho), 1 - o rho = (1 - o) + o (1 - rho)
    log_rest = np.logaddexp(log_1mo, log_o + np.log(-np.expm1(np.minimum(log_rho, -1e-300))))
    r[:, OFF_OPACITY] = np.where(log_rho < 0.0, log_o + log_rho - log_rest, x)
    return r.astype(np.float32)
