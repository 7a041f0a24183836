"""The one shared slangpy device of the process, and the kernel loader.

Vulkan is the default backend; CUDA (NVIDIA) and CPU can be forced. Shaders are found in
the source checkout (``<repo>/shaders``) or, when installed from a wheel, in the
``spirula_shaders`` package. Kernels are specialised with Slang link-time constants
(``extern static const``), one compiled pipeline per distinct set of constants.

Every buffer is created through :meth:`Gpu.buffer` and registered in ``gpu.pool`` (VRAM
accounting by category, spirula/engine/profile/pool.py). Recording goes through the helpers
(``encoder``, ``submit``, ``read``, ``write``, ``copy``, ``clear``, ``wait_idle``) so the
profiler (spirula/engine/profile) can time it; while profiling is off (``gpu.prof is None``) each
helper costs one attribute check and kernels dispatch through slangpy's own method.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import numpy as np
import slangpy as spy

from . import profile as _profile
from .errors import CPU_REFUSAL, DeviceError, DeviceMemoryError
from .profile.pool import VramPool

BACKENDS = ("vulkan", "cuda")  # slangpy's cpu device cannot compile the subgroup (wave) kernels
_RW = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
_RW_COPY = _RW | spy.BufferUsage.copy_source | spy.BufferUsage.copy_destination


def shader_dir() -> Path:
    """Folder holding the .slang sources (checkout first, then the installed package)."""
    checkout = Path(__file__).resolve().parent.parent.parent / "shaders"
    if checkout.is_dir() and any(checkout.rglob("*.slang")):
        return checkout
    spec = importlib.util.find_spec("spirula_shaders")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    raise DeviceError("Slang shader sources not found: neither <repo>/shaders nor the spirula_shaders package")


# Workgroups per dimension of one dispatch that Vulkan guarantees (maxComputeWorkGroupCount;
# Intel and lavapipe stop there, NVIDIA allows 2^31 - 1): larger grids go 2D or loop.
MAX_DISPATCH_GROUPS = 65535


def dispatch_grid(items: int, group: int) -> tuple[list[int], int]:
    """(thread_count, groups_x) of a dispatch over ``items`` in workgroups of ``group``
    threads: ceil(items / group) workgroups laid out in rows of at most MAX_DISPATCH_GROUPS,
    so the kernel's first item is (gid.y * groups_x + gid.x) * group (past the 1D limit a
    grid goes 2D)."""
    groups = max(1, -(-items // group))
    gx = min(groups, MAX_DISPATCH_GROUPS)
    return [gx * group, -(-groups // gx), 1], gx


class Gpu:
    """A slangpy device plus a cache of compiled kernels and buffer helpers."""

    def __init__(self, backend: str = "vulkan"):
        if backend == "cpu":
            raise DeviceError(CPU_REFUSAL)
        if backend not in BACKENDS:
            raise DeviceError(f"unknown device '{backend}': choose one of {', '.join(BACKENDS)}")
        kind = {"vulkan": spy.DeviceType.vulkan, "cuda": spy.DeviceType.cuda}[backend]
        # `precise` exists in SPIR-V only (shaders/common/footprint.slang)
        defines = {} if backend == "vulkan" else {"PRECISE": ""}
        opts = {"include_paths": [str(shader_dir())], "defines": defines}
        if backend == "cuda":
            opts["floating_point_mode"] = _cuda_fp_mode()
        opts = spy.SlangCompilerOptions(opts)
        self.adapter_luid = _chosen_adapter(kind, backend)
        try:
            self.device = spy.Device(type=kind, compiler_options=opts, enable_hot_reload=False,
                                     adapter_luid=self.adapter_luid, enable_rhi_validation=_rhi_validation(),
                                     shader_cache_path=_shader_cache(backend))
        except Exception as exc:  # slangpy raises RuntimeError with a driver message
            raise DeviceError(_device_help(backend, exc)) from exc
        self.backend = backend
        self._kernels: dict[tuple, Kernel] = {}
        self._lock = threading.Lock()
        self.pool = VramPool()
        # testing aid: allocations beyond this many bytes in the pool fail as if the device
        # were out of memory ($SPIRULA_VRAM_LIMIT, bytes, K/M/G suffixes allowed)
        self.vram_limit: int | None = _parse_bytes(os.environ.get("SPIRULA_VRAM_LIMIT"))
        self.prof = None  # spirula.engine.profile.profiler.Profiler while profiling is on
        # threads of one 1D dispatch of 256-wide workgroups (the per-Gaussian kernels'
        # ceiling: 16,776,960 where the driver allows only the guaranteed 65,535 workgroups)
        try:
            groups_x = int(self.device.info.limits.max_compute_dispatch_thread_groups.x)
        except Exception:  # a backend without the limit: assume the guaranteed minimum
            groups_x = MAX_DISPATCH_GROUPS
        self.max_items_1d = max(groups_x, MAX_DISPATCH_GROUPS) * 256
        _profile.gpu_created(self)

    @property
    def adapter(self) -> str:
        return f"{self.device.info.adapter_name} ({self.device.info.api_name})"

    @property
    def software(self) -> bool:
        """Whether the device is a CPU implementation (lavapipe): smaller probes, lower
        frame-rate targets."""
        try:
            return bool(self.device.has_feature(spy.Feature.software_device))
        except (AttributeError, RuntimeError):  # a slangpy without the feature flag
            return False

    def check_gaussians(self, n: int, what: str) -> None:
        """Raise DeviceError when ``n`` Gaussians pass what one per-Gaussian dispatch of this
        GPU covers (:attr:`max_items_1d`); ``what`` names the source, e.g. "--max-gaussians"."""
        if n > self.max_items_1d:
            raise DeviceError(
                f"{what}: {n:,} Gaussians, but {self.adapter} runs at most {self.max_items_1d:,} threads in one "
                f"dispatch (the per-Gaussian kernels' limit on this GPU): use at most {self.max_items_1d:,} "
                f"Gaussians here (--max-gaussians), or a GPU that allows larger dispatches")

    # --- kernels -----------------------------------------------------------------------
    def kernel(self, module: str, entry: str, **constants) -> "Kernel":
        """Compiled compute kernel ``entry`` of ``shaders/<module>.slang``.

        ``constants`` set the module's ``extern static const`` values (ints, floats, bools).
        The result's ``dispatch`` is slangpy's ``ComputeKernel.dispatch`` (timed while
        profiling is on).
        """
        key = (module, entry, tuple(sorted(constants.items())))
        with self._lock:
            k = self._kernels.get(key)
            if k is None:
                extra = "\n".join(f"export static const {_slang_type(v)} {n} = {_slang_value(v)};" for n, v in sorted(constants.items()))
                try:
                    prog = self.device.load_program(module + ".slang", [entry], additional_source=extra or None)
                    raw = self.device.create_compute_kernel(prog)
                except Exception as exc:
                    raise DeviceError(f"compiling shaders/{module}.slang:{entry} failed: {exc}") from exc
                # cached call-site arguments (Kernel.record) on both back ends; on CUDA they took
                # mouse from 2.53 to 1.49 s/1k steps on an H100 with the same loss curve
                # (2026-12-06); $SPIRULA_CUDA_BINDINGS=dispatch records through slangpy's own
                # dispatch there instead (to compare)
                cached = self.backend == "vulkan" or os.environ.get("SPIRULA_CUDA_BINDINGS") != "dispatch"
                k = Kernel(raw, f"{module}:{entry}", self.device if cached else None)
                if self.prof is not None:
                    k.dispatch = self.prof.dispatcher(k)
                    k.profiled = True
                self._kernels[key] = k
            return k

    def _free_unreferenced(self) -> None:
        """Free buffers only the kernels' cached arguments (and the pool) still refer to."""
        self.forget_bindings()
        self.pool.collect()

    def forget_bindings(self) -> None:
        """Drop every kernel's cached call-site arguments (:meth:`Kernel.record`), which hold
        references to the buffers last bound: call before replacing large buffers so the old
        ones are freed, and only when no recording is in progress."""
        with self._lock:
            for k in self._kernels.values():
                k._sites.clear()

    # --- profiler hooks --------------------------------------------------------------------
    def attach_profiler(self, prof) -> None:
        """Route kernels and the helpers through ``prof`` (spirula.engine.profile.profiler.Profiler)."""
        with self._lock:
            self.prof = prof
            for k in self._kernels.values():
                k.dispatch = prof.dispatcher(k)
                k.profiled = True

    def detach_profiler(self) -> None:
        with self._lock:
            self.prof = None
            for k in self._kernels.values():
                k.dispatch = k.raw.dispatch
                k.profiled = False

    # --- buffers -----------------------------------------------------------------------
    def buffer(self, nbytes: int, label: str = "", category: str | None = None) -> spy.Buffer:
        """Uninitialised device buffer of ``nbytes`` (rounded up to 16, at least 16),
        registered in the VRAM pool under ``category`` (default: from the label prefix,
        see spirula/engine/profile/pool.py)."""
        size = max(16, (int(nbytes) + 15) // 16 * 16)
        if self.vram_limit is not None and self.pool.total + size > self.vram_limit:
            self._free_unreferenced()
            if self.pool.total + size > self.vram_limit:
                raise DeviceMemoryError(f"out of device memory: allocating {size / 2**20:.2f} MiB for "
                                        f"'{label or '?'}' would pass the limit of {self.vram_limit / 2**20:.2f} MiB "
                                        f"($SPIRULA_VRAM_LIMIT)")
        try:
            try:
                buf = self.device.create_buffer(size=size, usage=_RW_COPY, label=label)
            except RuntimeError:  # once more, after freeing what nothing but caches refers to
                self._free_unreferenced()
                buf = self.device.create_buffer(size=size, usage=_RW_COPY, label=label)
        except RuntimeError as exc:  # slangpy: "createBuffer(...) failed with error: ... (SLANG_FAIL)"
            raise DeviceMemoryError(f"out of device memory: allocating {size / 2**20:.2f} MiB for "
                                    f"'{label or '?'}' failed ({str(exc).splitlines()[0]})") from exc
        return self.pool.add(buf, label, category)

    def upload(self, array: np.ndarray, label: str = "", category: str | None = None) -> spy.Buffer:
        """Device buffer holding a copy of ``array`` (C-contiguous, any dtype)."""
        a = np.ascontiguousarray(array)
        buf = self.buffer(a.nbytes, label, category)
        if a.nbytes:
            self.write(buf, a)
        return buf

    def write(self, buf: spy.Buffer, array: np.ndarray) -> None:
        """Copy ``array`` (C-contiguous) into the start of ``buf`` (host -> device)."""
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if self.prof is None:
            buf.copy_from_numpy(data)
        else:
            self.prof.write(buf, data)

    def zeros(self, nbytes: int, label: str = "", category: str | None = None) -> spy.Buffer:
        buf = self.buffer(nbytes, label, category)
        enc = self.encoder()
        self.clear(enc, buf)
        self.submit(enc)
        return buf

    def read(self, buf: spy.Buffer, dtype, count: int | None = None, shape=None) -> np.ndarray:
        """Copy a buffer back to the host (waits for the GPU)."""
        raw = (buf.to_numpy() if self.prof is None else self.prof.read(buf)).view(np.uint8)
        a = raw.view(dtype)
        n = count if count is not None else (int(np.prod(shape)) if shape is not None else a.size)
        a = a[:n].copy()
        return a.reshape(shape) if shape is not None else a

    def readback_buffer(self, nbytes: int, label: str = "") -> spy.Buffer:
        """Host-visible buffer (read-back memory) that kernels' results can be copied into
        and the host reads without waiting for the whole GPU (:meth:`read_finished`)."""
        return self.device.create_buffer(size=max(16, int(nbytes)), usage=spy.BufferUsage.copy_destination,
                                         memory_type=spy.MemoryType.read_back, label=label)

    def read_finished(self, buf: spy.Buffer, dtype) -> np.ndarray:
        """Host copy of a :meth:`readback_buffer` whose writes have finished (the caller
        waited for their submission): no wait for the GPU."""
        raw = buf.to_numpy() if self.prof is None else self.prof.read(buf, wait=False)
        return raw.view(np.uint8).view(dtype).copy()

    def encoder(self) -> spy.CommandEncoder:
        enc = self.device.create_command_encoder()
        if self.prof is not None:
            self.prof.begin(enc)
        return enc

    def submit(self, enc: spy.CommandEncoder) -> int:
        if self.prof is None:
            return self.device.submit_command_buffer(enc.finish())
        return self.prof.submit(enc)

    def copy(self, enc: spy.CommandEncoder, dst: spy.Buffer, dst_offset: int, src: spy.Buffer, src_offset: int,
             size: int) -> None:
        """Record a device -> device copy of ``size`` bytes."""
        if self.prof is None:
            enc.copy_buffer(dst, dst_offset, src, src_offset, size)
        else:
            self.prof.copy(enc, dst, dst_offset, src, src_offset, size)

    def clear(self, enc: spy.CommandEncoder, buf: spy.Buffer) -> None:
        """Record a memset of ``buf`` to zero."""
        if self.prof is None:
            enc.clear_buffer(buf)
        else:
            self.prof.clear(enc, buf)

    def wait_for(self, submit_id: int) -> None:
        """Block until submission ``submit_id`` (from :meth:`submit`) has finished; later
        submissions may still run."""
        if self.prof is None:
            self.device.wait_for_submit(submit_id)
        else:
            self.prof.wait_for(submit_id)

    def wait_idle(self) -> None:
        """Block until the GPU has finished all submitted work."""
        if self.prof is None:
            self.device.wait_for_idle()
        else:
            self.prof.wait_idle()


class Kernel:
    """A compiled kernel. ``dispatch`` is an instance attribute: slangpy's bound
    ``ComputeKernel.dispatch`` while profiling is off, the profiler's timed wrapper while
    it is on. :meth:`record` is the cheap path for dispatches repeated every training step.
    Other attributes come from the slangpy kernel."""

    __slots__ = ("raw", "name", "dispatch", "profiled", "_device", "_sites")

    def __init__(self, raw: spy.ComputeKernel, name: str, device: spy.Device | None = None):
        self.raw = raw
        self.name = name          # "module:entry", shared by every specialisation
        self.dispatch = raw.dispatch
        self.profiled = False
        self._device = device
        self._sites: dict[str, _Site] = {}

    def record(self, enc: spy.CommandEncoder, thread_count, site: str = "", **args) -> None:
        """Record one dispatch into ``enc``, like ``dispatch(thread_count=..., command_encoder=
        enc, **args)``, through a root shader object kept for ``site`` (a label of the call
        site) that remembers its arguments: only those that changed since the site's last
        record are written (binding every argument is most of a dispatch's host cost; a
        training step records the same ~30 dispatches with the same buffers each time).
        Arguments are snapshotted when the dispatch is recorded. One recording thread per
        kernel. While profiling, the profiler's timed ``dispatch`` is used instead."""
        if self.profiled or self._device is None:
            self.dispatch(thread_count=thread_count, command_encoder=enc, **args)
            return
        st = self._sites.get(site)
        if st is None:
            st = self._sites[site] = _Site(self._device, self.raw.program)
        st.set(args)
        p = enc.begin_compute_pass()
        p.bind_pipeline(self.raw.pipeline, st.root)
        p.dispatch(thread_count)
        p.end()

    def __getattr__(self, attr):
        return getattr(self.raw, attr)


class _Site:
    """A kernel's root shader object for one call site, and the arguments it holds."""

    __slots__ = ("root", "entry", "values")

    def __init__(self, device: spy.Device, program):
        self.root = device.create_root_shader_object(program)
        self.entry = spy.ShaderCursor(self.root).find_entry_point(0)
        self.values: dict[str, object] = {}

    def set(self, args: dict) -> None:
        values, entry = self.values, self.entry
        for name, v in args.items():
            old = values.get(name, _UNSET)
            if old is v:
                continue
            if type(v) in (int, float) and type(old) is type(v) and old == v:
                continue
            entry[name] = v
            values[name] = v


_UNSET = object()


def _rhi_validation() -> bool:
    """slang-rhi's validation layer, which slangpy turns on by default, checks every command on
    the host; a debugging aid, off unless $SPIRULA_RHI_VALIDATION=1."""
    return os.environ.get("SPIRULA_RHI_VALIDATION", "").strip().lower() in ("1", "true", "on")


def _shader_cache(backend: str) -> str | None:
    """slang-rhi's persistent cache of compiled kernels (nvrtc's on CUDA, the driver's on
    Vulkan), so a second run need not compile them again: $SPIRULA_SHADER_CACHE, a folder
    (kernels go under <folder>/<backend>), or "default" for $XDG_CACHE_HOME (else ~/.cache)
    /spirula-studio/shaders. Opt-in (None: no cache) until its gain and its sharing between
    processes are measured on a GPU; None too when the folder cannot be made."""
    chosen = os.environ.get("SPIRULA_SHADER_CACHE", "").strip()
    if chosen.lower() in ("", "off", "0", "none"):
        return None
    if chosen.lower() == "default":
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spirula-studio" / "shaders"
    else:
        root = Path(chosen)
    try:
        (root / backend).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(root / backend)


def _cuda_fp_mode():
    """Float mode of the CUDA backend's kernels: "fast" (default) makes nvrtc compile with
    --use_fast_math, approximate division, exp and sqrt with denormals flushed, as NVIDIA's
    Vulkan driver compiles SPIR-V's float ops; nvrtc's IEEE division alone took
    rasterize_backward from 64 to 82 registers (docs/cuda-backend.md).
    $SPIRULA_CUDA_FP_MODE=default|precise gives nvrtc's IEEE defaults back (to compare)."""
    name = os.environ.get("SPIRULA_CUDA_FP_MODE", "fast").strip() or "fast"
    modes = {m.name.rstrip("_"): m for m in spy.SlangFloatingPointMode}
    if name not in modes:
        raise DeviceError(f"$SPIRULA_CUDA_FP_MODE={name}: choose one of {', '.join(sorted(modes))}")
    return modes[name]


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


def _parse_bytes(text: str | None, name: str = "SPIRULA_VRAM_LIMIT") -> int | None:
    """'123', '64K', '1.5M', '2G' -> bytes; None or '' -> None; DeviceError naming the
    variable ``name`` for anything else."""
    if not text:
        return None
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        return int(float(t.rstrip("KMG")) * mult)
    except ValueError:
        raise DeviceError(f"{name}={text!r}: not a byte count (e.g. 64M)") from None


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


def _chosen_adapter(kind, backend: str) -> list[int] | None:
    """The LUID of adapter ``$SPIRULA_ADAPTER`` (an index into the backend's adapter list,
    for machines with several GPUs); None (the driver's default) when unset. Raises
    DeviceError naming the adapters when the index is not one of them."""
    chosen = os.environ.get("SPIRULA_ADAPTER", "").strip()
    if not chosen:
        return None
    adapters = spy.Device.enumerate_adapters(kind)
    names = ", ".join(f"{i}: {a.name}" for i, a in enumerate(adapters)) or "none"
    if not chosen.isdigit() or int(chosen) >= len(adapters):
        raise DeviceError(f"$SPIRULA_ADAPTER={chosen} is not an adapter of {backend} (adapters: {names})")
    return list(adapters[int(chosen)].luid)


_shared: dict[str, Gpu] = {}
_shared_lock = threading.Lock()


def get_gpu(backend: str | None = None) -> Gpu:
    """The process-wide device for ``backend`` (default: $SPIRULA_DEVICE or vulkan)."""
    backend = backend or os.environ.get("SPIRULA_DEVICE", "vulkan")
    with _shared_lock:
        if backend not in _shared:
            _shared[backend] = Gpu(backend)
        return _shared[backend]
