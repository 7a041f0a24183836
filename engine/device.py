"""The one shared slangpy device of the process, and the kernel loader.

Vulkan is the default backend; CUDA (NVIDIA) and CPU can be forced. Shaders are found in
the source checkout (``<repo>/shaders``) or, when installed from a wheel, in the
``spirula_shaders`` package. Kernels are specialised with Slang link-time constants
(``extern static const``), one compiled pipeline per distinct set of constants.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import numpy as np
import slangpy as spy

from .errors import DeviceError

BACKENDS = ("vulkan", "cuda", "cpu")
_RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
_RW_COPY = _RW | spy.BufferUsage.copy_source | spy.BufferUsage.copy_destination


def shader_dir() -> Path:
    """Folder holding the .slang sources (checkout first, then the installed package)."""
    checkout = Path(__file__).resolve().parent.parent / "shaders"
    if checkout.is_dir() and any(checkout.rglob("*.slang")):
        return checkout
    spec = importlib.util.find_spec("spirula_shaders")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    raise DeviceError("Slang shader sources not found: neither <repo>/shaders nor the spirula_shaders package")


class Gpu:
    """A slangpy device plus a cache of compiled kernels and buffer helpers."""

    def __init__(self, backend: str = "vulkan"):
        if backend not in BACKENDS:
            raise DeviceError(f"unknown device '{backend}': choose one of {', '.join(BACKENDS)}")
        kind = {"vulkan": spy.DeviceType.vulkan, "cuda": spy.DeviceType.cuda, "cpu": spy.DeviceType.cpu}[backend]
        opts = spy.SlangCompilerOptions({"include_paths": [str(shader_dir())]})
        try:
            self.device = spy.Device(type=kind, compiler_options=opts, enable_hot_reload=False)
        except Exception as exc:  # slangpy raises RuntimeError with a driver message
            raise DeviceError(_device_help(backend, exc)) from exc
        self.backend = backend
        self._kernels: dict[tuple, spy.ComputeKernel] = {}
        self._lock = threading.Lock()

    @property
    def adapter(self) -> str:
        return f"{self.device.info.adapter_name} ({self.device.info.api_name})"

    # --- kernels -----------------------------------------------------------------------
    def kernel(self, module: str, entry: str, **constants) -> spy.ComputeKernel:
        """Compiled compute kernel ``entry`` of ``shaders/<module>.slang``.

        ``constants`` set the module's ``extern static const`` values (ints, floats, bools).
        """
        key = (module, entry, tuple(sorted(constants.items())))
        with self._lock:
            k = self._kernels.get(key)
            if k is None:
                extra = "\n".join(f"export static const {_slang_type(v)} {n} = {_slang_value(v)};" for n, v in sorted(constants.items()))
                try:
                    prog = self.device.load_program(module + ".slang", [entry], additional_source=extra or None)
                    k = self.device.create_compute_kernel(prog)
                except Exception as exc:
                    raise DeviceError(f"compiling shaders/{module}.slang:{entry} failed: {exc}") from exc
                self._kernels[key] = k
            return k

    # --- buffers -----------------------------------------------------------------------
    def buffer(self, nbytes: int, label: str = "") -> spy.Buffer:
        """Uninitialised device buffer of ``nbytes`` (rounded up to 16, at least 16)."""
        size = max(16, (int(nbytes) + 15) // 16 * 16)
        return self.device.create_buffer(size=size, usage=_RW_COPY, label=label)

    def upload(self, array: np.ndarray, label: str = "") -> spy.Buffer:
        """Device buffer holding a copy of ``array`` (C-contiguous, any dtype)."""
        a = np.ascontiguousarray(array)
        buf = self.buffer(a.nbytes, label)
        if a.nbytes:
            buf.copy_from_numpy(a.reshape(-1).view(np.uint8))
        return buf

    def zeros(self, nbytes: int, label: str = "") -> spy.Buffer:
        buf = self.buffer(nbytes, label)
        enc = self.device.create_command_encoder()
        enc.clear_buffer(buf)
        self.device.submit_command_buffer(enc.finish())
        return buf

    def read(self, buf: spy.Buffer, dtype, count: int | None = None, shape=None) -> np.ndarray:
        """Copy a buffer back to the host (waits for the GPU)."""
        raw = buf.to_numpy().view(np.uint8)
        a = raw.view(dtype)
        n = count if count is not None else (int(np.prod(shape)) if shape is not None else a.size)
        a = a[:n].copy()
        return a.reshape(shape) if shape is not None else a

    def encoder(self) -> spy.CommandEncoder:
        return self.device.create_command_encoder()

    def submit(self, enc: spy.CommandEncoder) -> int:
        return self.device.submit_command_buffer(enc.finish())


def _slang_type(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    raise TypeError(f"unsupported constant type {type(v)}")


def _slang_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(float(v)) + "f" if np.isfinite(v) else "0.0f"
    return str(int(v))


def _device_help(backend: str, exc: Exception) -> str:
    tried = f"tried to create a slangpy {backend} device and got: {exc}"
    if backend == "vulkan":
        fix = ("install a Vulkan driver for your GPU, or for a machine without one Mesa's software "
               "Vulkan >= 25 (on Debian 12: `apt-get install -t bookworm-backports mesa-vulkan-drivers`; "
               "scripts/setup.sh does this), or pass --device cuda on NVIDIA")
    elif backend == "cuda":
        fix = "CUDA needs an NVIDIA GPU with its driver; use --device vulkan otherwise"
    else:
        fix = "use --device vulkan"
    return f"No GPU device: {tried}. Fix: {fix}."


_shared: dict[str, Gpu] = {}
_shared_lock = threading.Lock()


def get_gpu(backend: str | None = None) -> Gpu:
    """The process-wide device for ``backend`` (default: $SPIRULA_DEVICE or vulkan)."""
    backend = backend or os.environ.get("SPIRULA_DEVICE", "vulkan")
    with _shared_lock:
        if backend not in _shared:
            _shared[backend] = Gpu(backend)
        return _shared[backend]
