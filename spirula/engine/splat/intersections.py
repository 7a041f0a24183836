"""How many tile/Gaussian intersections one rasterizer pass may bin, and the bands of tile
rows an image is split into when it has more (the large path of spirula/engine/splat/render.py).

The limit is the smallest of: the largest storage buffer the device allows (the tile keys
are 4-byte words), the tile sort's own limit, and a share (VRAM_FRACTION) of the device
memory and of the VRAM budget at BYTES_PER_INTERSECTION bytes each; ``$SPIRULA_MAX_INTERSECTIONS``
overrides it (tests use it to force the banded path on small scenes).
"""

from __future__ import annotations

import os

import numpy as np

from ..device import Gpu
from ..errors import IntersectionLimitError
from ..profile.driver import device_limits
from .sort import RadixSort

MAX_INTERSECTIONS_ENV = "SPIRULA_MAX_INTERSECTIONS"
# Vulkan's maxStorageBufferRange when the driver cannot be asked (spirula/engine/profile/driver.py
# needs the optional `vulkan` package): 1 GiB, Intel's (NVIDIA and AMD allow 4 GiB).
STORAGE_BUFFER_BYTES = 1 << 30
# Device bytes of one binned intersection: tile key and id (8), the tile sort's ping-pong
# pair (8) and its histograms (1/16 of the keys).
BYTES_PER_INTERSECTION = 16.25
VRAM_FRACTION = 0.25  # of the device memory (or $SPIRULA_VRAM_LIMIT) one pass's binning may take


def default_max_intersections(gpu: Gpu, sort: RadixSort) -> int:
    """Intersections one rasterizer pass may bin: ``$SPIRULA_MAX_INTERSECTIONS`` when set,
    else min(2^31 - 1, max storage-buffer range / 4 bytes, the tile sort's limit, a quarter
    of the device-local memory and of the VRAM budget at ~16 bytes an intersection)."""
    env = os.environ.get(MAX_INTERSECTIONS_ENV, "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"${MAX_INTERSECTIONS_ENV} must be a positive integer, not {env!r}")
        return int(env)
    lim = device_limits(gpu.device)
    limit = min(2**31 - 1, lim.get("max_storage_buffer_range", STORAGE_BUFFER_BYTES) // 4, sort.max_pairs)
    for memory in (lim.get("device_local_bytes"), gpu.vram_limit):
        if memory:
            limit = min(limit, int(memory * VRAM_FRACTION / BYTES_PER_INTERSECTION))
    return max(limit, 1)


def split_bands(rows: np.ndarray, limit: int) -> list[tuple[int, int, int]]:
    """Bands of consecutive tile rows, each with at most ``limit`` intersections (greedy,
    fewest bands). rows: [tiles_y] per-row intersection counts (ints). Returns
    [(row0, row1, count)] covering every row; raises IntersectionLimitError when one row
    alone exceeds ``limit``."""
    bands, start, acc = [], 0, 0
    for ty, c in enumerate(int(c) for c in rows):
        if c > limit:
            raise IntersectionLimitError(
                f"tile row {ty} alone has {c:,} tile intersections, more than one rasterizer pass may bin "
                f"({limit:,}, max_intersections_per_pass / ${MAX_INTERSECTIONS_ENV}): render at a lower "
                f"resolution or with fewer Gaussians")
        if acc + c > limit:
            bands.append((start, ty, acc))
            start, acc = ty, 0
        acc += c
    bands.append((start, len(rows), acc))
    return bands
