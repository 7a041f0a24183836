"""PyInstaller runtime hook (macOS bundle): point the bundled Vulkan loader at the bundled
MoltenVK driver, unless the user chose a driver ($VK_ICD_FILENAMES / $VK_DRIVER_FILES)."""

import os
import sys

if sys.platform == "darwin" and not (os.environ.get("VK_ICD_FILENAMES") or os.environ.get("VK_DRIVER_FILES")):
    _icd = os.path.join(sys._MEIPASS, "vulkan", "icd.d", "MoltenVK_icd.json")
    if os.path.isfile(_icd):
        os.environ["VK_DRIVER_FILES"] = _icd
        os.environ["VK_ICD_FILENAMES"] = _icd  # loaders older than 1.3.207
    # slangpy opens the loader by name ("libvulkan.1.dylib"); load the bundled one first, by path
    _loader = os.path.join(sys._MEIPASS, "vulkan", "libvulkan.1.dylib")
    if os.path.isfile(_loader):
        import ctypes

        ctypes.CDLL(_loader, mode=ctypes.RTLD_GLOBAL)
