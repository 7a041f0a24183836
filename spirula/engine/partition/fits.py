"""Whether a training run fits the device, for `spirula run --partition auto`
(spirula/engine/partition/auto.py) and the merge's fine-tune (spirula/engine/partition/merge.py)."""

from __future__ import annotations

from pathlib import Path

from ..config import RunConfig


def device_budget(dataset: Path, cfg: RunConfig) -> tuple[int, int] | None:
    """(bytes needed, bytes available) when the run does not fit the device; None when it
    fits or when the device memory is unknown. Available: the device's memory less what
    this process holds already (the studio's viewer, a job before)."""
    from ..device import get_gpu
    from ..preflight import device_available, estimate

    gpu = get_gpu(cfg.device)
    have, _ = device_available(gpu)
    if have is None:
        return None
    have -= gpu.pool.live_bytes()
    need = estimate(dataset, cfg).device()
    return (need, have) if need > have else None
