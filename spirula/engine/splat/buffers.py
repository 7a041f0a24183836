"""Growable named GPU scratch buffers, reused across steps."""

from __future__ import annotations

import slangpy as spy

from ..device import Gpu


class BufferSet:
    """Named scratch buffers that grow by capacity (bytes, x1.5 at least) and are otherwise
    reused. A buffer replaced by growth is kept alive until :meth:`trim` because work
    recorded earlier (unsubmitted or in flight) may still use it."""

    def __init__(self, gpu: Gpu, prefix: str, category: str | None = None):
        self.gpu = gpu
        self.prefix = prefix
        self.category = category  # VRAM pool category (default: from the prefix)
        self._bufs: dict[str, spy.Buffer] = {}
        self._retired: list[spy.Buffer] = []

    def get(self, name: str, nbytes: int, category: str | None = None) -> spy.Buffer:
        buf = self._bufs.get(name)
        if buf is None or buf.size < nbytes:
            if buf is not None:
                self._retired.append(buf)
                nbytes = max(nbytes, buf.size * 3 // 2)
            buf = self.gpu.buffer(max(nbytes, 16), label=f"{self.prefix}.{name}", category=category or self.category)
            self._bufs[name] = buf
        return buf

    def __getitem__(self, name: str) -> spy.Buffer:
        return self._bufs[name]

    def nbytes(self) -> int:
        return sum(b.size for b in self._bufs.values()) + sum(b.size for b in self._retired)

    def release(self) -> None:
        """Drop every scratch buffer (call only when no recorded work is pending)."""
        self._bufs.clear()
        self._retired.clear()

    def trim(self) -> None:
        """Drop buffers replaced by growth (call only when no recorded work is pending)."""
        self._retired.clear()

    def outgrown_bytes(self) -> int:
        """Bytes of the buffers replaced by growth, held until :meth:`trim`."""
        return sum(b.size for b in self._retired)
