"""Profiler: timing buckets, per-kernel GPU timestamps, VRAM pool accounting.

Switched on by ``SPIRULA_PROFILE=1`` (or ``spirula --profile ...``, or :func:`enable`). At
process exit it prints three reports on stderr: the timing breakdown, GPU time by kernel
and VRAM by category; ``SPIRULA_PROFILE_JSON=FILE`` (``--profile-json FILE``) also writes
the report as JSON. While on, :func:`subscribe` delivers the same data as
:class:`spirula.engine.messages.ProfilerSnapshot` messages at a fixed rate (``interval_s``,
default ``SPIRULA_PROFILE_INTERVAL`` or 1 s), from the engine thread, whenever GPU results
have been read (so at most once per interval, and only while work is running).

Off (the default) it costs nothing per dispatch: ``Gpu.kernel`` hands out kernels whose
``dispatch`` is slangpy's own bound method, no timestamp query pool exists, and the
``Gpu`` helpers (encoder, submit, read, write, copy, clear) check one attribute
(``gpu.prof is None``) and do exactly what they did before. The VRAM pool is always on; it
costs a scan of the live buffers per allocation, not per dispatch.

``SPIRULA_POOL_ALIAS=0`` turns off the phase arena's aliasing and ``SPIRULA_POOL_POISON=1``
poisons a phase's memory when it ends (see ``spirula/engine/profile/arena.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import sys
import threading
import time
import weakref
from typing import Callable

from .arena import PhaseArena, env_flag
from .pool import APPEARANCE, CATEGORIES, IMAGE, OTHER, SPLAT, SPLAT_X_IMAGE, VIEWER, VramPool, category_for

__all__ = ["APPEARANCE", "CATEGORIES", "IMAGE", "OTHER", "SPLAT", "SPLAT_X_IMAGE", "VIEWER", "PhaseArena",
           "VramPool", "category_for", "disable", "enable", "enabled", "env_flag", "report", "requested",
           "snapshot", "subscribe", "write_json"]

_gpus: "weakref.WeakSet" = weakref.WeakSet()   # every Gpu created in the process
_session: "Session | None" = None
_lock = threading.RLock()
_retired: list = []  # detached profilers: their query pools may still be named by unsubmitted encoders


def requested() -> bool:
    """True when the environment asks for profiling (``SPIRULA_PROFILE`` or ``SPIRULA_PROFILE_JSON``)."""
    return env_flag("SPIRULA_PROFILE", False) or bool(os.environ.get("SPIRULA_PROFILE_JSON"))


def enabled() -> bool:
    return _session is not None


class Session:
    def __init__(self, text: bool, json_path: str | None, interval_s: float):
        self.text, self.json_path, self.interval_s = text, json_path, interval_s
        self.profs: list = []                  # Profiler per attached Gpu
        self.listeners: list[tuple[Callable, float]] = []
        self._next: dict[int, float] = {}      # id(listener) -> next time
        self.exit_registered = False

    def attach(self, gpu) -> None:
        from .profiler import Profiler

        if gpu.prof is None:
            prof = Profiler(gpu, on_resolved=self._tick)
            gpu.attach_profiler(prof)
            self.profs.append(prof)
            from .driver import prepare

            prepare()  # the driver's memory budget: open its Vulkan instance now, not at the first snapshot

    def _tick(self, prof) -> None:
        if not self.listeners:
            return
        now = time.perf_counter()
        due = [(cb, iv) for cb, iv in self.listeners if now >= self._next.get(id(cb), 0.0)]
        if not due:
            return
        from ..messages import ProfilerSnapshot

        msg = ProfilerSnapshot(data=_clean(_build(prof.gpu, prof, driver=True)))
        for cb, iv in due:
            self._next[id(cb)] = now + iv
            cb(msg)

    def reports(self, finish: bool = True) -> list[dict]:
        out = []
        for prof in self.profs:
            if finish:
                try:
                    prof.finish()
                except Exception as exc:  # a lost device must not hide the rest of the report
                    print(f"spirula profile: could not wait for the GPU: {exc}", file=sys.stderr)
            out.append(_clean(_build(prof.gpu, prof)))
        return out


def _build(gpu, prof, driver: bool = True) -> dict:
    from .reporting import build_report

    return build_report(gpu, prof, driver=driver)


def _clean(v):
    """Strict JSON: non-finite floats become None."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def enable(text: bool = True, json_path: str | os.PathLike | None = None, interval_s: float | None = None,
           at_exit: bool = True) -> Session:
    """Turn profiling on for every device, existing and future. ``text``: print the report
    on stderr at exit; ``json_path``: also write it as JSON there."""
    global _session
    text = text or env_flag("SPIRULA_PROFILE", False)  # the environment can only add reports
    json_path = json_path or os.environ.get("SPIRULA_PROFILE_JSON") or None
    at_exit = at_exit or requested()
    with _lock:
        if _session is None:
            iv = interval_s if interval_s is not None else float(os.environ.get("SPIRULA_PROFILE_INTERVAL", "1.0"))
            _session = Session(text, None, iv)
        s = _session
        s.text = s.text or text
        if json_path is not None:
            s.json_path = str(json_path)
        for gpu in list(_gpus):
            s.attach(gpu)
        if at_exit and not s.exit_registered:
            atexit.register(_at_exit)
            s.exit_registered = True
        return s


