"""A private X server (Xvfb) for the window tests and the screenshot script, so the real
X11 path (native window + Vulkan swapchain) runs on machines without a display."""

from __future__ import annotations

import os
import shutil
import subprocess
import time


def _die_with_parent() -> None:
    """In the child (Linux): get SIGTERM when the process that started it dies, so a crashed
    test run leaves no X server behind."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Xvfb:
    def __init__(self, width: int = 1600, height: int = 1000, depth: int = 24):
        self.size = (width, height, depth)
        self.proc: subprocess.Popen | None = None
        self.display: str | None = None
        self._old: str | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("Xvfb") is not None

    def start(self) -> "Xvfb":
        if not self.available():
            raise RuntimeError("Xvfb is not installed (Debian: apt-get install xvfb)")
        r, w = os.pipe()
        w_, h_, d_ = self.size
        self.proc = subprocess.Popen(
            ["Xvfb", "-displayfd", str(w), "-screen", "0", f"{w_}x{h_}x{d_}", "-nolisten", "tcp", "-noreset"],
            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        os.close(w)
        buf = b""
        t_end = time.time() + 20
        with os.fdopen(r, "rb") as f:
            while not buf.endswith(b"\n") and time.time() < t_end:
                chunk = f.read(1)
                if not chunk:
                    break
                buf += chunk
        if not buf.strip():
            self.stop()
            raise RuntimeError("Xvfb did not report a display number")
        self.display = f":{int(buf.strip())}"
        self._old = os.environ.get("DISPLAY")
        os.environ["DISPLAY"] = self.display
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None
        if self._old is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = self._old

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
