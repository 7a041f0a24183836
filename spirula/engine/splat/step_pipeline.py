"""Training steps in flight on the GPU, and the intersection capacity they are recorded with.

A training step is one command buffer with no host read inside (spirula/engine/splat/render.py,
capacity mode). Its tile-sort buffers are sized before the step's intersection count
exists, from the counts of earlier steps, which come back through a small host-visible
ring: each step copies its count into its own slot, and the host reads that slot only once
the step's submission has finished, while the next step already runs. So the host never
waits for the step it just submitted, only for the one before it (``depth`` = 2 steps in
flight), and the GPU is never idle while the host records.

Capacity: ``margin`` x the largest count of the last ``window`` steps (plus a little), and
exact (one synchronous count, :meth:`Rasterizer.prepare`) when no count is known yet. A step
whose count outgrows its capacity is cut at the capacity and skipped on the GPU (backward
and Adam read the count, see ``step_overflowed`` in shaders/common/util.slang); the host
learns it a step later, widens the capacity, and the caller trains on that camera again.
What a skipped step still leaves: its loss counts in the logged mean, and the host's Adam
step counter (bias correction) advanced. When the host learns of it depends on when it
drains, so with overflows the camera order depends on the drain points (checkpoints, the
studio's slices); without overflows the capacity changes nothing in the results.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..device import Gpu


@dataclass
class InFlight:
    submit_id: int
    slot: int
    camera: int
    capacity: int | None  # None: exact mode (no overflow possible)
    loss_tag: object = None  # set: the step also copied a 4-word loss block to its slot (loss_offset)


class StepPipeline:
    """Bookkeeping of submitted training steps (see the module docstring).

    ``wait(submit_id)`` blocks until a submission has finished (default ``Gpu.wait_for``;
    the studio installs a polling wait that releases the GIL).
    """

    SLOT_BYTES = 48  # the intersection count in word 0; a loss block in words 4..11 (loss_offset)
    LOSS_BYTES = 32  # the loss block: the trainer's loss accumulator's first 8 words

    def __init__(self, gpu: Gpu, depth: int = 2, margin: float = 1.25, window: int = 200):
        if not 1 <= depth <= 8:
            raise ValueError("depth must be in 1..8")
        self.gpu, self.depth, self.margin = gpu, int(depth), float(margin)
        self.slots = 8  # read-back slots: more than any sensible depth (checked at submit)
        self.readback = gpu.readback_buffer(self.SLOT_BYTES * self.slots, "train.counts_readback")
        self.in_flight: deque[InFlight] = deque()
        self.counts: deque[int] = deque(maxlen=int(window))
        self.overflows = 0          # steps skipped because their intersections outgrew the capacity
        self.loss_blocks: list[tuple[object, np.ndarray]] = []  # (loss_tag, uint32 [8]) of retired steps
        self._next_slot = 0
        self.wait: Callable[[int], None] = lambda submit_id: gpu.wait_for(submit_id)  # as installed when waiting

    # --- capacity ------------------------------------------------------------------------
    def capacity(self) -> int | None:
        """Intersection capacity for the next step; None when it must be counted exactly."""
        if not self.counts:
            return None
        c = math.ceil(self.margin * max(self.counts)) + 1024
        return -(-c // 4096) * 4096  # coarse steps: the scratch buffers rarely regrow

    def rescale(self, factor: float) -> None:
        """Scale the remembered counts (e.g. by new / old Gaussian count after densification)."""
        if factor > 0 and math.isfinite(factor):
            self.counts = deque((int(math.ceil(c * factor)) for c in self.counts), maxlen=self.counts.maxlen)

    def forget_counts(self) -> None:
        """Drop the remembered counts (the next step is counted exactly): the image size changed."""
        self.counts.clear()

    @property
    def last_count(self) -> int:
        """Intersection count of the latest finished step (scaled if a densification
        followed it); 0 before any."""
        return self.counts[-1] if self.counts else 0

    def observe(self, count: int) -> None:
        """Remember one step's true intersection count (sizes the next capacities)."""
        self.counts.append(int(count))

    # --- submissions ---------------------------------------------------------------------
    def slot_offset(self) -> int:
        """Byte offset in :attr:`readback` where the next step copies its count."""
        return self._next_slot * self.SLOT_BYTES

    def loss_offset(self) -> int:
        """Byte offset in :attr:`readback` where the next step may copy a LOSS_BYTES loss block
        (read back a step late, like the count: see ``loss_blocks``)."""
        return self.slot_offset() + 16

    def submitted(self, submit_id: int, camera: int, capacity: int | None, loss_tag: object = None) -> None:
        """Register a submitted step (its count goes to :meth:`slot_offset`'s slot). With a
        ``loss_tag``, the step copied a loss block to :meth:`loss_offset`; once it retires,
        ``(loss_tag, block)`` is appended to :attr:`loss_blocks`."""
        if len(self.in_flight) >= self.slots:
            raise RuntimeError(f"more than {self.slots} training steps in flight (depth {self.depth})")
        self.in_flight.append(InFlight(submit_id, self._next_slot, camera, capacity, loss_tag))
        self._next_slot = (self._next_slot + 1) % self.slots

    def retire(self, keep: int | None = None) -> list[int]:
        """Wait for the oldest steps until at most ``keep`` (default ``depth - 1``) are in
        flight; read their counts. Returns the cameras of retired steps that overflowed
        (skipped on the GPU): train on them again."""
        keep = self.depth - 1 if keep is None else keep
        redo = []
        while len(self.in_flight) > keep:
            f = self.in_flight.popleft()
            self.wait(f.submit_id)
            words = self.gpu.read_finished(self.readback, np.uint32)[f.slot * self.SLOT_BYTES // 4:]
            count = int(words[0])
            if f.loss_tag is not None:
                self.loss_blocks.append((f.loss_tag, words[4:4 + self.LOSS_BYTES // 4].copy()))
            self.observe(count)
            if f.capacity is not None and count > f.capacity:
                self.overflows += 1
                redo.append(f.camera)
        return redo

    def drain(self) -> list[int]:
        """Retire every step in flight (see :meth:`retire`)."""
        return self.retire(keep=0)

    # --- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """The remembered counts and the overflow tally (nothing may be in flight)."""
        if self.in_flight:
            raise RuntimeError("state_dict() with steps in flight: drain() first")
        return {"counts": [int(c) for c in self.counts], "overflows": self.overflows}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (an empty dict: count the next step exactly)."""
        self.counts = deque((int(c) for c in state.get("counts", [])), maxlen=self.counts.maxlen)
        self.overflows = int(state.get("overflows", 0))
