"""NaN / Inf guard of the training step: the host side.

The check itself is folded into Adam (guard_gradient in shaders/optim/adam_math.slang,
called by the training step's fused projection backward + Adam), which reads every
gradient anyway: a non-finite gradient is used as 0 (the parameters and Adam's
moments stay finite) and counted, with the first and last step it was seen at, into words
1..3 of a 16-byte flag block. The trainer keeps that block in its loss accumulator buffer,
so the flags come back with the loss read it already does every ``log_interval`` steps: no
extra pass over the gradients and no extra host round trip per step.
"""

from __future__ import annotations

import numpy as np

from ..errors import NonFiniteError


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
