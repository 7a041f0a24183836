"""Growable named GPU buffers: reallocated (never shrunk) when a larger size is asked for."""

from __future__ import annotations

import slangpy as spy

from ..device import Gpu


class BufferSet:
    """A set of scratch buffers, each sized in bytes by capacity with 25% headroom on growth."""

    def __init__(self, gpu: Gpu, prefix: str):
        self.gpu = gpu
        self.prefix = prefix
        self._bufs: dict[str, spy.Buffer] = {}

    def get(self, name: str, nbytes: int) -> spy.Buffer:
        buf = self._bufs.get(name)
        if buf is None or buf.size < nbytes:
            grow = nbytes if buf is None else int(nbytes * 1.25)
            buf = self.gpu.buffer(grow, label=f"{self.prefix}.{name}")
            self._bufs[name] = buf
        return buf

    def nbytes(self) -> int:
        return sum(b.size for b in self._bufs.values())
