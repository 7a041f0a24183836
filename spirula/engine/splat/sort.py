"""GPU exclusive prefix sum and stable LSD radix sort (kernels in ``shaders/sort/``).

Both classes only *record* dispatches into a caller's command encoder: no host
synchronisation, no waits, no reads back. Scratch buffers are owned by the object, allocated
lazily by capacity and grown (at least x1.5) when a larger ``n`` arrives; an outgrown buffer
is kept alive (recorded work may still use it) until ``trim()``/``release()``, which the
owner calls at a point where it has waited for the GPU. Scratch buffers are reused
across calls, so one object must not be recorded concurrently into two encoders that run at
the same time (sequential records into one encoder, or into encoders submitted one after
the other on the device's queue, are fine).

Buffers are plain slangpy buffers of little-endian uint32 (``Gpu.buffer`` / ``Gpu.upload``).
"""

from __future__ import annotations

import time

import numpy as np
import slangpy as spy

from ..device import MAX_DISPATCH_GROUPS, Gpu
from .buffers import BufferSet

WG = 256                     # threads per workgroup of every sort/ kernel (SORT_WG)


def _unroll_default(gpu: Gpu) -> bool:
    """Unroll striped loops on real GPUs; on software Vulkan (lavapipe) keep them loops,
    which compiles about 3x faster there (LLVM) at no measurable run-time cost."""
    return not gpu.software


