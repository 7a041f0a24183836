"""One writer per project: ``<project>/.spirula.lock``.

The jobs that write a project (`spirula run`, `train`, `mesh`, `partition`, and the
studio while it trains or meshes a project) hold the lock for as long as they write;
a second writer is refused at once with :class:`ProjectBusyError`, one line naming the
project and the owner (PID, host, start time, command).

Mechanism: an advisory ``flock`` (``fcntl``; ``msvcrt.locking`` on Windows) on the lock
file, which the kernel releases when the owner's process ends however it ends (even
SIGKILL), so a lock can never be stuck. The file also holds the owner's JSON record
(``pid``, ``host``, ``started``, ``command``), for the refusal's line. A file left by a
process that died without removing it is taken over with a one-line note naming that
process (``on_note``). On release the file is removed; a writer that locked a file
another had just removed tries again (the inode check), so two writers never both hold
it.

Within one process the lock is re-entrant (the studio holds its project and runs the
pipeline in the same process): each :func:`acquire` returns a handle and the file goes
with the last handle's :meth:`ProjectLock.release`.

Taking the lock first removes what killed writes left in the project (temporary files,
the pipeline's ``.staging``; spirula.engine.fileio.remove_temporaries): no other writer is there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import SpirulaError

LOCK_FILE = ".spirula.lock"
log = logging.getLogger("spirula.lock")

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt


class ProjectBusyError(SpirulaError):
    """Another process is writing this project (it holds ``<project>/.spirula.lock``)."""


class _Held:
    def __init__(self, fd: int, path: Path, made_folder: bool):
        self.fd, self.path, self.made_folder, self.count = fd, path, made_folder, 0


_held: dict[Path, _Held] = {}
_guard = threading.Lock()


class ProjectLock:
    """A handle on a held project lock; :meth:`release` once (also as a context manager)."""

    def __init__(self, project: Path):
        self.project = project
        self._released = False

    def release(self) -> None:
        with _guard:
            if self._released:
                return
            self._released = True
            held = _held.get(self.project)
            if held is None:
                return
            held.count -= 1
            if held.count > 0:
                return
            del _held[self.project]
            try:
                held.path.unlink()  # still ours: nobody else can lock it until we close the fd
            except OSError:
                pass
            _unlock(held.fd)
            os.close(held.fd)
            if held.made_folder:
                with contextlib.suppress(OSError):
                    self.project.rmdir()  # a job that wrote nothing leaves no empty folder

    def __enter__(self) -> "ProjectLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def owner(project: Path) -> dict | None:
    """The lock record of ``project`` (pid, host, started, command), or None when there is
    no lock file or it is unreadable. Says nothing about whether the owner still runs."""
    try:
        return json.loads((Path(project) / LOCK_FILE).read_text(encoding="utf-8")) or None
    except (OSError, ValueError):
        return None


def acquire(project: Path, command: str, on_note: Callable[[str], None] | None = None) -> ProjectLock:
    """Take the write lock of ``project`` (created, with its parents, when missing; removed
    again on release when the job wrote nothing in it) for ``command`` (a few words, e.g.
    "spirula run"). Raises ProjectBusyError naming the owner when another process holds
    it; OutputError when the folder cannot be created. ``on_note`` gets the one-line note
    when a lock left by a dead process is taken over, and the count of temporary files
    removed."""
    from ..fileio import remove_temporaries
    from ..errors import OutputError

    project = Path(os.path.abspath(project))
    with _guard:
        held = _held.get(project)
        if held is not None:
            held.count += 1
            return ProjectLock(project)
        made = not project.exists()
        try:
            project.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"cannot create the project folder {project}: {e.strerror or e}") from e
        path = project / LOCK_FILE
        fd, previous = _lock(path, project, made)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "command": command}
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))
        except OSError:
            pass  # the record is for messages only; the flock is the lock
        held = _held[project] = _Held(fd, path, made)
        held.count = 1
    if previous and on_note is not None:
        on_note(f"note: {project} was locked by {_who(previous)}, which is no longer running; lock taken over")
    removed, freed = remove_temporaries(project)
    if removed and on_note is not None:
        on_note(f"note: removed {removed} leftover temporary file(s) of interrupted writes from {project} "
                f"({freed / 1024 ** 2:,.1f} MiB)")
    return ProjectLock(project)


@contextlib.contextmanager
def project_lock(project: Path, command: str, on_note: Callable[[str], None] | None = None) -> Iterator[ProjectLock]:
    """:func:`acquire` for a ``with`` block."""
    lock = acquire(project, command, on_note)
    try:
        yield lock
    finally:
        lock.release()


def _who(rec: dict) -> str:
    return (f"PID {rec.get('pid', '?')} on {rec.get('host', '?')} since {rec.get('started', '?')}"
            + (f" ({rec['command']})" if rec.get("command") else ""))


def _lock(path: Path, project: Path, made: bool) -> tuple[int, dict | None]:
    """Open and lock ``path``: (fd, the record a dead owner left, or None)."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            from ..fileio import write_error

            raise write_error(path, "the project's lock file", e) from e
        if not _try_lock(fd, path):
            rec = owner(project) or {}
            os.close(fd)
            raise ProjectBusyError(f"{project} is being written by another spirula process ({_who(rec)}); "
                                   "wait for it to finish or stop it, then run this again")
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except OSError:
            same = False
        if same:
            break
        _unlock(fd)  # the owner removed the file as we opened it: lock the new one
        os.close(fd)
    try:
        data = os.pread(fd, 1 << 16, 0) if hasattr(os, "pread") else b""
        previous = json.loads(data.decode("utf-8")) if data.strip() else None
    except (OSError, ValueError):
        previous = None
    return fd, previous if isinstance(previous, dict) else None


def _try_lock(fd: int, path: Path) -> bool:
    """True when locked, False when another holds it. A file system without locks (some
    network or FUSE mounts: ENOLCK, EOPNOTSUPP) counts as locked: no guard there, rather
    than a refusal naming no owner."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        return True
    except BlockingIOError:
        return False
    except OSError as e:
        if fcntl is None and e.errno in (errno.EACCES, errno.EDEADLK):  # msvcrt's "held by another"
            return False
        log.warning("%s: file locks are not supported here (%s): no guard against a second writer", path, e)
        return True


def _unlock(fd: int) -> None:
    with contextlib.suppress(OSError):
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
