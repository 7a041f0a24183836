"""The profiler's report: one JSON-ready dict per device, and its text form (three tables)."""

from __future__ import annotations

from .driver import driver_memory
from .pool import CATEGORIES

VERSION = 1


def build_report(gpu, prof=None, driver: bool = True) -> dict:
    """Timing, kernels and VRAM of ``gpu`` (timing/kernels empty without a profiler)."""
    vram = gpu.pool.stats()
    if driver:
        vram["driver"] = driver_memory(gpu.device)
    return {
        "version": VERSION, "device": gpu.adapter, "backend": gpu.backend,
        "timing": prof.timing() if prof is not None else None,
        "kernels": prof.kernel_table() if prof is not None else [],
        "vram": vram,
    }


def _f(v, fmt="{:.2f}", none="-"):
    return none if v is None else fmt.format(v)


def format_report(rep: dict, top: int = 30) -> str:
    lines = [f"=== Spirula profile: {rep['device']} ==="]
    t = rep.get("timing")
    if t is not None:
        lines += ["", f"Timing breakdown (wall {t['wall_ms'] / 1e3:.3f} s)",
                  f"  {'':34s}{'count':>8s}{'MiB':>11s}{'ms':>11s}{'GB/s':>9s}"]
        names = {"h2d": "host->device (upload)", "d2h": "device->host (read back)",
                 "d2d": "device->device copy (GPU time)", "memset": "memset (GPU time)"}
        for key, label in names.items():
            b = t[key]
            lines.append(f"  {label:34s}{b['count']:8d}{b['bytes'] / 2**20:11.2f}{b['ms']:11.2f}"
                         f"{_f(b['gb_per_s'], '{:9.2f}', '        -')}")
        wall = t["wall_ms"] or 1.0
        pct = lambda v: f"{100.0 * v / wall:5.1f}%"
        lines += [
            f"  {'blocked waiting on the GPU':34s}{t['waits']:8d}{'':11s}{t['blocked_ms']:11.2f}  {pct(t['blocked_ms'])} of wall",
            f"  {'host (wall - blocked - h2d - d2h)':34s}{'':8s}{'':11s}{t['host_ms']:11.2f}  {pct(t['host_ms'])} of wall",
            f"  {'wall':34s}{'':8s}{'':11s}{t['wall_ms']:11.2f}",
            f"  {'GPU execution (command buffers)':34s}{t['submits']:8d}{'':11s}{t['gpu_exec_ms']:11.2f}  {pct(t['gpu_exec_ms'])} of wall",
            f"    kernels {t['gpu_kernels_ms']:.2f} ms, copies + memsets {t['gpu_copies_memsets_ms']:.2f} ms, "
            f"between commands (barriers, timestamps) {t['gpu_other_ms']:.2f} ms; "
            f"{t['timestamp_queries']} timestamp queries",
        ]
        if t.get("timestamp_error"):
            lines.append(f"  no GPU timestamps on this device ({t['timestamp_error']}): GPU times are 0, calls are counted")
        ks = rep.get("kernels") or []
        total = sum(k["total_ms"] for k in ks) or 1.0
        lines += ["", "GPU time by kernel (timestamps around each dispatch; specialisations summed)",
                  f"  {'kernel':28s}{'module':18s}{'calls':>8s}{'total ms':>12s}{'us/call':>11s}{'share':>8s}"]
        for k in ks[:top]:
            extra = f"  (+{k['untimed_calls']} untimed)" if k["untimed_calls"] else ""
            lines.append(f"  {k['name']:28s}{k['module']:18s}{k['calls']:8d}{k['total_ms']:12.3f}"
                         f"{_f(k['us_per_call'], '{:11.1f}', '          -')}{100 * k['total_ms'] / total:7.1f}%{extra}")
        if len(ks) > top:
            lines.append(f"  ... {len(ks) - top} more")
    v = rep["vram"]
    lines += ["", "VRAM (device buffers in the pool)",
              f"  {'category':14s}{'count':>7s}{'current MiB':>13s}{'high-water MiB':>16s}"]
    for c in CATEGORIES:
        e = v["categories"][c]
        lines.append(f"  {c:14s}{e['count']:7d}{e['current_mib']:13.2f}{e['high_water_mib']:16.2f}")
    tot = v["total"]
    lines.append(f"  {'total':14s}{tot['count']:7d}{tot['current_mib']:13.2f}{tot['high_water_mib']:16.2f}"
                 f"   ({tot['allocations']} allocations, {tot['frees']} freed)")
    if v["largest"]:
        lines.append("  largest now (MiB): " + ", ".join(f"{b['name'] or '?'} ({b['category']}) {b['mib']:.2f}"
                                                      for b in v["largest"]))
    if v.get("largest_at_high_water"):
        lines.append("  largest at the high-water mark (MiB): " + ", ".join(
            f"{b['name'] or '?'} ({b['category']}) {b['mib']:.2f}" for b in v["largest_at_high_water"]))
    for a in v.get("arenas", []):
        phases = ", ".join(f"{p} {m:.2f}" for p, m in a["phases_mib"].items())
        if a["alias"]:
            lines.append(f"  phase arena '{a['name']}': aliasing on, {a['slots']} slots; phases need {a['separate_mib']:.2f} MiB "
                         f"apart, {a['shared_mib']:.2f} MiB shared: saved {a['saved_mib']:.2f} MiB "
                         f"(holds {a['held_mib']:.2f} MiB; phase peaks MiB: {phases})")
        else:
            lines.append(f"  phase arena '{a['name']}': aliasing off (SPIRULA_POOL_ALIAS=0); phases use {a['separate_mib']:.2f} MiB, "
                         f"sharing would need {a['shared_mib']:.2f} MiB (phase peaks MiB: {phases})")
    d = v.get("driver") or {}
    heaps = d.get("heaps")
    if heaps:
        lines.append("  driver heaps (slangpy): " + ", ".join(
            f"{h['label']} {h['usage_mib']:.1f}/{h['allocated_mib']:.1f} MiB" for h in heaps))
    elif heaps is not None:
        lines.append("  driver heaps (slangpy): none reported")
    lines += _vk_budget_lines(d)
    nv = d.get("nvml")
    if nv and "used_mib" in nv:
        lines.append(f"  NVML {nv['gpu']}: {nv['used_mib']:.0f} of {nv['total_mib']:.0f} MiB used (whole device)")
    return "\n".join(lines)


def _vk_budget_lines(d: dict) -> list[str]:
    vb = d.get("vk_budget")
    if vb is None:
        err = d.get("vk_budget_error")
        return [f"  driver (VK_EXT_memory_budget): not available: {err}"] if err else []
    where = vb["physical_device"]
    if vb["matched_by"] not in ("name", "name (partial)"):
        where += f"; {vb['matched_by']}"
    elif vb["same_name_devices"] > 1:
        where += f"; the first of {vb['same_name_devices']} with this name"
    lines = [f"  driver (VK_EXT_memory_budget, {where}):"]
    for h in vb["heaps"]:
        kind = "device-local" if h["device_local"] else "host"
        lines.append(f"    heap {h['index']} {kind}: {h['usage_mib']:,.0f} of {h['size_mib']:,.0f} MiB used "
                     f"(budget {h['budget_mib']:,.0f})")
    if vb.get("note"):
        lines.append(f"    ({vb['note']})")
    return lines
