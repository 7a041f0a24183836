"""Phase arena: scratch buffers of phases whose lifetimes never overlap share memory.

A training step records, in order on one queue: the depth sort (``depth_sort``), binning
and the tile sort (``intersect``: the intersection keys and the radix sort's ping-pong
keys/values and histograms), the loss (``loss``: SSIM partials) and the backward pass
(``backward``: screen-space gradients). Each phase's buffers are written and consumed
inside the phase, so the phases can take their buffers from one set of *slots*: the i-th
buffer a phase asks for is slot i, and slot i is as large as the largest i-th request of
any phase. slangpy binds whole buffers (no sub-range views), hence slots rather than
offsets into one allocation; callers ask for their largest buffers first.

``SPIRULA_POOL_ALIAS=0`` gives every phase its own slots (no sharing), with the same API.
``SPIRULA_POOL_POISON=1`` (debug) fills every slot a phase used with 0xFF bytes when the
phase ends (NaN as float, 0xFFFFFFFF as uint), so a kernel that reads a phase's buffer
outside the phase sees garbage and a test comparing against aliasing off catches it.

Phases are opened with ``with arena.phase(enc, "name") as scratch: scratch.get(...)``;
opening a phase while another is open raises. Slot buffers that are outgrown stay alive
until :meth:`trim` (work recorded earlier may still use them), like ``BufferSet``.
"""

from __future__ import annotations

import os
import weakref
from contextlib import contextmanager

import numpy as np

from .pool import MiB, SPLAT_X_IMAGE


def env_flag(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    return v.strip().lower() not in ("0", "false", "no", "off")


class PhaseScratch:
    """The buffers of one open phase: ``get(name, nbytes)`` hands out the next slot."""

    def __init__(self, arena: "PhaseArena", phase: str):
        self.arena, self.phase = arena, phase
        self.named: dict[str, object] = {}
        self.used: list = []

    def get(self, name: str, nbytes: int):
        buf = self.named.get(name)
        if buf is not None:
            if buf.size < nbytes:
                raise ValueError(f"{self.phase}.{name}: asked again for {nbytes} bytes, first for {buf.size}")
            return buf
        buf = self.arena._slot(self.phase, len(self.used), max(int(nbytes), 16))
        self.used.append(buf)
        self.named[name] = buf
        return buf

    def __getitem__(self, name: str):
        return self.named[name]


class ArenaRecord:
    """What the VRAM report needs of an arena; holds no buffers, so it outlives the arena."""

    def __init__(self, name: str, alias: bool, poison: bool, arena: "PhaseArena"):
        self.name, self.alias, self.poison = name, alias, poison
        self.peak: dict[str, list[int]] = {}   # phase -> largest request per slot index
        self._arena = weakref.ref(arena)

    @property
    def alive(self) -> bool:
        return self._arena() is not None

    def stats(self) -> dict:
        """Bytes the phases need separately vs. shared (from the largest requests seen),
        and the bytes the arena holds now (0 once it is gone)."""
        separate = sum(sum(p) for p in self.peak.values())
        width = max((len(p) for p in self.peak.values()), default=0)
        shared = sum(max((p[i] for p in self.peak.values() if i < len(p)), default=0) for i in range(width))
        arena = self._arena()
        held = arena.held_bytes() if arena is not None else 0
        return {
            "name": self.name, "alias": self.alias, "poison": self.poison, "slots": width, "alive": arena is not None,
            "phases_mib": {p: sum(v) / MiB for p, v in sorted(self.peak.items())},
            "separate_mib": separate / MiB, "shared_mib": shared / MiB, "held_mib": held / MiB,
            "saved_mib": (separate - shared) / MiB if self.alias else 0.0,
        }


class PhaseArena:
    def __init__(self, gpu, name: str = "arena", category: str = SPLAT_X_IMAGE,
                 alias: bool | None = None, poison: bool | None = None):
        self.gpu, self.name, self.category = gpu, name, category
        self.alias = env_flag("SPIRULA_POOL_ALIAS", True) if alias is None else bool(alias)
        self.poison = env_flag("SPIRULA_POOL_POISON", False) if poison is None else bool(poison)
        self._shared: list = []                 # slots of every phase (aliasing on)
        self._own: dict[str, list] = {}         # phase -> its slots (aliasing off)
        self._retired: list = []
        self._last: dict[str, dict] = {}        # phase -> {name: buffer} of its last use
        self._active: str | None = None
        self._ff = np.zeros(0, np.uint8)
        self.record = ArenaRecord(name, self.alias, self.poison, self)
        self._peak = self.record.peak
        gpu.pool.arenas.append(self.record)

    @contextmanager
    def phase(self, enc, phase: str):
        """Open ``phase`` for recording into ``enc``; yields a :class:`PhaseScratch`."""
        if self._active is not None:
            raise RuntimeError(f"arena {self.name}: phase '{phase}' opened while '{self._active}' is open "
                               "(phases sharing an arena must not overlap)")
        self._active = phase
        scratch = PhaseScratch(self, phase)
        try:
            yield scratch
        finally:
            self._active = None
            self._last[phase] = scratch.named
            if self.poison and enc is not None:
                for buf in scratch.used:
                    self._poison(enc, buf)

    def _slot(self, phase: str, i: int, nbytes: int):
        peak = self._peak.setdefault(phase, [])
        peak.extend([0] * (i + 1 - len(peak)))
        peak[i] = max(peak[i], nbytes)
        slots = self._shared if self.alias else self._own.setdefault(phase, [])
        old = slots[i] if i < len(slots) else None
        if old is not None and old.size >= nbytes:
            return old
        size = nbytes if old is None else max(nbytes, old.size * 3 // 2)
        label = f"{self.name}.slot{i}" if self.alias else f"{self.name}.{phase}{i}"
        buf = self.gpu.buffer(size, label, category=self.category)
        if old is None:
            slots.append(buf)
        else:
            self._retired.append(old)
            slots[i] = buf
        return buf

    def _poison(self, enc, buf) -> None:
        if self._ff.size < buf.size:
            self._ff = np.full(buf.size, 0xFF, np.uint8)
        enc.upload_buffer_data(buf, 0, self._ff[: buf.size])

    def buffer(self, phase: str, name: str):
        """The buffer ``name`` had in the last use of ``phase`` (debugging and tests)."""
        return self._last[phase][name]

    def names(self) -> dict[str, list[str]]:
        return {p: list(d) for p, d in self._last.items()}

    def trim(self) -> None:
        """Drop outgrown slots (call only after waiting for the GPU)."""
        self._retired.clear()

    def outgrown_bytes(self) -> int:
        """Bytes of the outgrown slots, held until :meth:`trim`."""
        return sum(b.size for b in self._retired)

    def release(self) -> None:
        """Drop every slot (only when no recorded work is pending)."""
        self._shared.clear()
        self._own.clear()
        self._retired.clear()
        self._last.clear()

    def held_bytes(self) -> int:
        return sum(b.size for b in self._shared) + sum(b.size for s in self._own.values() for b in s) \
            + sum(b.size for b in self._retired)

    def stats(self) -> dict:
        return self.record.stats()
