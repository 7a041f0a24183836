"""Atomic writes: temp file in the same folder, flushed and fsync'ed, then renamed over
the destination (and the folder fsync'ed), so a crash leaves the old file or the new one."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def open_atomic(path: Path, mode: str = "wb", encoding: str | None = None):
    """``with open_atomic(path) as f: ...`` writes ``path`` atomically; on an exception
    inside the block the temporary file is removed and ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; outputs are ordinary files
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_json_atomic(path: Path, data) -> None:
    with open_atomic(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=json_default)


def fsync_dir(folder: Path) -> None:
    """Make the rename durable (POSIX); skipped where folders cannot be opened."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def json_default(o):
    """``json.dump(default=...)``: arrays as lists, paths as strings."""
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o)}")


def check_writable(folder: Path, what: str = "output folder") -> Path:
    """Make sure ``folder`` can be written, before any long work starts: an existing
    folder by creating and removing a probe file in it; a missing one by creating and
    removing a probe folder in its nearest existing ancestor (so nothing is left behind,
    and a folder that is never used is not created). This catches read-only mounts,
    permissions and ACLs alike, for any user, root included.

    Returns ``folder``; raises engine.errors.OutputError naming the folder and the reason.
    """
    from .errors import OutputError

    folder = Path(os.path.abspath(folder))
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"the {what} {folder} is a file, not a folder")
    if folder.is_dir():
        try:
            fd, probe = tempfile.mkstemp(prefix=".spirula-write-test-", suffix=".tmp", dir=folder)
        except OSError as e:
            raise OutputError(f"the {what} {folder} is not writable: {e.strerror or e}") from e
        os.close(fd)
        Path(probe).unlink(missing_ok=True)
        return folder
    parent = folder.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"cannot create the {what} {folder}: {parent} is a file, not a folder")
    try:
        probe = tempfile.mkdtemp(prefix=".spirula-write-test-", dir=parent)
    except OSError as e:
        raise OutputError(f"cannot create the {what} {folder}: {parent} is not writable ({e.strerror or e})") from e
    os.rmdir(probe)
    return folder
