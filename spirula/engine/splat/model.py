"""The Gaussians on the GPU with their optimizer state, Adam, and adaptive density control.

Buffers, ``capacity`` rows, the first N in use, D = row_stride(max_sh_degree):
params [capacity, D] float32; exp_avg, exp_avg_sq [capacity, MW] uint32 words holding the
Adam moments, float32 (MW = D) or two bfloat16 per word (``moments_bf16``, MW = ceil(D / 2),
column 2w in the low half of word w). No gradient buffer: the training step's projection
backward applies Adam itself (shaders/project/project_backward.slang: project_backward_adam), so
the state is params + 2 moments (3 x 4 N D bytes, or 2 x 4 N D with bfloat16 moments,
instead of 4 x 4 N D with a gradient buffer). grad2d_sum [capacity] and vis_count
[capacity] accumulate the densification statistic; action, copies [capacity] (uint32) and
total [4] (uint32) are densify's scratch. Capacity grows by 1.5x so densification does not
reallocate every time (never past the Gaussian cap of the densify call).

Densification needs no spare copy of the state: within capacity each state buffer is
scattered in place, 16 columns at a time through one temporary [N, 16] buffer that lives
only during densify; beyond capacity the state buffers are reallocated one at a time
(peak: the new state plus one old buffer).
"""

from __future__ import annotations

import numpy as np
import slangpy as spy

from ..device import Gpu
from .param_layout import OFF_MEAN, OFF_OPACITY, OFF_QUAT, OFF_SCALE, OFF_SH, SH_C0, row_stride
from .sort import Scan

_STATE = ("params", "exp_avg", "exp_avg_sq")
_MOMENTS = ("exp_avg", "exp_avg_sq")
_SLICE = 16  # columns per in-place densify pass (>= OFF_OPACITY: a split samples from the first slice)
_PROBES = 255  # thresholds per densify_grow_histogram pass (PROBES in shaders/densify/densify.slang)


