"""Print the Vulkan adapter index ($SPIRULA_ADAPTER) of NVML device ``argv[1]``, matched by
UUID (NVIDIA reports the same UUID to NVML and as Vulkan's deviceUUID, which slangpy's
AdapterInfo.luid carries where no Windows LUID exists). Creates no device, so it allocates
nothing on a GPU another benchmark is measuring. Falls back to the same index (with a
note on stderr) when no adapter matches.

    SPIRULA_ADAPTER=$(python3 benchmarks/gpu_map.py 1)
"""

from __future__ import annotations

import sys

import pynvml
import slangpy as spy


def main() -> None:
    index = int(sys.argv[1])
    pynvml.nvmlInit()
    uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    want = uuid.removeprefix("GPU-").replace("-", "").lower()
    adapters = spy.Device.enumerate_adapters(spy.DeviceType.vulkan)
    for i, a in enumerate(adapters):
        if bytes(a.luid).hex() == want:
            print(i)
            return
    print(index)
    print(f"gpu_map: no Vulkan adapter has NVML {index}'s UUID {uuid} "
          f"({[bytes(a.luid).hex() for a in adapters]}); using adapter {index}", file=sys.stderr)


if __name__ == "__main__":
    main()
