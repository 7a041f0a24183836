"""Peak memory of the mesh stage, for the whole stage and for each of its steps: host
resident set (Linux high-water mark VmHWM, reset at the start of every step where the
kernel allows) and the GPU buffers the stage accounts for itself (slangpy does not report
heaps on every driver, e.g. lavapipe).

Per step, ``report()["steps"][name]`` = {"host_peak_mb": VmHWM between the step's start
and end (where the reset is refused: the process's peak so far), "gpu_peak_mb": the most
accounted GPU bytes held at once during the step}; MB = 2^20 bytes.
"""

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


def _reset_hwm() -> bool:
    try:  # "5" resets VmHWM to the current RSS (Linux >= 4.0)
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _hwm_kb() -> int:
    hwm = _status_kb("VmHWM")
    if hwm is None:  # not Linux: the process-lifetime peak
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        hwm = r // 1024 if sys.platform == "darwin" else r
    return hwm


class MemoryMeter:
    def __init__(self):
        self.reset_ok = _reset_hwm()
        self._gpu: dict[str, int] = {}
        self.gpu_peak = 0
        self.host_peak_kb = 0
        self.steps: dict[str, dict[str, float]] = {}
        self._step: str | None = None
        self._step_gpu = 0
        self.sample()

    def gpu(self, what: str, nbytes: int) -> None:
        """Set the bytes held by one group of GPU buffers (0 when released)."""
        self._gpu[what] = int(nbytes)
        held = sum(self._gpu.values())
        self.gpu_peak = max(self.gpu_peak, held)
        self._step_gpu = max(self._step_gpu, held)

    def sample(self) -> None:
        self.host_peak_kb = max(self.host_peak_kb, _hwm_kb())

    def start(self, step: str) -> None:
        """Begin the peaks of ``step`` (ends the running one first)."""
        self.finish()
        self.sample()  # keep the stage's peak before the reset drops it
        if self.reset_ok:
            self.reset_ok = _reset_hwm()
        self._step, self._step_gpu = step, sum(self._gpu.values())

    def finish(self) -> None:
        """End the running step (if any) and record its peaks."""
        if self._step is None:
            return
        hwm = _hwm_kb()
        self.host_peak_kb = max(self.host_peak_kb, hwm)
        self.steps[self._step] = {"host_peak_mb": round(hwm / 1024, 1),
                                  "gpu_peak_mb": round(self._step_gpu / 2 ** 20, 1)}
        self._step = None

    def report(self) -> dict:
        self.sample()
        return {"host_peak_mb": round(self.host_peak_kb / 1024, 1),
                "host_peak_scope": "mesh stage" if self.reset_ok else "process lifetime",
                "gpu_peak_mb": round(self.gpu_peak / 2 ** 20, 1),
                "gpu_scope": "buffers of the mesh stage (accounted)",
                "steps": dict(self.steps)}