class GaussianModel:
    def __init__(self, gpu: Gpu, rows: np.ndarray, max_sh_degree: int, moments_bf16: bool = False):
        self.gpu = gpu
        self.max_sh_degree = max_sh_degree
        self.stride = row_stride(max_sh_degree)
        self.moments_bf16 = bool(moments_bf16)
        self.moment_words = (self.stride + 1) // 2 if self.moments_bf16 else self.stride  # MW
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
        kern = lambda mod, e: gpu.kernel(mod, e, MAX_SH_DEGREE=max_sh_degree, MOMENTS_BF16=int(self.moments_bf16))
        self.k_adam = gpu.kernel("optim/adam", "adam_step")
        self.k_decide = kern("densify/densify", "densify_decide")
        self.k_write_params = kern("densify/densify", "densify_write_params")
        self.k_write_moments = kern("densify/densify", "densify_write_moments")
        self.k_gather = kern("densify/densify", "densify_gather_columns")
        self.k_reset = kern("densify/densify", "reset_opacity")
        self.k_histogram = kern("densify/densify", "densify_grow_histogram")
        # densify_grow_histogram's probes [255] float32 and bins [256] uint32 (2 KiB, allocated
        # up front so densify itself allocates nothing while it fits the capacity)
        self._probes = gpu.buffer(4 * _PROBES, "splat.densify_probes")
        self._bins = gpu.buffer(4 * (_PROBES + 1), "splat.densify_bins")
        self._lrs = None
        self._flags = None
        self.last_grow_threshold = float("nan")  # grad threshold the last densify grew with (inf: none grew)
        self.last_decide_passes = 0              # passes over the Gaussians the last decision took (decide + scan, histogram)

    # --- buffers ----------------------------------------------------------------------------
    def _alloc(self, capacity: int) -> None:
        """Fresh (uninitialised) buffers of ``capacity`` rows for everything. The caller drops
        the old ones first (``self.buf = {}`` after the GPU is idle) so they are not all
        held twice."""
        for name in _STATE:
            self.buf[name] = self.gpu.buffer(self._row_bytes(name) * capacity, f"splat.{name}")
        self._alloc_small(capacity)
        self.buf["total"] = self.gpu.buffer(16, "splat.total")
        self.capacity = capacity

    def _row_bytes(self, name: str) -> int:
        return 4 * (self.moment_words if name in _MOMENTS else self.stride)

    def _alloc_small(self, capacity: int) -> None:
        for name in ("grad2d_sum", "vis_count", "action", "copies"):
            self.buf.pop(name, None)  # drop the old one before allocating its successor
            self.buf[name] = self.gpu.buffer(4 * capacity, f"splat.{name}")

    def state_bytes(self) -> int:
        """Bytes of the model's per-Gaussian buffers (params, moments, statistics, densify
        scratch): 4 * capacity * (D + 2 MW + 4), each buffer rounded up to 16 bytes."""
        return sum(int(b.size) for name, b in self.buf.items() if name != "total")

    def clear(self, names) -> None:
        enc = self.gpu.encoder()
        for name in names:
            self.gpu.clear(enc, self.buf[name])
        self.gpu.submit(enc)

    def rows(self) -> np.ndarray:
        """Host copy of the packed parameters [N, D] (waits for the GPU)."""
        return self.gpu.read(self.buf["params"], np.float32, shape=(self.n, self.stride))

    # --- checkpoints (spirula/engine/checkpoint.py) ------------------------------------------------
    def transform_colours(self, matrix: np.ndarray) -> None:
        """Apply the affine colour map x -> A x + b (``matrix`` [3, 4] = [A | b]) to every
        Gaussian's view-dependent colour: colour = 0.5 + SH_C0 sh0 + sum_k Y_k shN_k is
        linear in the coefficients, so sh0 <- A sh0 + (A 0.5 + b - 0.5) / SH_C0 and
        shN_k <- A shN_k (before the renderer's clamp at 0). Waits for the GPU."""
        m = np.asarray(matrix, np.float64)
        a, b = m[:, :3], m[:, 3]
        rows = self.gpu.read(self.buf["params"], np.float32, shape=(self.n, self.stride)).astype(np.float64)
        sh = rows[:, OFF_SH:].reshape(self.n, -1, 3)
        shift = (a @ np.full(3, 0.5) + b - 0.5) / SH_C0
        sh[:] = sh @ a.T
        sh[:, 0] += shift
        rows[:, OFF_SH:] = sh.reshape(self.n, -1)
        self.gpu.wait_idle()
        self.gpu.write(self.buf["params"], rows.astype(np.float32))

    def state_dict(self) -> dict:
        """Everything the optimisation depends on, as host arrays (waits for the GPU):
        params, exp_avg, exp_avg_sq [N, D], grad2d_sum, vis_count [N] (float32, bfloat16
        moments widened) and the Adam step count."""
        out = {"params": self.gpu.read(self.buf["params"], np.float32, shape=(self.n, self.stride))}
        for name in _MOMENTS:
            words = self.gpu.read(self.buf[name], np.uint32, shape=(self.n, self.moment_words))
            out[name] = _widen_moments(words, self.stride) if self.moments_bf16 else words.view(np.float32)
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
            self.gpu.forget_bindings()
            self.buf = {}  # everything is replaced: never hold old and new together
            self._alloc(max(n, 1024))
        self.clear(("grad2d_sum", "vis_count"))
        self.gpu.write(self.buf["params"], _padded(rows, self.capacity))
        for name in _MOMENTS:
            moments = np.asarray(state[name], np.float32)
            words = _narrow_moments(moments) if self.moments_bf16 else moments.view(np.uint32)
            self.gpu.write(self.buf[name], _padded(words.view(np.float32), self.capacity))
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

    def adam_args(self, flags: spy.Buffer | None = None, step: int = 0, seed: int = 0, beta1: float = 0.9,
                  beta2: float = 0.999, eps: float = 1e-15, reg_opacity: float = 0.0, reg_scale: float = 0.0,
                  reg_flat: float = 0.0) -> dict:
        """Advance the Adam step count and return the optimizer's arguments of the fused
        projection backward (Rasterizer.record_backward(optimizer=...)): one Adam step
        (Kingma & Ba 2015) on every parameter with the gradients it computes. Non-finite
        gradients count as 0 and are recorded, with ``step`` (the training step, from 0),
        into words 1..3 of ``flags`` (shaders/optim/adam_math.slang, spirula/engine/splat/guard.py);
        without ``flags`` they go to the model's own scratch block. ``seed`` varies the
        stochastic rounding of bfloat16 moments. ``reg_opacity`` and ``reg_scale`` add
        the gradients of the L1 regularisers reg_opacity * mean_i sigmoid(logit_i) and
        reg_scale * mean_i,k exp(log_scale_ik) over all N Gaussians (MCMC; 0: none); ``reg_flat``
        the gradient of the flattening regulariser reg_flat * mean_i min_k exp(log_scale_ik)
        (the geometry phase, spirula/engine/splat/geometry_phase.py; 0: none)."""
        self.step += 1
        return dict(moments_bf16=self.moments_bf16,  # the kernel's specialisation, not a kernel argument
                    params_out=self.buf["params"], exp_avg=self.buf["exp_avg"], exp_avg_sq=self.buf["exp_avg_sq"],
                    lrs=self._lrs, flags=self._flag_block(flags), lr_means=self._lr_means, beta1=beta1,
                    beta2=beta2, eps=eps, bias1=1.0 - beta1 ** self.step, bias2=1.0 - beta2 ** self.step,
                    step=int(step) & 0xFFFFFFFF, seed=int(seed) & 0xFFFFFFFF,
                    reg_opacity=float(reg_opacity) / max(self.n, 1), reg_scale=float(reg_scale) / max(3 * self.n, 1),
                    reg_flat=float(reg_flat) / max(self.n, 1))

    def _flag_block(self, flags: spy.Buffer | None) -> spy.Buffer:
        if self._flags is None:
            self._flags = self.gpu.zeros(16, "splat.nonfinite_flags")  # also a never-overflowing count
        return self._flags if flags is None else flags

    def record_adam(self, enc, grads: spy.Buffer, flags: spy.Buffer | None = None, step: int = 0,
                    beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-15) -> None:
        """One Adam step on all parameters from a gradient buffer [N, D] float32 computed
        elsewhere (shaders/optim/adam.slang; the training step uses the fused projection
        backward instead, see :meth:`adam_args`). float32 moments only. Non-finite
        gradients are guarded and flagged as in :meth:`adam_args`."""
        if self.moments_bf16:
            raise ValueError("record_adam() needs float32 moments; bfloat16 moments step in the fused backward")
        self.step += 1
        count = self.n * self.stride
        flags = self._flag_block(flags)
        self.k_adam.record(
            enc, [count, 1, 1], params=self.buf["params"], grads=grads,
            exp_avg=self.buf["exp_avg"], exp_avg_sq=self.buf["exp_avg_sq"], lrs=self._lrs, flags=flags,
            isect_total=self._flag_block(None), isect_capacity=0xFFFFFFFF, lr_means=self._lr_means, count=count,
            stride=self.stride, beta1=beta1, beta2=beta2, eps=eps,
            bias1=1.0 - beta1 ** self.step, bias2=1.0 - beta2 ** self.step, step=int(step) & 0xFFFFFFFF)

    # --- adaptive density control ------------------------------------------------------------
    def densify(self, grad_threshold: float, clone_scale: float, prune_opacity: float,
                prune_scale: float, max_gaussians: int, seed: int) -> tuple[int, int]:
        """Clone / split / prune (3DGS sec. 5.2); resets the statistics. Returns (before, after).

        A Gaussian grows (clone or split) when its mean screen-space gradient
        g = grad2d_sum / vis_count exceeds ``grad_threshold``. When growing all of them would
        leave more than ``max_gaussians``, only those with the largest g grow: the threshold
        is raised to the smallest float32 t >= grad_threshold whose count after densify
        (after pruning) is <= max_gaussians (a search over float32 values: ~4 histogram
        passes and one more decide + scan; ties at t grow together or not at all). If
        pruning alone leaves more than ``max_gaussians`` (a model that started above the
        cap), nothing grows and ``after`` stays above the cap. ``last_grow_threshold`` and
        ``last_decide_passes`` record what happened.
        """
        before = self.n
        thr = float(np.float32(grad_threshold))
        self.last_decide_passes = 0
        after = self._decide(thr, 1, clone_scale, prune_opacity, prune_scale)
        self.last_grow_threshold = thr
        if after > max_gaussians:
            after, self.last_grow_threshold = self._decide_capped(
                thr, after, int(max_gaussians), clone_scale, prune_opacity, prune_scale)
        self._write(after, seed, int(max_gaussians))
        self.n = after
        return before, after

    def _decide(self, threshold: float, allow_grow: int, clone_scale: float, prune_opacity: float,
                prune_scale: float) -> int:
        """One decide + scan pass: action[N], copies[N] -> offsets; returns the count after (waits)."""
        enc = self.gpu.encoder()
        self.k_decide.dispatch(
            thread_count=[self.n, 1, 1], command_encoder=enc, params=self.buf["params"],
            grad2d_sum=self.buf["grad2d_sum"], vis_count=self.buf["vis_count"], action=self.buf["action"],
            copies=self.buf["copies"], n=self.n, grad_threshold=threshold, clone_scale=clone_scale,
            prune_opacity=prune_opacity, prune_scale=prune_scale, allow_grow=allow_grow)
        self.scan.record(enc, self.buf["copies"], self.buf["copies"], self.n, total=self.buf["total"])
        self.gpu.submit(enc)
        self.last_decide_passes += 1
        return int(self.gpu.read(self.buf["total"], np.uint32, 1)[0])

    def _decide_capped(self, thr: float, full: int, cap: int, *rule) -> tuple[int, float]:
        """Growth at ``thr`` leaves ``full`` > ``cap`` rows: find the smallest float32
        threshold t > thr with count(t) <= cap. count is non-increasing in t (a Gaussian that
        stops growing loses 0, 1 or 2 rows), so a k-ary search over the float32 order does it:
        each pass measures count at 255 thresholds spread over the open interval
        (densify_grow_histogram) and keeps the pair that brackets the cap, dividing the
        interval by 256 (~4 passes from 2**31 floats). Then one decide + scan at t leaves
        action/offsets in the buffers. Returns (count after, t); t = inf when nothing can grow."""
        inf = _sortable(float("inf"))
        lo, hi = _sortable(thr), inf  # count(lo) = full > cap >= count(hi)
        hi_count = base = None
        while hi - lo > 1 and hi_count != cap:
            span = hi - lo
            keys = (np.arange(lo + 1, hi, dtype=np.int64) if span - 1 <= _PROBES else
                    lo + (np.arange(1, _PROBES + 1, dtype=np.int64) * span) // (_PROBES + 1))
            probes = np.full(_PROBES, np.inf, np.float32)
            probes[:len(keys)] = _unsortable_array(keys)
            self.gpu.write(self._probes, probes)
            enc = self.gpu.encoder()
            self.gpu.clear(enc, self._bins)
            self.k_histogram.dispatch(
                thread_count=[self.n, 1, 1], command_encoder=enc, params=self.buf["params"],
                grad2d_sum=self.buf["grad2d_sum"], vis_count=self.buf["vis_count"], probes=self._probes,
                bins=self._bins, n=self.n, grad_threshold=thr, clone_scale=rule[0], prune_opacity=rule[1],
                prune_scale=rule[2])
            self.gpu.submit(enc)
            bins = self.gpu.read(self._bins, np.uint32, _PROBES + 1).astype(np.int64)
            self.last_decide_passes += 1
            if base is None:
                base = full - int(bins.sum())
                hi_count = base
                if base >= cap:
                    break
            counts = base + np.cumsum(bins[::-1])[::-1][1:len(keys) + 1]  # count at keys[k]
            over = np.flatnonzero(counts > cap)
            k = int(over[-1]) + 1 if len(over) else 0  # first probe whose count fits
            if k > 0:
                lo = int(keys[k - 1])
            if k < len(keys):
                hi, hi_count = int(keys[k]), int(counts[k])
        t = _unsortable(hi)
        after = self._decide(t, int(hi != inf), *rule)  # = hi_count: both kernels share decide_one
        if after > cap and hi != inf:  # only if the two kernels disagreed: still never pass the cap
            t, after = float("inf"), self._decide(thr, 0, *rule)
        return after, t

    def _write(self, after: int, seed: int, max_gaussians: int) -> None:
        """Scatter params / exp_avg / exp_avg_sq by action and offsets into ``after`` rows,
        one buffer at a time; reset the statistics. Within capacity each buffer is scattered
        in place, ``_SLICE`` columns at a time through one temporary [N, _SLICE] buffer
        (freed before returning: a quarter of the parameters at SH degree 3); beyond it
        each state buffer is replaced by a larger one (1.5 x after, but no more rows than
        ``max_gaussians`` allows), the old one freed before the next is allocated."""
        n = self.n
        seed = seed & 0xFFFFFFFF
        b = self.buf

        def scatter(enc, name, src, dst, c0=0, width=None):
            stride = self._row_bytes(name) // 4
            common = dict(thread_count=[n, 1, 1], command_encoder=enc, action=b["action"], offsets=b["copies"], n=n,
                          c0=c0, width=width or stride, stride=stride)
            if name == "params":
                self.k_write_params.dispatch(params=src, out_params=dst, seed=seed, **common)
            else:
                self.k_write_moments.dispatch(moments=src, out_moments=dst, **common)

        if after <= self.capacity:
            enc = self.gpu.encoder()
            if n:
                temp = self.gpu.buffer(4 * _SLICE * n, "splat.densify_temp")
                for name in _STATE:
                    stride = self._row_bytes(name) // 4
                    for c0 in range(0, stride, _SLICE):
                        width = min(_SLICE, stride - c0)
                        self.k_gather.dispatch(thread_count=[n, 1, 1], command_encoder=enc, src=b[name],
                                               dst=temp, n=n, stride=stride, c0=c0, width=width)
                        scatter(enc, name, temp, b[name], c0, width)
            self.gpu.clear(enc, b["grad2d_sum"])
            self.gpu.clear(enc, b["vis_count"])
            self.gpu.submit(enc)
            self.gpu.wait_idle()  # callers (the trainer's scratch trim) rely on an idle GPU
            return
        self._grow_state(max(after, min(int(after * 1.5), max_gaussians)), scatter)

    def reserve(self, rows: int, max_rows: int) -> None:
        """Make room for ``rows`` Gaussians keeping the first N rows of params and moments
        (MCMC growth appends after them). Beyond the capacity each state buffer is replaced
        by one of 1.5 x ``rows`` (at most ``max_rows``, at least ``rows``), one at a time;
        the densification statistics are cleared."""
        if rows <= self.capacity:
            return
        n = self.n

        def keep(enc, name, old, new):
            if n:
                self.gpu.copy(enc, new, 0, old, 0, self._row_bytes(name) * n)
        self._grow_state(max(int(rows), min(int(rows * 1.5), int(max_rows))), keep)

    def _grow_state(self, capacity: int, fill) -> None:
        """Replace each state buffer by one of ``capacity`` rows, one at a time (the old one
        freed before the next is allocated), ``fill(enc, name, old, new)`` recording what the
        new one receives; the statistics and densify scratch are reallocated and cleared."""
        self.gpu.wait_idle()
        self.gpu.forget_bindings()  # kernels' cached arguments must not keep old buffers alive
        b = self.buf
        for name in ("grad2d_sum", "vis_count"):  # reset anyway: free before growing
            del b[name]
        for name in _STATE:
            new = self.gpu.buffer(self._row_bytes(name) * capacity, f"splat.{name}")
            enc = self.gpu.encoder()
            fill(enc, name, b[name], new)
            self.gpu.submit(enc)
            self.gpu.wait_idle()  # the old buffer must outlive the fill
            b[name] = new
            del new
        self._alloc_small(capacity)
        self.capacity = capacity
        self.clear(("grad2d_sum", "vis_count"))

    def reset_opacity(self, max_opacity: float = 0.01) -> None:
        enc = self.gpu.encoder()
        self.k_reset.dispatch(thread_count=[self.n, 1, 1], command_encoder=enc, params=self.buf["params"],
                              exp_avg=self.buf["exp_avg"], exp_avg_sq=self.buf["exp_avg_sq"], n=self.n,
                              max_logit=float(np.log(max_opacity / (1 - max_opacity))))
        self.gpu.submit(enc)


def _sortable(x: float) -> int:
    """float32 -> uint32 key with the same order (negative floats reversed, sign bit flipped)."""
    u = int(np.float32(x).view(np.uint32))
    return (~u & 0xFFFFFFFF) if u & 0x80000000 else u | 0x80000000


def _unsortable(k: int) -> float:
    """Inverse of :func:`_sortable`."""
    return float(_unsortable_array(np.array([k], np.int64))[0])


def _unsortable_array(keys: np.ndarray) -> np.ndarray:
    """Vectorised :func:`_unsortable`: int64 keys -> float32."""
    k = keys.astype(np.uint32)
    return np.where(k & 0x80000000, k & 0x7FFFFFFF, ~k).astype(np.uint32).view(np.float32)


def _widen_moments(words: np.ndarray, d: int) -> np.ndarray:
    """[N, MW] uint32 words of two bfloat16 each -> [N, D] float32 (column 2w: low half)."""
    halves = np.empty((len(words), 2 * words.shape[1]), np.uint32)
    halves[:, 0::2] = words & 0xFFFF
    halves[:, 1::2] = words >> 16
    return (halves[:, :d] << 16).view(np.float32)


def _narrow_moments(moments: np.ndarray) -> np.ndarray:
    """[N, D] float32 -> [N, ceil(D / 2)] uint32 words of two bfloat16 (round to nearest
    even; the inverse of :func:`_widen_moments` for values it produced)."""
    n, d = moments.shape
    u = np.zeros((n, d + (d & 1)), np.uint32)
    u[:, :d] = np.ascontiguousarray(moments, np.float32).view(np.uint32)
    half = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    return (half[:, 0::2] | (half[:, 1::2] << 16)).astype(np.uint32)


def _padded(rows: np.ndarray, capacity: int) -> np.ndarray:
    out = np.zeros((capacity, rows.shape[1]), np.float32)
    out[: len(rows)] = rows
    return out.reshape(-1).view(np.uint8)