def disable() -> None:
    """Turn profiling off (no report); kernels get slangpy's dispatch back."""
    global _session
    with _lock:
        s, _session = _session, None
        if s is None:
            return
        for prof in s.profs:
            try:
                prof.finish()
            finally:
                prof.gpu.detach_profiler()
                prof.on_resolved = None
                _retired.append(prof)


def gpu_created(gpu) -> None:
    """Called by ``Gpu.__init__``: registers the device and attaches the profiler when on."""
    _gpus.add(gpu)
    if _session is None and requested():
        enable(text=False)  # text and JSON path come from the environment
    if _session is not None:
        _session.attach(gpu)


def subscribe(callback: Callable, interval_s: float | None = None) -> Callable[[], None]:
    """Deliver ``ProfilerSnapshot`` messages to ``callback`` every ``interval_s`` seconds
    while profiling is on. Returns a function that unsubscribes."""
    if _session is None and requested():
        enable(text=False)  # the environment asks for profiling; no device exists yet
    s = _session
    if s is None:
        return lambda: None
    entry = (callback, float(interval_s if interval_s is not None else s.interval_s))
    s.listeners.append(entry)

    def unsubscribe() -> None:
        if entry in s.listeners:
            s.listeners.remove(entry)

    return unsubscribe


@contextlib.contextmanager
def scope(label: str):
    """Dispatches recorded inside are counted apart, as ``label`` (the kernel table's
    "scope"): the studio's viewer renders with the training's kernels, which it separates
    so. Costs nothing while profiling is off."""
    s = _session
    profs = list(s.profs) if s is not None else []
    before = [p.scope for p in profs]
    for p in profs:
        p.scope = label
    try:
        yield
    finally:
        for p, b in zip(profs, before):
            p.scope = b


def snapshot(gpu=None) -> dict:
    """The current report of ``gpu`` (default: the first profiled device, else a device
    created in this process) without waiting for the GPU; VRAM only when profiling
    is off. (spirula.engine.device imports this package, so it never calls back into it.)"""
    s = _session
    if s is not None:
        for prof in s.profs:
            if gpu is None or prof.gpu is gpu:
                return _clean(_build(prof.gpu, prof))
    if gpu is None:
        gpu = next(iter(_gpus), None)
        if gpu is None:
            raise ValueError("profile.snapshot(): no GPU device has been created yet")
    return _clean(_build(gpu, None))


def report(finish: bool = True) -> dict:
    """{"version": 1, "devices": [per-device report]} for every profiled device."""
    s = _session
    from .reporting import VERSION

    return {"version": VERSION, "devices": s.reports(finish) if s is not None else []}


def write_json(path) -> None:
    from ..fileio import write_json_atomic

    write_json_atomic(path, report())


def text_report(finish: bool = True) -> str:
    from .reporting import format_report

    s = _session
    return "\n\n".join(format_report(r) for r in (s.reports(finish) if s is not None else []))


def _at_exit() -> None:
    s = _session
    if s is None:
        return
    try:
        reps = s.reports(finish=True)
        if s.text:
            from .reporting import format_report

            for r in reps:
                print("\n" + format_report(r), file=sys.stderr)
        if s.json_path:
            from ..fileio import write_json_atomic
            from .reporting import VERSION

            write_json_atomic(s.json_path, {"version": VERSION, "devices": reps})
            if s.text:
                print(f"profile written to {s.json_path}", file=sys.stderr)
    except Exception as exc:
        print(f"spirula profile: report failed: {exc}", file=sys.stderr)
    finally:
        from .driver import close

        close()  # the budget reader's Vulkan instance (it may have been reopened after its own atexit)
