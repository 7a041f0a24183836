"""Measured side of the memory-traffic floors (`spirula bench raster`): the bandwidth the
device reaches (a large copy and a read+write kernel, GPU timestamps, median of repeats),
the measured time of each kernel of the iteration against its floor from the byte model of
spirula/engine/cli/bench/floors.py, and the report's lines. See floors.py's docstring for the model."""

from __future__ import annotations

import statistics

from .floors import Workload, iteration_calls, kernel_bytes

# --- measured bandwidth -------------------------------------------------------------------------
def median_gpu_seconds(device, record, repeats: int) -> float:
    """Median GPU time (s) of one operation over ``repeats`` runs after one warm-up, each in
    its own command buffer: ``record(enc, pool, before, after)`` records it between the
    timestamps ``before`` and ``after`` of ``pool`` (written by the encoder, or by a
    dispatch's query_index_before/after). The probes of the bench use it."""
    import slangpy as spy

    pool = device.create_query_pool(type=spy.QueryType.timestamp, count=2 * (repeats + 1))
    for r in range(repeats + 1):
        enc = device.create_command_encoder()
        record(enc, pool, 2 * r, 2 * r + 1)
        device.submit_command_buffer(enc.finish())
        device.wait_for_idle()
    ts = pool.get_timestamp_results(0, 2 * (repeats + 1))
    return statistics.median(ts[2 * r + 1] - ts[2 * r] for r in range(1, repeats + 1))


