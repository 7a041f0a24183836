"""NaN / Inf guard of the training step (shaders/optim/finite.slang).

One dispatch per step, recorded between the backward pass and Adam into the step's
command buffer: non-finite gradients are zeroed (the parameters and Adam's moments stay
finite) and counted, with the first and last step they were seen at, into words 1..3 of
a 16-byte flag block. The trainer keeps that block in its loss accumulator buffer, so the
flags come back with the loss read it already does every ``log_interval`` steps: no extra
host round trip per step.
"""

from __future__ import annotations

import numpy as np

from ..device import Gpu
from ..errors import NonFiniteError


class FiniteGuard:
    def __init__(self, gpu: Gpu):
        self.gpu = gpu
        self.kernel = gpu.kernel("optim/finite", "check_finite")

    def record(self, enc, grads, count: int, flags, step: int) -> None:
        """Check (and zero) the non-finite values among the first ``count`` floats of
        ``grads``; ``flags`` is a buffer of at least 4 uint32 (word 0 is left alone)."""
        if count > 0:
            self.kernel.dispatch(thread_count=[count, 1, 1], command_encoder=enc, grads=grads, flags=flags,
                                 count=count, step=step)


def decode(block: np.ndarray) -> tuple[int, int, int] | None:
    """(count, first step, last step) of non-finite gradients from the 4-word block
    (float32 or uint32 view), or None when there were none. Steps count from 0."""
    w = np.ascontiguousarray(block).view(np.uint32)
    if len(w) < 4 or w[1] == 0:
        return None
    return int(w[1]), int(0xFFFFFFFF - int(w[3])), int(w[2]) - 1


def raise_if_flagged(block: np.ndarray, where: str = "") -> None:
    """NonFiniteError naming the steps when the flag block records non-finite gradients."""
    bad = decode(block)
    if bad is None:
        return
    count, first, last = bad
    steps = f"step {first + 1}" if first == last else f"steps {first + 1} to {last + 1}"
    raise NonFiniteError(f"NaN/Inf in the gradients at {steps} ({count} value{'s' if count != 1 else ''}{where}); "
                         "the training stopped "
                         "before they reached the parameters of a checkpoint")
