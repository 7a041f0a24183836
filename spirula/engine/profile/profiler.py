"""Per-device profiler: timing buckets and per-kernel GPU time from timestamp queries.

Installed on a :class:`spirula.engine.device.Gpu` only while profiling is on
(``gpu.attach_profiler``). How it hooks in:

* Kernels: ``Gpu.kernel`` returns a :class:`spirula.engine.device.Kernel` whose ``dispatch``
  attribute *is* slangpy's bound ``ComputeKernel.dispatch`` while profiling is off (no
  Python frame is added). Attaching a profiler rebinds that attribute to
  :meth:`Profiler.dispatcher`'s closure, which reserves a timestamp-query pair and passes
  ``query_pool / query_index_before / query_index_after`` to slangpy, so the GPU writes a
  timestamp right before and after the dispatch.
* Encoders from ``Gpu.encoder()`` get a timestamp at creation and one at ``Gpu.submit`` (the
  command buffer's GPU span: "GPU execution"). ``Gpu.copy`` / ``Gpu.clear`` are bracketed by
  timestamps too (device->device copies, memsets). ``Gpu.read`` waits for the GPU first
  (time *blocked*), then copies (device->host); ``Gpu.write`` / ``Gpu.upload`` are timed on
  the host (host->device; slangpy's upload does not wait for queued work).
* Results are read without waiting: at every submit, finished submissions
  (``is_submit_finished``) are resolved, and after every wait all of them are. A query pool
  is reset (host reset) and reused once all its queries were read.

Dispatches recorded into an encoder that did not come from ``Gpu.encoder()`` (or that carry
their own ``query_pool``) are counted but not timed ("untimed").
"""

from __future__ import annotations

import time
from collections import deque

import slangpy as spy

KERNEL, COPY, MEMSET, SPAN = 0, 1, 2, 3
BUCKETS = ("h2d", "d2h", "d2d", "memset")


class _QPool:
    __slots__ = ("qp", "outstanding", "full")

    def __init__(self, qp):
        self.qp, self.outstanding, self.full = qp, 0, False


class _Open:
    __slots__ = ("enc", "records")

    def __init__(self, enc, records):
        self.enc, self.records = enc, records


