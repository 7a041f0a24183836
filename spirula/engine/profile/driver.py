"""Memory as the driver reports it, where that is available (no hard dependencies).

* ``device.report_heaps()``: slangpy's own heaps (staging/upload heaps; empty on some
  drivers, e.g. lavapipe).
* VK_EXT_memory_budget, read through the ``vulkan`` package (cffi bindings; the
  ``vkbudget`` extra, also in ``test``): per memory heap of the physical device its size,
  whether it is device-local, the driver's budget and usage. A Vulkan instance of its own
  (no layers) is created on first use, kept for the process and destroyed at exit; the
  physical device is the one whose name matches the slangpy device's adapter (so it works
  on the CUDA backend too), else the first one (said so in the result). Without the
  package, a Vulkan loader, the extension or Vulkan 1.1, the result carries
  ``vk_budget_error`` instead. What "usage" means is the driver's: NVIDIA and most GPU
  drivers count this process's allocations; lavapipe reports the whole machine's RAM in
  use (MemTotal - MemAvailable) against a budget equal to all of RAM.
* NVML (``pynvml``, when importable, NVIDIA only): device memory used and total.

Read once per report or snapshot (a single driver query, ~0.2 ms once the instance
exists), never per step.
"""

from __future__ import annotations

import atexit
import threading

from .pool import MiB

VK_EXT = "VK_EXT_memory_budget"
LAVAPIPE_NOTE = "lavapipe: usage is the whole machine's RAM in use (MemTotal - MemAvailable), budget all of RAM"


def driver_memory(device) -> dict:
    out: dict = {}
    try:
        heaps = device.report_heaps()
        out["heaps"] = [{"label": h.label, "allocated_mib": h.total_allocated / MiB,
                         "usage_mib": h.total_mem_usage / MiB, "allocations": h.num_allocations} for h in heaps]
    except Exception as exc:  # not every backend implements it
        out["heaps_error"] = str(exc)
    out.update(vk_budget(device))
    nv = _nvml()
    if nv is not None:
        out["nvml"] = nv
    return out


def _adapter_name(device) -> tuple[str | None, str | None]:
    """(adapter name, None) of a slangpy GPU device, or (None, why not)."""
    try:
        info = device.info
        if str(info.type).rsplit(".", 1)[-1] == "cpu":
            return None, "CPU device: no GPU memory heaps"
        return info.adapter_name, None
    except Exception as exc:
        return None, f"no adapter name from the device: {exc}"


def vk_budget(device) -> dict:
    """``{"vk_budget": {...}}`` for the GPU behind the slangpy ``device``, or ``{"vk_budget_error": why}``."""
    name, err = _adapter_name(device)
    if err is not None:
        return {"vk_budget_error": err}
    try:
        return _reader.read(name)
    except Exception as exc:  # a report must never fail on this
        return {"vk_budget_error": f"{type(exc).__name__}: {exc}"}


def device_limits(device) -> dict:
    """Limits of the GPU behind the slangpy ``device`` that size work (e.g. the rasterizer's
    intersections per pass): ``{"max_storage_buffer_range": bytes, "device_local_bytes":
    size of the largest device-local heap}``, or ``{"error": why}`` (then the caller
    assumes). One driver query once the reader's instance exists."""
    name, err = _adapter_name(device)
    if err is not None:
        return {"error": err}
    try:
        return _reader.limits(name)
    except Exception as exc:  # sizing falls back to assumptions, never fails on this
        return {"error": f"{type(exc).__name__}: {exc}"}


def prepare() -> None:
    """Create the Vulkan instance now (tens of ms, once) rather than at the first snapshot."""
    try:
        _reader.ensure_open()
    except Exception:  # never: the reader keeps its errors; a report says them
        pass


def close() -> None:
    """Destroy the cached Vulkan instance (a later read opens a new one)."""
    _reader.close()