def measure_bandwidth(gpu, nbytes: int | None = None, repeats: int = 5) -> dict:
    """Device bandwidth from ``2 x nbytes / GPU time`` of (a) a device-to-device buffer copy
    and (b) the read+write kernel shaders/profile/bandwidth.slang, each in its own command
    buffer between two GPU timestamps, one warm-up then the median of ``repeats``.
    Default size 256 MiB, 16 MiB on a software device (lavapipe). Bypasses the profiler and
    the VRAM pool."""
    import slangpy as spy

    from ...device import MAX_DISPATCH_GROUPS

    device = gpu.device
    if nbytes is None:
        nbytes = (16 if gpu.software else 256) << 20
    nbytes = max(16, int(nbytes) // 16 * 16)
    # straight from slangpy, not through gpu.buffer: the probe's transient buffers stay out of
    # the VRAM pool's high-water mark, which the bench reports for the training buffers
    usage = (spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access | spy.BufferUsage.copy_source
             | spy.BufferUsage.copy_destination)
    src = device.create_buffer(size=nbytes, usage=usage, label="bench.bandwidth_src")
    dst = device.create_buffer(size=nbytes, usage=usage, label="bench.bandwidth_dst")
    kern = gpu.kernel("profile/bandwidth", "copy_vec4").raw  # slangpy's own dispatch: not in the profile
    n16 = nbytes // 16
    threads = min(n16, MAX_DISPATCH_GROUPS * 256)
    enc = device.create_command_encoder()
    enc.clear_buffer(src)  # touch the memory before timing
    enc.clear_buffer(dst)
    device.submit_command_buffer(enc.finish())
    device.wait_for_idle()

    def copy(enc, pool, before, after):
        enc.write_timestamp(pool, before)
        enc.copy_buffer(dst, 0, src, 0, nbytes)
        enc.write_timestamp(pool, after)

    copy_s = median_gpu_seconds(device, copy, repeats)
    kern_s = median_gpu_seconds(device, lambda enc, pool, before, after: kern.dispatch(
        thread_count=[threads, 1, 1], command_encoder=enc, query_pool=pool, query_index_before=before,
        query_index_after=after, src=src, dst=dst, n=n16, stride=threads), repeats)
    gbs = lambda s: 2.0 * nbytes / s / 1e9 if s > 0 else 0.0
    copy_gbs, kern_gbs = gbs(copy_s), gbs(kern_s)
    return {"bytes": nbytes, "repeats": repeats, "copy_ms": copy_s * 1e3, "kernel_ms": kern_s * 1e3,
            "copy_gb_per_s": copy_gbs, "kernel_gb_per_s": kern_gbs, "gb_per_s": max(copy_gbs, kern_gbs),
            "source": "copy" if copy_gbs >= kern_gbs else "kernel"}


# --- the report ---------------------------------------------------------------------------------
def floor_report(w: Workload, iterations: list[list[tuple[str, float, int]]], gb_per_s: float,
                 within: float = 3.0) -> dict:
    """Per-kernel floors from the measured operations of the timed iterations.

    iterations: per iteration, its operations in record order as (name, seconds,
    issued bytes) (issued bytes: what a copy or clear really moved, a copy counting its
    size twice (read + write); 0 for kernels).
    Returns the JSON-ready report: ``kernels`` (per name: calls, ms per iteration (median
    over iterations of the summed time), read/write/total bytes, floor_ms, ratio, and for
    copies/clears issued_bytes), ``total``, ``slowest`` (the three with the most time:
    name, ms, ratio, within), ``calls`` (per operation, when the model's list matches the
    trace) and ``model_matches_trace`` / ``mismatch``."""
    calls = iteration_calls(w)
    model_names = [c.name for c in calls]
    bw = gb_per_s * 1e9
    floor_ms = lambda b: b / bw * 1e3 if bw > 0 else None
    ratio = lambda ms, fl: ms / fl if fl else None
    mismatch = None
    for i, ops in enumerate(iterations):
        names = [o[0] for o in ops]
        if names != model_names:
            mismatch = _diff(model_names, names, i)
            break
    per_ms: dict[str, list[float]] = {}
    per_calls: dict[str, int] = {}
    issued: dict[str, int] = {}
    for ops in iterations:
        it: dict[str, float] = {}
        cnt: dict[str, int] = {}
        iss: dict[str, int] = {}
        for name, sec, nb in ops:
            it[name] = it.get(name, 0.0) + sec * 1e3
            cnt[name] = cnt.get(name, 0) + 1
            iss[name] = iss.get(name, 0) + int(nb)
        for k, v in it.items():
            per_ms.setdefault(k, []).append(v)
        per_calls.update(cnt)
        issued.update(iss)
    model = kernel_bytes(w)
    rows = []
    for name in sorted(set(per_ms) | set(model), key=lambda k: -_med(per_ms.get(k, [0.0]))):
        ms = _med(per_ms[name]) if name in per_ms else None
        t = model.get(name)
        row = {"name": name, "calls": per_calls.get(name, 0), "model_calls": model_names.count(name), "ms": ms,
               "read_bytes": t.read if t else None, "write_bytes": t.write if t else None,
               "bytes": t.total if t else None}
        row["floor_ms"] = floor_ms(t.total) if t else None
        row["ratio"] = ratio(ms, row["floor_ms"]) if ms is not None else None
        if name in ("copy", "clear"):
            row["issued_bytes"] = issued.get(name)
        rows.append(row)
    timed = [r for r in rows if r["ms"] is not None]
    tot_ms = sum(r["ms"] for r in timed)
    tot_b = sum(t.total for t in model.values())
    slowest = [{"name": r["name"], "ms": r["ms"], "ratio": r["ratio"],
                "within": r["ratio"] is not None and r["ratio"] <= within} for r in timed[:3]]
    out = {
        "bandwidth_gb_per_s": gb_per_s, "within_factor": within, "workload": w.as_dict(),
        "kernels": rows,
        "total": {"ms": tot_ms, "bytes": tot_b, "floor_ms": floor_ms(tot_b), "ratio": ratio(tot_ms, floor_ms(tot_b))},
        "slowest": slowest, "slowest_within": bool(slowest) and all(s["within"] for s in slowest),
        "model_matches_trace": mismatch is None, "mismatch": mismatch,
    }
    if mismatch is None and iterations:
        per_call = []
        for j, c in enumerate(calls):
            ms = _med([ops[j][1] * 1e3 for ops in iterations])
            fl = floor_ms(c.traffic.total)
            per_call.append({"name": c.name, "what": c.what, "ms": ms, "bytes": c.traffic.total, "floor_ms": fl,
                             "ratio": ratio(ms, fl)})
        out["calls"] = per_call
    return out


def format_floors(rep: dict, bandwidth: dict | None = None) -> list[str]:
    """Text table of :func:`floor_report` (for the CLI)."""
    lines = []
    if bandwidth is not None:
        lines.append(f"  measured bandwidth {bandwidth['gb_per_s']:.1f} GB/s ({bandwidth['source']}): device copy "
                     f"{bandwidth['copy_gb_per_s']:.1f} GB/s, read+write kernel {bandwidth['kernel_gb_per_s']:.1f} GB/s "
                     f"({bandwidth['bytes'] / 2**20:.0f} MiB, 2 x bytes / time, median of {bandwidth['repeats']})")
    lines.append(f"  {'kernel':22s}{'calls':>6s}{'ms/iter':>11s}{'MB moved':>11s}{'floor ms':>11s}{'x floor':>10s}")
    fmt = lambda v, f: format(v, f) if v is not None else "-"
    for r in rep["kernels"]:
        lines.append(f"  {r['name']:22s}{r['calls']:6d}{fmt(r['ms'], '11.3f'):>11s}"
                     f"{fmt(r['bytes'] / 1e6 if r['bytes'] is not None else None, '11.3f'):>11s}"
                     f"{fmt(r['floor_ms'], '11.4f'):>11s}{fmt(r['ratio'], '10.1f'):>10s}")
    t = rep["total"]
    lines.append(f"  {'all of the above':22s}{'':6s}{fmt(t['ms'], '11.3f'):>11s}{t['bytes'] / 1e6:11.3f}"
                 f"{fmt(t['floor_ms'], '11.4f'):>11s}{fmt(t['ratio'], '10.1f'):>10s}")
    for r in rep["kernels"]:
        if r.get("issued_bytes") and r["bytes"] and r["issued_bytes"] > 1.01 * r["bytes"]:
            lines.append(f"  {r['name']}: {r['issued_bytes'] / 1e6:.3f} MB really moved, {r['issued_bytes'] / r['bytes']:.1f}x "
                         f"what the workload needs (buffers larger than their contents)")
    k = rep["within_factor"]
    parts = [f"{s['name']} {fmt(s['ratio'], '.1f')}x ({'within' if s['within'] else 'NOT within'} {k:g}x)"
             for s in rep["slowest"]]
    lines.append("  slowest three: " + ", ".join(parts))
    if not rep["model_matches_trace"]:
        lines.append(f"  WARNING: byte model does not match the recorded operations: {rep['mismatch']}")
    return lines


def _med(v) -> float:
    return float(statistics.median(v)) if len(v) else 0.0


def _diff(model: list[str], trace: list[str], it: int) -> str:
    for j, (a, b) in enumerate(zip(model, trace)):
        if a != b:
            return f"iteration {it}, operation {j}: model {a}, trace {b}"
    return f"iteration {it}: model has {len(model)} operations, trace {len(trace)}"
