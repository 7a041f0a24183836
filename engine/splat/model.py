"""The Gaussians on the GPU with their optimizer state, Adam, and adaptive density control.

Buffers (float32, N rows of D = row_stride(max_sh_degree)): params, grads, exp_avg,
exp_avg_sq; grad2d_sum [N] and vis_count [N] accumulate the densification statistic.
Capacity grows by 1.5x so densification does not reallocate every time.
"""

from __future__ import annotations

import numpy as np
import slangpy as spy

from ..device import Gpu
from .layout import OFF_MEAN, OFF_OPACITY, OFF_QUAT, OFF_SCALE, OFF_SH, row_stride
from .sort import Scan

_STATE = ("params", "exp_avg", "exp_avg_sq")


class GaussianModel:
    def __init__(self, gpu: Gpu, rows: np.ndarray, max_sh_degree: int):
        self.gpu = gpu
        self.max_sh_degree = max_sh_degree
        self.stride = row_stride(max_sh_degree)
        if rows.shape[1] != self.stride:
            raise ValueError(f"rows have {rows.shape[1]} columns, expected {self.stride}")
        self.n = len(rows)
        self.capacity = 0
        self.buf: dict[str, spy.Buffer] = {}
        self._alloc(max(self.n, 1024))
        gpu.write(self.buf["params"], _padded(rows, self.capacity))
        self.clear(("exp_avg", "exp_avg_sq", "grad2d_sum", "vis_count"))
        self.step = 0
        self.scan = Scan(gpu)
        kern = lambda mod, e: gpu.kernel(mod, e, MAX_SH_DEGREE=max_sh_degree)
        self.k_adam = gpu.kernel("optim/adam", "adam_step")
        self.k_decide = kern("densify/densify", "densify_decide")
        self.k_write = kern("densify/densify", "densify_write")
        self.k_reset = kern("densify/densify", "reset_opacity")
        self._lrs = None
        self._spare = None
        self._flags = None

    # --- buffers ----------------------------------------------------------------------------
    def _alloc(self, capacity: int) -> dict[str, spy.Buffer]:
        d = self.stride
        new = {name: self.gpu.buffer(4 * d * capacity, f"splat.{name}") for name in _STATE + ("grads",)}
        new["grad2d_sum"] = self.gpu.buffer(4 * capacity, "splat.grad2d_sum")
        new["vis_count"] = self.gpu.buffer(4 * capacity, "splat.vis_count")
        new["action"] = self.gpu.buffer(4 * capacity, "splat.action")
        new["copies"] = self.gpu.buffer(4 * capacity, "splat.copies")
        new["total"] = self.gpu.buffer(16, "splat.total")
        self.buf, self.capacity = new, capacity
        return new

    def clear(self, names) -> None:
        enc = self.gpu.encoder()
        for name in names:
            self.gpu.clear(enc, self.buf[name])
        self.gpu.submit(enc)

    def rows(self) -> np.ndarray:
        """Host copy of the packed parameters [N, D] (waits for the GPU)."""
        return self.gpu.read(self.buf["params"], np.float32, shape=(self.n, self.stride))

    # --- checkpoints (engine/checkpoint.py) ------------------------------------------------
    def state_dict(self) -> dict:
        """Everything the optimisation depends on, as host arrays (waits for the GPU):
        params, exp_avg, exp_avg_sq [N, D], grad2d_sum, vis_count [N] (float32) and the
        Adam step count."""
        out = {name: self.gpu.read(self.buf[name], np.float32, shape=(self.n, self.stride)) for name in _STATE}
        for name in ("grad2d_sum", "vis_count"):
            out[name] = self.gpu.read(self.buf[name], np.float32, self.n)
        out["adam_step"] = self.step
        return out

    def load_state_dict(self, state: dict) -> None:
        """Replace the Gaussians and their optimizer state with ``state`` (from
        :meth:`state_dict`, possibly of another process)."""
        rows = np.asarray(state["params"], np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.stride:
            raise ValueError(f"checkpoint rows have shape {rows.shape}, expected [N, {self.stride}]")
        n = len(rows)
        for name in _STATE[1:]:
            if np.shape(state[name]) != rows.shape:
                raise ValueError(f"checkpoint {name} has shape {np.shape(state[name])}, expected {rows.shape}")
        for name in ("grad2d_sum", "vis_count"):
            if np.shape(state[name]) != (n,):
                raise ValueError(f"checkpoint {name} has shape {np.shape(state[name])}, expected ({n},)")
        self.gpu.wait_idle()
        if n > self.capacity:
            self._alloc(max(n, 1024))
            self._spare = None
        self.clear(("grad2d_sum", "vis_count"))
        for name in _STATE:
            self.gpu.write(self.buf[name], _padded(np.asarray(state[name], np.float32), self.capacity))
        for name in ("grad2d_sum", "vis_count"):
            self.gpu.write(self.buf[name], np.asarray(state[name], np.float32))
        self.n = n
        self.step = int(state["adam_step"])

    # --- optimizer ----------------------------------------------------------------------------
    def set_learning_rates(self, means: float, scales: float, quats: float, opacities: float,
                           sh0: float, shN: float) -> None:
        """Per-column learning rates. The means' rate changes every step (exponential decay),
        so it travels as a kernel argument; the table of the others is uploaded only when it
        changes."""
        self._lr_means = float(means)
        lrs = np.zeros(self.stride, np.float32)
        lrs[OFF_SCALE:OFF_SCALE + 3] = scales
        lrs[OFF_QUAT:OFF_QUAT + 4] = quats
        lrs[OFF_OPACITY] = opacities
        lrs[OFF_SH:OFF_SH + 3] = sh0
        lrs[OFF_SH + 3:] = shN
        if self._lrs is None or not np.array_equal(lrs, self._lrs_host):
            self._lrs = self.gpu.upload(lrs, "splat.lrs")
            self._lrs_host = lrs

    def record_adam(self, enc, flags: spy.Buffer | None = None, step: int = 0, beta1: float = 0.9,
                    beta2: float = 0.999, eps: float = 1e-15) -> None:
        """One Adam step on all parameters from ``grads`` (Kingma & Ba 2015). Non-finite
        gradients count as 0 and are recorded, with ``step`` (the training step, from 0),
        into words 1..3 of ``flags`` (see shaders/optim/adam.slang and engine/splat/guard.py);
        without ``flags`` they go to the model's own scratch block."""
        self.step += 1
        count = self.n * self.stride
        if flags is None:
            if self._flags is None:
                self._flags = self.gpu.zeros(16, "splat.nonfinite_flags")
            flags = self._flags
        self.k_adam.dispatch(
            thread_count=[count, 1, 1], command_encoder=enc, params=self.buf["params"], grads=self.buf["grads"],
            exp_avg=self.buf["exp_avg"], exp_avg_sq=self.buf["exp_avg_sq"], lrs=self._lrs, flags=flags,
            lr_means=self._lr_means, count=count, stride=self.stride, beta1=beta1, beta2=beta2, eps=eps,
            bias1=1.0 - beta1 ** self.step, bias2=1.0 - beta2 ** self.step, step=int(step) & 0xFFFFFFFF)

    # --- adaptive density control ------------------------------------------------------------
    def densify(self, grad_threshold: float, clone_scale: float, prune_opacity: float,
                prune_scale: float, max_gaussians: int, seed: int) -> tuple[int, int]:
        """Clone / split / prune (3DGS sec. 5.2); resets the statistics. Returns (before, after).
        Growth is skipped when it would exceed ``max_gaussians`` (pruning still happens)."""
        before = self.n
        for allow_grow in (1, 0):
            enc = self.gpu.encoder()
            self.k_decide.dispatch(
                thread_count=[self.n, 1, 1], command_encoder=enc, params=self.buf["params"],
                grad2d_sum=self.buf["grad2d_sum"], vis_count=self.buf["vis_count"], action=self.buf["action"],
                copies=self.buf["copies"], n=self.n, grad_threshold=grad_threshold, clone_scale=clone_scale,
                prune_opacity=prune_opacity, prune_scale=prune_scale, allow_grow=allow_grow)
            self.scan.record(enc, self.buf["copies"], self.buf["copies"], self.n, total=self.buf["total"])
            self.gpu.submit(enc)
            after = int(self.gpu.read(self.buf["total"], np.uint32, 1)[0])
            if after <= max_gaussians:
                break
        old = self.buf
        if after > self.capacity:
            self._alloc(int(after * 1.5))
            self._spare = None
        else:
            # write into the spare state buffers (same capacity); the old ones become the spare
            spare = self._spare or {name: self.gpu.buffer(4 * self.stride * self.capacity, f"splat.{name}")
                                    for name in _STATE}
            self.buf = dict(old, **spare)
            self._spare = {name: old[name] for name in _STATE}
        enc = self.gpu.encoder()
        self.k_write.dispatch(
            thread_count=[self.n, 1, 1], command_encoder=enc, params=old["params"], exp_avg=old["exp_avg"],
            exp_avg_sq=old["exp_avg_sq"], action=old["action"], offsets=old["copies"],
            out_params=self.buf["params"], out_avg=self.buf["exp_avg"], out_avg_sq=self.buf["exp_avg_sq"],
            n=self.n, seed=seed & 0xFFFFFFFF)
        self.gpu.clear(enc, self.buf["grad2d_sum"])
        self.gpu.clear(enc, self.buf["vis_count"])
        self.gpu.submit(enc)
        self.gpu.wait_idle()  # the old buffers must outlive the copy
        self.n = after
        return before, after

    def reset_opacity(self, max_opacity: float = 0.01) -> None:
        enc = self.gpu.encoder()
        self.k_reset.dispatch(thread_count=[self.n, 1, 1], command_encoder=enc, params=self.buf["params"],
                              exp_avg=self.buf["exp_avg"], exp_avg_sq=self.buf["exp_avg_sq"], n=self.n,
                              max_logit=float(np.log(max_opacity / (1 - max_opacity))))
        self.gpu.submit(enc)


def _padded(rows: np.ndarray, capacity: int) -> np.ndarray:
    out = np.zeros((capacity, rows.shape[1]), np.float32)
    out[: len(rows)] = rows
    return out.reshape(-1).view(np.uint8)
