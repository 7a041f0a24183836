"""Peak memory of the mesh stage: host resident set (Linux high-water mark, reset at the
start where the kernel allows) and the GPU buffers the stage accounts for itself (slangpy
does not report heaps on every driver, e.g. lavapipe)."""

from __future__ import annotations

import resource
import sys
from pathlib import Path


def _status_kb(key: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class MemoryMeter:
    def __init__(self):
        self.reset_ok = False
        try:  # "5" resets VmHWM to the current RSS (Linux >= 4.0)
            Path("/proc/self/clear_refs").write_text("5")
            self.reset_ok = True
        except OSError:
            pass
        self._gpu: dict[str, int] = {}
        self.gpu_peak = 0
        self.host_peak_kb = 0
        self.sample()

    def gpu(self, what: str, nbytes: int) -> None:
        """Set the bytes held by one group of GPU buffers (0 when released)."""
        self._gpu[what] = int(nbytes)
        self.gpu_peak = max(self.gpu_peak, sum(self._gpu.values()))

    def sample(self) -> None:
        hwm = _status_kb("VmHWM")
        if hwm is None:  # not Linux: the process-lifetime peak
            r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            hwm = r // 1024 if sys.platform == "darwin" else r
        self.host_peak_kb = max(self.host_peak_kb, hwm)

    def report(self) -> dict:
        self.sample()
        return {"host_peak_mb": round(self.host_peak_kb / 1024, 1),
                "host_peak_scope": "mesh stage" if self.reset_ok else "process lifetime",
                "gpu_peak_mb": round(self.gpu_peak / 2 ** 20, 1),
                "gpu_scope": "buffers of the mesh stage (accounted)"}