def _groups(count: int, tile: int) -> int:
    g = -(-count // tile)
    if g > MAX_DISPATCH_GROUPS:
        raise ValueError(f"{count} elements need {g} workgroups of {tile}; the limit is {MAX_DISPATCH_GROUPS}")
    return g


class DispatchTimer:
    """Optional per-dispatch GPU timestamps for Scan/RadixSort (benchmarks only).

    Assign to ``sorter.timer`` (or ``scan.timer``); each recorded dispatch then
    writes a timestamp pair into ``pool``. After the submit completes, ``results()`` gives
    ``[(label, seconds), ...]`` in record order. ``reset()`` before re-recording.
    """

    def __init__(self, device: spy.Device, capacity: int = 256):
        self.pool = device.create_query_pool(type=spy.QueryType.timestamp, count=2 * capacity)
        self.capacity = capacity
        self.labels: list[str] = []

    def reset(self) -> None:
        self.labels = []

    def args(self, label: str) -> dict:
        i = len(self.labels)
        if i >= self.capacity:
            return {}
        self.labels.append(label)
        return dict(query_pool=self.pool, query_index_before=2 * i, query_index_after=2 * i + 1)

    def results(self) -> list[tuple[str, float]]:
        if not self.labels:
            return []
        ts = self.pool.get_timestamp_results(0, 2 * len(self.labels))
        return [(lab, ts[2 * i + 1] - ts[2 * i]) for i, lab in enumerate(self.labels)]


def _record(kernel, enc, thread_count, timer: "DispatchTimer | None", label: str, site: str, **args) -> None:
    """One sort/scan dispatch: timed by ``timer`` when one is set (benchmarks), else through
    the kernel's cached root object of call site ``site/label`` (spirula.engine.device.Kernel.record)."""
    if timer is not None:
        kernel.dispatch(thread_count=thread_count, command_encoder=enc, **timer.args(label), **args)
    else:
        kernel.record(enc, thread_count, f"{site}/{label}", **args)


def read_total(gpu: Gpu, total: spy.Buffer) -> int:
    """The 64-bit sum a :meth:`Scan.record` with ``total`` wrote (waits for the GPU)."""
    w = gpu.read(total, np.uint32, 3)
    return int(w[1]) | int(w[2]) << 32


class Scan:
    """Exclusive prefix sum of uint32 on the GPU (reduce-then-scan, any number of levels).

    ``items_per_thread`` (compile-time ``SCAN_ITEMS``) sets the tile of one workgroup,
    ``256 * items_per_thread`` elements (4096 by default). Dispatches per ``record``: 1 for
    ``n <= 4096``, 2 for ``n <= 4096**2`` (16.7 M: the tile sums are reduced by each group
    instead of scanned by a third dispatch), 4 beyond. The largest ``n`` is ``65535 * tile``
    (268 M with the default tile).
    """

    def __init__(self, gpu: Gpu, items_per_thread: int = 16, use_waves: bool = True,
                 unroll: bool | None = None):
        self.gpu = gpu
        self.items = int(items_per_thread)
        self.tile = WG * self.items
        unroll = _unroll_default(gpu) if unroll is None else unroll
        consts = dict(SCAN_ITEMS=self.items, SORT_USE_WAVES=int(use_waves), SORT_UNROLL=int(unroll))
        self._reduce = gpu.kernel("sort/scan", "scan_reduce", **consts)
        self._tiles = gpu.kernel("sort/scan", "scan_tiles", **consts)
        self._pool = BufferSet(gpu, "scan")
        self.timer: DispatchTimer | None = None
        self._dummy = gpu.buffer(16, label="scan.dummy")

    def dispatches(self, n: int) -> int:
        """Number of dispatches ``record`` issues for ``n`` elements."""
        d = 1
        while n > self.tile:
            n = -(-n // self.tile)
            d += 1 if n <= self.tile else 2
        return d

    def scratch_bytes(self) -> int:
        return self._pool.nbytes()

    def record(self, enc: spy.CommandEncoder, src: spy.Buffer, dst: spy.Buffer, n: int,
               total: spy.Buffer | None = None, scratch=None, site: str = "",
               count: spy.Buffer | None = None) -> None:
        """Record ``dst[0:n] = exclusive_cumsum(src[0:n])`` into ``enc``.

        src, dst: buffers of at least ``n`` uint32; ``src is dst`` (in place) is supported.
        dst[i] = src[0] + ... + src[i-1] (dst[0] = 0), uint32 arithmetic (wraps mod 2**32).
        total: optional buffer of at least 3 uint32 receiving the sum S of all n elements
        (0 for n == 0), which cannot wrap silently: ``total[0] = min(S, 2**32 - 1)`` (for
        kernels comparing it with a capacity), ``total[1]``, ``total[2]`` the low and high
        words of S: exact below 2**32, and above it too unless a scan tile (the tile's
        elements at level 0, tile**2 at level 1, ...) sums to 2**32 or more, whose sum then
        saturates (S is then a lower bound >= 2**32, and prefix sums after that tile are
        undefined; an element 0xFFFFFFFF counts as 2**32): :func:`read_total`.
        Elements of dst at and beyond n are not touched.
        site: label of the call site (dispatches of one site reuse their bound arguments).
        scratch: where the partial sums come from (an object with ``get(name, nbytes)``,
        e.g. a phase of an spirula.engine.profile.PhaseArena); default the object's own buffers.
        count: optional buffer whose first uint32 the GPU wrote: only the first
        ``min(n, count[0])`` elements are scanned (and the total is theirs); the dispatches
        are still sized for ``n``, but do no work past the count, and dst at and beyond it
        is not touched.
        """
        n = int(n)
        if n < 0:
            raise ValueError("n must be >= 0")
        _groups(n, self.tile)  # size check before recording anything
        self._level(enc, src, dst, n, 0, total, scratch if scratch is not None else self._pool, site, count)

    def _level(self, enc, src, dst, m, level, total, pool, site, count=None):
        # the count applies to the elements (level 0); the tile sums past it are zeros
        counted = dict(count=count if count is not None else self._dummy, has_count=int(count is not None))
        if m <= self.tile:
            _record(self._tiles, enc, [WG, 1, 1], self.timer, f"scan_tiles{level}", site,
                src=src, dst=dst, offsets=self._dummy, total=total if total is not None else self._dummy,
                n=m, has_offsets=0, write_total=int(total is not None), **counted)
            return
        g = _groups(m, self.tile)
        sums = pool.get(f"sums{level}", 4 * g)
        _record(self._reduce, enc, [g * WG, 1, 1], self.timer, f"scan_reduce{level}", site, src=src, sums=sums, n=m,
                saturate=int(total is not None), **counted)
        if g <= self.tile:  # each group adds up the raw sums before it (no third dispatch)
            _record(self._tiles, enc, [g * WG, 1, 1], self.timer, f"scan_tiles{level}", site,
                src=src, dst=dst, offsets=sums, total=total if total is not None else self._dummy, n=m,
                has_offsets=2, write_total=int(total is not None), **counted)
            return
        self._level(enc, sums, sums, g, level + 1, total, pool, site)
        _record(self._tiles, enc, [g * WG, 1, 1], self.timer, f"scan_tiles{level}", site,
            src=src, dst=dst, offsets=sums, total=self._dummy, n=m, has_offsets=1, write_total=0, **counted)

    def release(self) -> None:
        """Free the scratch buffers (only when no recorded work is pending)."""
        self._pool.release()

    def trim(self) -> None:
        """Free scratch buffers outgrown since the last trim; they are kept alive until
        then because work recorded earlier may still use them. Call after a wait."""
        self._pool.trim()

    def outgrown_bytes(self) -> int:
        return self._pool.outgrown_bytes()


class RadixSort:
    """Stable LSD radix sort of (uint32 key, uint32 value) pairs on the GPU.

    8-bit digits: ``ceil(bits / 8)`` passes, each three dispatches: ``radix_hist`` (256
    counts per tile), ``radix_offsets`` (each digit's row of counts scanned over the tiles)
    and ``radix_scatter``. A tile is ``256 * items_per_thread`` pairs (4096 by default);
    plus one buffer copy pair when ``passes`` is odd and ``copy_back``. Scratch: one
    ping-pong key/value pair (8 bytes per pair), the histograms (256 uint32 per tile, i.e.
    1/16 of the keys at the default tile) and 256 digit totals.
    """

    def __init__(self, gpu: Gpu, items_per_thread: int = 16, use_waves: bool = True,
                 unroll: bool | None = None):
        self.gpu = gpu
        self.items = int(items_per_thread)
        self.tile = WG * self.items
        if self.tile >= 65536:
            raise ValueError("tile must hold fewer than 65536 pairs (16-bit local counters)")
        unroll = _unroll_default(gpu) if unroll is None else unroll
        consts = dict(SORT_ITEMS=self.items, SORT_USE_WAVES=int(use_waves), SORT_UNROLL=int(unroll))
        self._hist = gpu.kernel("sort/radix", "radix_hist", **consts)
        self._offsets = gpu.kernel("sort/radix", "radix_offsets", **consts)
        self._scatter = gpu.kernel("sort/radix", "radix_scatter", **consts)
        self._pool = BufferSet(gpu, "radix")
        self._dummy = gpu.buffer(16, label="radix.dummy")
        self.timer: DispatchTimer | None = None

    @property
    def max_pairs(self) -> int:
        """The most pairs one :meth:`record` can sort (the dispatch limit of its kernels)."""
        return MAX_DISPATCH_GROUPS * self.tile

    @staticmethod
    def passes(bits: int) -> int:
        return -(-int(bits) // 8)

    def dispatches(self, n: int, bits: int) -> int:
        """Number of compute dispatches ``record`` issues (copies not counted)."""
        return 0 if n <= 1 else 3 * self.passes(bits)

    def scratch_bytes(self) -> int:
        return self._pool.nbytes()

    def record(self, enc: spy.CommandEncoder, keys: spy.Buffer, values: spy.Buffer, n: int, bits: int,
               copy_back: bool = True, scratch=None, count: spy.Buffer | None = None,
               site: str = "", inputs: tuple[spy.Buffer, spy.Buffer] | None = None) -> tuple[spy.Buffer, spy.Buffer]:
        """Record a stable sort of the first n pairs by ``key & ((1 << bits) - 1)``.

        keys, values: buffers of at least n uint32 each, distinct. bits: 1..32; key bits
        above ``bits`` are ignored for ordering but kept. Pairs with equal (masked) keys
        keep their input order. Returns ``(keys_buf, values_buf)`` holding the result:
        with ``copy_back`` (default) always the caller's ``keys``/``values``; without it,
        for an odd pass count (bits in 1..8 or 17..24) the internal ping-pong buffers,
        which the next record on this object overwrites. Elements at and beyond n are
        untouched. count: optional uint32 buffer written earlier on the GPU; the sort then
        covers the first ``min(n, count[0])`` pairs, ``n`` being the capacity the dispatches
        are sized for (no host read of the count); pairs past the count are untouched
        with an even number of passes, undefined with an odd one (the copy back).
        inputs: (keys, values) buffers to sort from, distinct from ``keys``/``values``, which then
        receive the result without a copy whatever the pass count (``inputs`` are left as
        they are with one pass, overwritten with more); the result's elements past the count
        are untouched.
        """
        # scratch: where the ping-pong buffers and histograms come from (``get(name, nbytes)``,
        # e.g. a phase of an spirula.engine.profile.PhaseArena); default the object's own buffers.
        # site: label of the call site (its dispatches reuse their bound arguments).
        n, bits = int(n), int(bits)
        if not 1 <= bits <= 32:
            raise ValueError("bits must be in 1..32")
        if n < 0:
            raise ValueError("n must be >= 0")
        if n <= 1:
            return keys, values
        nb = _groups(n, self.tile)
        pool = scratch if scratch is not None else self._pool
        tmp_k = pool.get("keys", 4 * n)
        tmp_v = pool.get("values", 4 * n)
        hist = pool.get("hist", 4 * 256 * nb)
        digit_totals = pool.get("digit_totals", 4 * 256)
        on_gpu = dict(count=count if count is not None else self._dummy, count_from_buf=int(count is not None))
        src_k, src_v, dst_k, dst_v = keys, values, tmp_k, tmp_v
        passes = self.passes(bits)
        if inputs is not None:  # ping-pong so that the last pass writes keys / values
            src_k, src_v = inputs
            dst_k, dst_v = (keys, values) if passes % 2 else (tmp_k, tmp_v)
        for p in range(passes):
            shift = 8 * p
            mask = (1 << min(8, bits - shift)) - 1
            _record(self._hist, enc, [nb * WG, 1, 1], self.timer, f"hist{p}", site,
                                keys=src_k, hist=hist, n=n, shift=shift, mask=mask, num_blocks=nb, **on_gpu)
            _record(self._offsets, enc, [256 * WG, 1, 1], self.timer, f"offsets{p}", site,
                    hist=hist, digit_totals=digit_totals, num_blocks=nb)
            _record(self._scatter, enc, [nb * WG, 1, 1], self.timer, f"scatter{p}", site,
                                   keys_in=src_k, vals_in=src_v, keys_out=dst_k, vals_out=dst_v,
                                   hist=hist, digit_totals=digit_totals, n=n, shift=shift, mask=mask,
                                   num_blocks=nb, **on_gpu)
            nxt = (tmp_k, tmp_v) if dst_k is keys else (keys, values)
            src_k, src_v, (dst_k, dst_v) = dst_k, dst_v, nxt
        if src_k is not keys and copy_back:
            self.gpu.copy(enc, keys, 0, src_k, 0, 4 * n)
            self.gpu.copy(enc, values, 0, src_v, 0, 4 * n)
            return keys, values
        return src_k, src_v

    def release(self) -> None:
        """Free the scratch buffers (only when no recorded work is pending)."""
        self._pool.release()

    def trim(self) -> None:
        """Free scratch buffers outgrown since the last trim (call after a wait)."""
        self._pool.trim()

    def outgrown_bytes(self) -> int:
        return self._pool.outgrown_bytes()


def bench_sort(gpu: Gpu, n: int, bits: int, repeats: int = 10, seed: int = 0,
               sorter: RadixSort | None = None, breakdown: bool = False) -> dict:
    """Time ``RadixSort.record`` + submit + wait on ``n`` random (key, index) pairs.

    Keys are uniform in [0, 2**bits). Before each repeat the pristine keys/values are
    copied device-to-device in a separate submit (not timed). The sort is recorded between
    two GPU timestamps in its own encoder. The first run is a warm-up. Returns a dict:
    ``gpu_ms`` (median, timestamps around the sort), ``wall_ms`` (median of record + submit
    + wait, host clock), ``record_ms`` (median Python recording cost), ``mkeys_per_s``
    (n / gpu_ms), n, bits, passes, dispatches; with ``breakdown``, ``per_dispatch_ms``:
    {label: median ms} from per-dispatch timestamps (adds a little overhead of its own).
    """
    sorter = sorter or RadixSort(gpu)
    rng = np.random.default_rng(seed)
    k0 = gpu.upload(rng.integers(0, 1 << bits, n, dtype=np.uint64).astype(np.uint32))
    v0 = gpu.upload(np.arange(n, dtype=np.uint32))
    keys, vals = gpu.buffer(4 * n), gpu.buffer(4 * n)
    pool = gpu.device.create_query_pool(type=spy.QueryType.timestamp, count=2 * (repeats + 1))
    timer = DispatchTimer(gpu.device) if breakdown else None
    wall_ms, rec_ms, per = [], [], {}
    for r in range(repeats + 1):
        enc = gpu.encoder()
        enc.copy_buffer(keys, 0, k0, 0, 4 * n)
        enc.copy_buffer(vals, 0, v0, 0, 4 * n)
        gpu.submit(enc)
        gpu.device.wait_for_idle()
        if timer is not None:
            timer.reset()
        sorter.timer = timer
        t0 = time.perf_counter()
        enc = gpu.encoder()
        enc.write_timestamp(pool, 2 * r)
        sorter.record(enc, keys, vals, n, bits)
        enc.write_timestamp(pool, 2 * r + 1)
        t1 = time.perf_counter()
        gpu.submit(enc)
        gpu.device.wait_for_idle()
        t2 = time.perf_counter()
        sorter.timer = None
        if r > 0:
            rec_ms.append((t1 - t0) * 1e3)
            wall_ms.append((t2 - t0) * 1e3)
            if timer is not None:
                for lab, sec in timer.results():
                    per.setdefault(lab, []).append(sec * 1e3)
    ts = pool.get_timestamp_results(0, 2 * (repeats + 1))
    gpu_ms = [(ts[2 * r + 1] - ts[2 * r]) * 1e3 for r in range(1, repeats + 1)]
    g = float(np.median(gpu_ms))
    out = dict(n=n, bits=bits, passes=sorter.passes(bits), dispatches=sorter.dispatches(n, bits),
               gpu_ms=g, wall_ms=float(np.median(wall_ms)), record_ms=float(np.median(rec_ms)),
               mkeys_per_s=n / g / 1e3 if g > 0 else float("nan"))
    if breakdown:
        out["per_dispatch_ms"] = {lab: float(np.median(v)) for lab, v in per.items()}
    return out
