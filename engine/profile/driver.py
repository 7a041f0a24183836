"""Memory as the driver reports it, where that is available (no hard dependencies).

* ``device.report_heaps()``: slangpy's own heaps (staging/upload heaps; empty on some
  drivers, e.g. lavapipe).
* NVML (``pynvml``, when importable, NVIDIA only): device memory used and total.
"""

from __future__ import annotations

from .pool import MiB


def driver_memory(device) -> dict:
    out: dict = {}
    try:
        heaps = device.report_heaps()
        out["heaps"] = [{"label": h.label, "allocated_mib": h.total_allocated / MiB,
                         "usage_mib": h.total_mem_usage / MiB, "allocations": h.num_allocations} for h in heaps]
    except Exception as exc:  # not every backend implements it
        out["heaps_error"] = str(exc)
    nv = _nvml()
    if nv is not None:
        out["nvml"] = nv
    return out


def _nvml() -> dict | None:
    try:
        import pynvml  # optional
    except Exception:
        return None
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        info = pynvml.nvmlDeviceGetMemoryInfo(h)
        name = pynvml.nvmlDeviceGetName(h)
        return {"gpu": name.decode() if isinstance(name, bytes) else str(name),
                "used_mib": info.used / MiB, "total_mib": info.total / MiB}
    except Exception as exc:
        return {"error": str(exc)}
