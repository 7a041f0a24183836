"""VRAM accounting: every device buffer of a :class:`spirula.engine.device.Gpu` is registered in
one pool with a category.

slangpy buffers cannot be weakly referenced, so the pool holds a strong reference to each
buffer and *collects* it (counts it as freed and drops its reference) once nothing else
in the process refers to it. Collection runs before every allocation, so a buffer the
engine dropped is really released before the next one is created, and whenever a report
or snapshot is taken. Always on: the cost is paid per allocation (a scan of the live
buffers, ~10 µs for a hundred), never per dispatch.
"""

from __future__ import annotations

import sys
import threading

SPLAT = "splat"                # grows with the number of Gaussians
SPLAT_X_IMAGE = "splat×image"  # grows with Gaussians x cameras in a batch: projection rows, intersections, sort keys, screen gradients
IMAGE = "image"                # per-pixel buffers: renders, ground truth, loss scratch
APPEARANCE = "appearance"      # per-image appearance embeddings
VIEWER = "viewer"              # the GUI viewport
OTHER = "other"
CATEGORIES = (SPLAT, SPLAT_X_IMAGE, IMAGE, APPEARANCE, VIEWER, OTHER)

# label prefix (text before the first '.') -> category, when the caller gives none
_PREFIX = {
    "splat": SPLAT, "raster": SPLAT_X_IMAGE, "radix": SPLAT_X_IMAGE, "scan": SPLAT_X_IMAGE,
    "arena": SPLAT_X_IMAGE, "loss": IMAGE, "gt": IMAGE, "image": IMAGE, "eval": IMAGE, "metrics": IMAGE,
    "viewer": VIEWER, "viewport": VIEWER, "appearance": APPEARANCE,
}

MiB = float(1 << 20)


def category_for(label: str) -> str:
    """The category a buffer label implies (``"splat.params"`` -> splat); ``other`` if unknown."""
    return _PREFIX.get(label.split(".", 1)[0], OTHER)


class _Entry:
    __slots__ = ("buf", "name", "category", "nbytes")

    def __init__(self, buf, name: str, category: str, nbytes: int):
        self.buf, self.name, self.category, self.nbytes = buf, name, category, nbytes


class VramPool:
    """Live device buffers by category, with current and high-water bytes."""

    def __init__(self):
        self._live: dict[int, _Entry] = {}
        self._serial = 0
        self._lock = threading.Lock()
        self.current = dict.fromkeys(CATEGORIES, 0)
        self.count = dict.fromkeys(CATEGORIES, 0)
        self.high = dict.fromkeys(CATEGORIES, 0)
        self.total = 0
        self.total_high = 0
        self.base = 0  # bytes live at the last reset_high: what the job measured since then found
        self.allocations = 0
        self.frees = 0
        self.high_top: list[tuple[str, str, int]] = []  # largest buffers when the high-water mark was set
        self.arenas: list = []  # ArenaRecord of every PhaseArena (no buffers: outlives the arena)

    def add(self, buf, name: str = "", category: str | None = None):
        """Register ``buf`` (returned unchanged)."""
        cat = category or category_for(name)
        if cat not in self.current:
            raise ValueError(f"unknown VRAM category '{cat}': one of {', '.join(CATEGORIES)}")
        nbytes = int(buf.size)
        with self._lock:
            self._collect()
            self._serial += 1
            self._live[self._serial] = _Entry(buf, name, cat, nbytes)
            self.allocations += 1
            self.count[cat] += 1
            self.current[cat] += nbytes
            self.high[cat] = max(self.high[cat], self.current[cat])
            self.total += nbytes
            if self.total > self.total_high:
                self.total_high = self.total
                self.high_top = sorted(((e.name, e.category, e.nbytes) for e in self._live.values()),
                                       key=lambda r: -r[2])[:10]
        return buf

    def collect(self) -> int:
        """Release the buffers nothing else refers to; returns how many were freed."""
        with self._lock:
            return self._collect()

    def _collect(self) -> int:
        # 2 references = the entry's own + getrefcount's argument
        dead = [k for k, e in self._live.items() if sys.getrefcount(e.buf) <= 2]
        for k in dead:
            e = self._live.pop(k)
            self.count[e.category] -= 1
            self.current[e.category] -= e.nbytes
            self.total -= e.nbytes
            self.frees += 1
        return len(dead)

    def reset_high(self) -> None:
        """Restart the high-water marks from the bytes live now (collects first): a job
        run after another in the same process (a partition's parts) measures its own peak,
        :meth:`job_peak`."""
        with self._lock:
            self._collect()
            self.base = self.total
            self.total_high = self.total
            self.high = dict(self.current)
            self.high_top = []

    def job_peak(self) -> int:
        """Bytes above what was live at the last :meth:`reset_high` at the high-water mark
        since: the job's own peak, whatever other buffers of the process stayed live."""
        with self._lock:
            return max(0, self.total_high - self.base)

    def live_bytes(self) -> int:
        """Bytes of the buffers live now (collects first)."""
        with self._lock:
            self._collect()
            return self.total

    def live(self) -> list[tuple[str, str, int]]:
        """(name, category, bytes) of every live buffer, largest first (collects first)."""
        with self._lock:
            self._collect()
            rows = [(e.name, e.category, e.nbytes) for e in self._live.values()]
        return sorted(rows, key=lambda r: -r[2])

    def _current_arenas(self) -> list:
        """Live arenas, plus the last dead one of a name no live arena has (older dead
        records are dropped)."""
        with self._lock:
            recs = [r for r in self.arenas if r.peak]
            alive = {r.name for r in recs if r.alive}
            last_dead = {r.name: r for r in recs if not r.alive and r.name not in alive}
            keep = [r for r in recs if r.alive or last_dead.get(r.name) is r]
            self.arenas[:] = keep + [r for r in self.arenas if not r.peak and r.alive]
        return keep

    def stats(self, largest: int = 10) -> dict:
        """JSON-ready summary: per category count / current / high-water MiB, the total,
        the largest live buffers and the phase arenas' savings."""
        rows = self.live()
        with self._lock:
            cats = {c: {"count": self.count[c], "current_mib": self.current[c] / MiB,
                        "high_water_mib": self.high[c] / MiB} for c in CATEGORIES}
            total = {"count": len(rows), "current_mib": self.total / MiB, "high_water_mib": self.total_high / MiB,
                     "allocations": self.allocations, "frees": self.frees}
            high_top = list(self.high_top)
        arenas = [a.stats() for a in self._current_arenas()]
        return {"categories": cats, "total": total,
                "largest": [{"name": n, "category": c, "mib": b / MiB} for n, c, b in rows[:largest]],
                "largest_at_high_water": [{"name": n, "category": c, "mib": b / MiB} for n, c, b in high_top[:largest]],
                "arenas": arenas,
                "aliasing_saved_mib": sum(a["saved_mib"] for a in arenas)}