class Profiler:
    QUERIES_PER_POOL = 4096

    def __init__(self, gpu, on_resolved=None):
        self.gpu = gpu
        self.device = gpu.device
        self.t0 = time.perf_counter()
        self.kernels: dict[str, list] = {}             # "module:entry[@scope]" -> [timed calls, seconds, untimed calls]
        self.scope = ""                                 # label of the dispatches recorded now (profile.scope)
        self.xfer = {b: [0, 0, 0.0] for b in BUCKETS}   # count, bytes, seconds
        self.blocked_s = 0.0
        self.gpu_span_s = 0.0                           # sum of command-buffer spans
        self.submits = 0
        self.queries = 0                                # timestamp queries written
        self.waits = 0
        self._open: dict[int, _Open] = {}
        self._inflight: deque = deque()
        self._free: list[_QPool] = []
        self._pool: _QPool | None = None
        self._next = 0
        self._pools_created = 0
        self.on_resolved = on_resolved                  # called after results were read (snapshots)
        self.trace: list | None = None                  # when a list: (kind, label, bytes, seconds) per resolved record
        self.timestamp_error: str | None = None         # set when the device cannot make timestamp queries
        try:
            self._free.append(_QPool(self.device.create_query_pool(type=spy.QueryType.timestamp,
                                                                   count=self.QUERIES_PER_POOL)))
            self._pools_created += 1
        except Exception as exc:  # then count dispatches and time host buckets only
            self.timestamp_error = f"{type(exc).__name__}: {exc}"

    # --- query slots ----------------------------------------------------------------------
    def _slot(self) -> tuple[_QPool, int]:
        p = self._pool
        if p is None or self._next + 2 > self.QUERIES_PER_POOL:
            if p is not None:
                p.full = True
                self._maybe_recycle(p)
            if self._free:
                p = self._free.pop()
            else:
                p = _QPool(self.device.create_query_pool(type=spy.QueryType.timestamp, count=self.QUERIES_PER_POOL))
                self._pools_created += 1
            self._pool, self._next = p, 0
        i = self._next
        self._next += 2
        p.outstanding += 1
        self.queries += 2
        return p, i

    def _maybe_recycle(self, p: _QPool) -> None:
        if p.full and p.outstanding == 0:
            p.qp.reset()
            p.full = False
            self._free.append(p)

    def _unslot(self, p: _QPool) -> None:
        p.outstanding -= 1
        self.queries -= 2
        self._maybe_recycle(p)

    # --- hooks called by Gpu ------------------------------------------------------------------
    def dispatcher(self, kernel):
        """The ``dispatch`` callable installed on ``kernel`` (an spirula.engine.device.Kernel)."""
        raw = kernel.raw.dispatch
        name = kernel.name
        gpu, open_ = self.gpu, self._open
        if name not in self.kernels:
            self.kernels[name] = [0, 0.0, 0]
        if self.timestamp_error is not None:
            def count_only(*args, **kw):
                self.kernels[name][2] += 1
                return raw(*args, **kw)

            return count_only

        def dispatch(*args, command_encoder=None, **kw):
            if command_encoder is None:  # slangpy would submit at once: do the same, timed
                enc = gpu.encoder()
                dispatch(*args, command_encoder=enc, **kw)
                gpu.submit(enc)
                return None
            key = f"{name}@{self.scope}" if self.scope else name
            if key not in self.kernels:
                self.kernels[key] = [0, 0.0, 0]
            rec = open_.get(id(command_encoder))
            if rec is None or "query_pool" in kw:
                self.kernels[key][2] += 1
                return raw(*args, command_encoder=command_encoder, **kw)
            p, i = self._slot()
            try:
                raw(*args, command_encoder=command_encoder, query_pool=p.qp, query_index_before=i,
                    query_index_after=i + 1, **kw)
            except BaseException:
                self._unslot(p)
                raise
            rec.records.append((KERNEL, key, 0, p, i))
            return None

        return dispatch

    def begin(self, enc) -> None:
        if self.timestamp_error is not None:
            return
        p, i = self._slot()
        enc.write_timestamp(p.qp, i)
        self._open[id(enc)] = _Open(enc, [(SPAN, None, 0, p, i)])

    def submit(self, enc) -> int:
        rec = self._open.pop(id(enc), None)
        if rec is not None:
            _, _, _, p, i = rec.records[0]
            enc.write_timestamp(p.qp, i + 1)
        sid = self.device.submit_command_buffer(enc.finish())
        self.submits += 1
        if rec is not None:
            self._inflight.append((sid, rec.records))
        self._poll()
        return sid

    def _bracket(self, kind: int, label: str, nbytes: int, enc, fn) -> None:
        rec = self._open.get(id(enc))
        if rec is None:
            fn()
            b = self.xfer["d2d" if kind == COPY else "memset"]
            b[0] += 1
            b[1] += nbytes
            return
        p, i = self._slot()
        enc.write_timestamp(p.qp, i)
        fn()
        enc.write_timestamp(p.qp, i + 1)
        rec.records.append((kind, label, nbytes, p, i))

    def copy(self, enc, dst, dst_offset: int, src, src_offset: int, size: int) -> None:
        self._bracket(COPY, "copy", int(size), enc, lambda: enc.copy_buffer(dst, dst_offset, src, src_offset, size))

    def clear(self, enc, buf) -> None:
        self._bracket(MEMSET, "clear", int(buf.size), enc, lambda: enc.clear_buffer(buf))

    def wait_idle(self) -> None:
        t = time.perf_counter()
        self.device.wait_for_idle()
        self.blocked_s += time.perf_counter() - t
        self.waits += 1
        self._drain()

    def wait_for(self, submit_id: int) -> None:
        """Block until one submission has finished (counted as a wait, blocked time)."""
        t = time.perf_counter()
        self.device.wait_for_submit(submit_id)
        self.blocked_s += time.perf_counter() - t
        self.waits += 1
        self._poll()

    def read(self, buf, wait: bool = True):
        """Wait for the GPU (blocked; not for a host-visible buffer whose writes are known to
        have finished, ``wait=False``), then copy ``buf`` to the host (device->host)."""
        if wait:
            self.wait_idle()
        t = time.perf_counter()
        raw = buf.to_numpy()
        b = self.xfer["d2h"]
        b[0] += 1
        b[1] += int(raw.nbytes)
        b[2] += time.perf_counter() - t
        return raw

    def write(self, buf, data) -> None:
        t = time.perf_counter()
        buf.copy_from_numpy(data)
        b = self.xfer["h2d"]
        b[0] += 1
        b[1] += int(data.nbytes)
        b[2] += time.perf_counter() - t

    # --- resolving timestamps -----------------------------------------------------------------
    def _poll(self) -> None:
        q = self._inflight
        done = False
        while q and self.device.is_submit_finished(q[0][0]):
            self._resolve(q.popleft()[1])
            done = True
        if done and self.on_resolved is not None:
            self.on_resolved(self)

    def _drain(self) -> None:
        """Resolve everything submitted (call only right after a wait for idle)."""
        q = self._inflight
        while q:
            self._resolve(q.popleft()[1])
        if self.on_resolved is not None:
            self.on_resolved(self)

    def _resolve(self, records: list) -> None:
        # Read each run of consecutive pairs of one pool with a single call.
        k, n = 0, len(records)
        while k < n:
            p, lo = records[k][3], records[k][4]
            j = k
            while j + 1 < n and records[j + 1][3] is p and records[j + 1][4] == records[j][4] + 2:
                j += 1
            ts = p.qp.get_timestamp_results(lo, 2 * (j - k + 1))
            for r in range(k, j + 1):
                kind, label, nbytes, _, _ = records[r]
                dt = max(0.0, ts[2 * (r - k) + 1] - ts[2 * (r - k)])
                if self.trace is not None:
                    self.trace.append((kind, label, nbytes, dt))
                if kind == KERNEL:
                    e = self.kernels[label]
                    e[0] += 1
                    e[1] += dt
                elif kind == SPAN:
                    self.gpu_span_s += dt
                else:
                    b = self.xfer["d2d" if kind == COPY else "memset"]
                    b[0] += 1
                    b[1] += nbytes
                    b[2] += dt
            p.outstanding -= j - k + 1
            self._maybe_recycle(p)
            k = j + 1

    def finish(self) -> None:
        """Wait for the GPU and read every pending timestamp (before a final report)."""
        self.wait_idle()

    @property
    def pending(self) -> int:
        """Recorded but not yet submitted encoders."""
        return len(self._open)

    # --- results -------------------------------------------------------------------------------
    def timing(self) -> dict:
        wall = time.perf_counter() - self.t0
        out = {}
        for b in BUCKETS:
            c, nb, s = self.xfer[b]
            out[b] = {"count": c, "bytes": nb, "ms": s * 1e3, "gb_per_s": (nb / s / 1e9) if s > 0 else None}
        k_ms = sum(e[1] for e in self.kernels.values()) * 1e3
        xfer_gpu_ms = (self.xfer["d2d"][2] + self.xfer["memset"][2]) * 1e3
        span_ms = self.gpu_span_s * 1e3
        host_sync_ms = (self.blocked_s + self.xfer["h2d"][2] + self.xfer["d2h"][2]) * 1e3
        out.update({
            "wall_ms": wall * 1e3,
            "blocked_ms": self.blocked_s * 1e3,
            "host_ms": wall * 1e3 - host_sync_ms,
            "gpu_exec_ms": span_ms,
            "gpu_kernels_ms": k_ms,
            "gpu_copies_memsets_ms": xfer_gpu_ms,
            "gpu_other_ms": span_ms - k_ms - xfer_gpu_ms,
            "submits": self.submits, "waits": self.waits, "timestamp_queries": self.queries,
            "query_pools": self._pools_created, "timestamp_error": self.timestamp_error,
        })
        return out

    def kernel_table(self) -> list[dict]:
        rows = []
        for key, (calls, sec, untimed) in self.kernels.items():
            if calls == 0 and untimed == 0:
                continue
            name, _, scope = key.partition("@")
            module, _, entry = name.rpartition(":")
            rows.append({"name": entry, "module": module, "calls": calls, "total_ms": sec * 1e3,
                         "us_per_call": sec * 1e6 / calls if calls else None, "untimed_calls": untimed,
                         "scope": scope})
        rows.sort(key=lambda r: -r["total_ms"])
        return rows