class VkBudgetReader:
    """One VkInstance for the process and the physical devices found by adapter name."""

    def __init__(self):
        self._lock = threading.Lock()
        self.vk = None
        self.instance = None
        self.error: str | None = None      # why no instance; kept so a failure is not retried per snapshot
        self._devices: list = []            # (VkPhysicalDevice, name, api_version, has_budget)
        self._exit_registered = False

    def ensure_open(self) -> str | None:
        with self._lock:
            return self._open()

    def _open(self) -> str | None:
        if self.instance is not None or self.error is not None:
            return self.error
        try:
            import vulkan as vk  # optional; raises OSError too when no Vulkan loader (libvulkan) is found
        except Exception as exc:
            self.error = (f"the 'vulkan' Python package is not usable ({type(exc).__name__}: {exc}); "
                          f"pip install 'spirula-studio[vkbudget]'")
            return self.error
        try:
            ext_names = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(None)}
            exts, flags = [], 0
            if "VK_KHR_portability_enumeration" in ext_names:  # MoltenVK lists its devices only with it
                exts.append("VK_KHR_portability_enumeration")
                flags |= vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
            app = vk.VkApplicationInfo(pApplicationName="spirula-vram", applicationVersion=1,
                                       pEngineName="spirula", engineVersion=1, apiVersion=vk.VK_MAKE_VERSION(1, 1, 0))
            create = vk.VkInstanceCreateInfo(pApplicationInfo=app, flags=flags,
                                             ppEnabledExtensionNames=exts or None)
            instance = vk.vkCreateInstance(create, None)
        except Exception as exc:
            self.error = f"could not create a Vulkan instance ({type(exc).__name__}: {exc})"
            return self.error
        try:
            devices = []
            for pd in vk.vkEnumeratePhysicalDevices(instance):
                props = vk.vkGetPhysicalDeviceProperties(pd)
                has = any(e.extensionName == VK_EXT for e in vk.vkEnumerateDeviceExtensionProperties(pd, None))
                devices.append((pd, str(props.deviceName), int(props.apiVersion), has))
        except Exception as exc:
            vk.vkDestroyInstance(instance, None)
            self.error = f"could not list the Vulkan physical devices ({type(exc).__name__}: {exc})"
            return self.error
        self.vk, self.instance, self._devices = vk, instance, devices
        if not self._exit_registered:
            atexit.register(self.close)
            self._exit_registered = True
        return None

    def close(self) -> None:
        with self._lock:
            if self.instance is not None:
                try:
                    self.vk.vkDestroyInstance(self.instance, None)
                except Exception:
                    pass
            self.instance, self._devices = None, []  # a later read opens a new one

    def _picked(self, adapter_name: str):
        """(:meth:`_pick`'s tuple, None) or (None, why no device); with the lock held."""
        err = self._open()
        if err is None and not self._devices:
            err = "the Vulkan loader lists no physical device"
        return (None, err) if err is not None else (self._pick(adapter_name), None)

    def read(self, adapter_name: str) -> dict:
        with self._lock:
            picked, err = self._picked(adapter_name)
            if err is not None:
                return {"vk_budget_error": err}
            pd, name, api, has, match = picked
            head = {"physical_device": name, "adapter": adapter_name, "matched_by": match,
                    "same_name_devices": sum(1 for d in self._devices if d[1] == name)}
            if name.startswith("llvmpipe"):
                head["note"] = LAVAPIPE_NOTE
            if not has:
                return {"vk_budget_error": f"{name} does not advertise {VK_EXT}", "vk_budget_device": head}
            if api < self.vk.VK_MAKE_VERSION(1, 1, 0):
                return {"vk_budget_error": f"{name} supports only Vulkan 1.0 (vkGetPhysicalDeviceMemoryProperties2 "
                                           f"needs 1.1)", "vk_budget_device": head}
            try:
                heaps = self._query(pd)
            except Exception as exc:
                return {"vk_budget_error": f"vkGetPhysicalDeviceMemoryProperties2 failed ({type(exc).__name__}: {exc})",
                        "vk_budget_device": head}
        return {"vk_budget": dict(head, heaps=heaps)}

    def limits(self, adapter_name: str) -> dict:
        """See :func:`device_limits`."""
        with self._lock:
            picked, err = self._picked(adapter_name)
            if err is not None:
                return {"error": err}
            pd, vk = picked[0], self.vk
            props = vk.vkGetPhysicalDeviceProperties(pd)  # keep it: cffi frees it with its fields
            storage = int(props.limits.maxStorageBufferRange)
            mp = vk.vkGetPhysicalDeviceMemoryProperties(pd)
            local = [int(mp.memoryHeaps[i].size) for i in range(mp.memoryHeapCount)
                     if mp.memoryHeaps[i].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT]
        return {"max_storage_buffer_range": storage, "device_local_bytes": max(local, default=0)}

    def _pick(self, adapter_name: str):
        want = " ".join(adapter_name.split()).lower()
        for how, ok in (("name", lambda n: n == want),
                        ("name (partial)", lambda n: bool(want) and (want in n or n in want))):
            for pd, name, api, has in self._devices:
                if ok(" ".join(name.split()).lower()):
                    return pd, name, api, has, how
        pd, name, api, has = self._devices[0]
        return pd, name, api, has, f"first Vulkan device (no name matches '{adapter_name}')"

    def _query(self, pd) -> list[dict]:
        vk = self.vk
        ffi = vk.ffi
        budget = ffi.new("VkPhysicalDeviceMemoryBudgetPropertiesEXT*")
        budget.sType = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT
        props = ffi.new("VkPhysicalDeviceMemoryProperties2*")
        props.sType = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2
        props.pNext = budget
        vk.vkGetPhysicalDeviceMemoryProperties2(pd, props)
        mp = props.memoryProperties
        return [{"index": i, "device_local": bool(mp.memoryHeaps[i].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT),
                 "size_mib": mp.memoryHeaps[i].size / MiB, "budget_mib": budget.heapBudget[i] / MiB,
                 "usage_mib": budget.heapUsage[i] / MiB}
                for i in range(mp.memoryHeapCount)]


_reader = VkBudgetReader()


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
