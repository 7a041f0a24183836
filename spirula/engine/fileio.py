"""Atomic writes: temp file in the same folder, flushed and fsync'ed, then renamed over
the destination (and the folder fsync'ed), so a crash leaves the old file or the new one.

A write the operating system refuses (no space, read-only file system, no permission,
quota) raises spirula.engine.errors.WriteError, one line naming what was written and the path.
The temporary files of writes killed on the way (``.NAME.XXXXXXXX.tmp``) are removed by
:func:`remove_temporaries`, which the next job in that folder runs once it holds the
project's lock (spirula/engine/jobs/lock.py), and `spirula clean`."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

# errors that say the file system refused the write, not that the program is wrong
WRITE_ERRNOS = frozenset(e for e in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG,
                                     getattr(errno, "EDQUOT", None)) if e is not None)


def is_refused_write(e: BaseException) -> bool:
    """True for an OSError of :data:`WRITE_ERRNOS` (full disk, read-only, permission, quota)."""
    return isinstance(e, OSError) and e.errno in WRITE_ERRNOS


def write_error(path: Path, what: str, e: OSError) -> OSError:
    """``e`` as spirula.engine.errors.WriteError naming ``what`` and ``path`` when it is a refused
    write (:func:`is_refused_write`), else ``e`` itself."""
    from .errors import WriteError

    if isinstance(e, WriteError) or not is_refused_write(e):
        return e
    return WriteError(path, what, e)


@contextmanager
def open_atomic(path: Path, mode: str = "wb", encoding: str | None = None, what: str = ""):
    """``with open_atomic(path) as f: ...`` writes ``path`` atomically; on an exception
    inside the block the temporary file is removed and ``path`` is left as it was.
    ``what`` names the file in errors ("checkpoint": ``cannot write checkpoint PATH: no
    space left on device``): a refused write (:data:`WRITE_ERRNOS`) raises
    spirula.engine.errors.WriteError; an OSError of the block about another file passes as is."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise write_error(path, what, e) from e
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; outputs are ordinary files
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename in (None, tmp, str(path)):
            raise write_error(path, what, e) from e
        raise
    fsync_dir(path.parent)


# the temporaries of this project's writers: open_atomic's and the PLY and mesh writers'
# (mkstemp: ".NAME.XXXXXXXX.tmp"), check_writable's probes (".spirula-write-test-XXXXXXXX.tmp"),
# the checkpoint's previous-generation link (".NAME.PID.THREAD.tmp", spirula/engine/checkpoint.py),
# and in eval/ folders the evaluation PNGs' ("NAME.png.tmp"); nothing else is touched
_TEMPORARY = re.compile(r"^\..+\.([a-z0-9_]{8}|\d+\.\d+)\.tmp$")
_EVAL_TEMPORARY = re.compile(r"^.+\.png\.tmp$")
_PROBE_DIR = re.compile(r"^\.spirula-write-test-[a-z0-9_]{8}$")
SWEEP_DEPTH = 4  # <parts>/part_000/train/eval: the deepest folder a job writes files into


def remove_temporaries(folder: Path) -> tuple[int, int]:
    """Remove what killed writes left in the project ``folder`` and its subfolders (down to
    SWEEP_DEPTH levels): the writers' temporary files (``.NAME.XXXXXXXX.tmp``; the
    evaluation's ``NAME.png.tmp`` in ``eval/``), empty write-probe folders, and the
    pipeline's ``.staging`` and ``.trash`` folders at the top. Only safe while no other
    process writes there: run it holding the project's lock (spirula/engine/jobs/lock.py).
    Returns (entries removed, bytes freed); entries that cannot be removed are left."""
    folder = Path(folder)
    removed = freed = 0
    if not folder.is_dir():
        return 0, 0
    for top in (".staging", ".trash"):
        p = folder / top
        if p.is_dir() and not p.is_symlink():
            size = _tree_size(p)
            shutil.rmtree(p, ignore_errors=True)
            if not p.exists():
                removed, freed = removed + 1, freed + size
    base = len(folder.parts)
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        if len(here.parts) - base >= SWEEP_DEPTH:
            dirs[:] = []
        for name in files:
            if _TEMPORARY.match(name) or (here.name == "eval" and _EVAL_TEMPORARY.match(name)):
                p = here / name
                try:
                    size = p.lstat().st_size
                    p.unlink()
                except OSError:
                    continue
                removed, freed = removed + 1, freed + size
        for name in [d for d in dirs if _PROBE_DIR.match(d)]:
            try:
                (here / name).rmdir()
                dirs.remove(name)
                removed += 1
            except OSError:
                pass
    return removed, freed


def remove_temporaries_of(path: Path) -> int:
    """Remove the temporaries killed writes of ``path`` itself left beside it
    (``.NAME.XXXXXXXX.tmp`` with NAME = path's name), for outputs outside a project (``spirula
    export`` into any folder): only that one name's, so nothing else in a user's folder is
    touched. Returns how many went; those that cannot be removed are left."""
    path = Path(path)
    prefix, removed = f".{path.name}.", 0
    try:
        names = [e.name for e in os.scandir(path.parent) if e.is_file(follow_symlinks=False)]
    except OSError:
        return 0
    for name in names:
        if name.startswith(prefix) and _TEMPORARY.match(name) and len(name) == len(prefix) + len("XXXXXXXX.tmp"):
            try:
                (path.parent / name).unlink()
                removed += 1
            except OSError:
                pass
    return removed


def _tree_size(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                pass
    return total


def write_json_atomic(path: Path, data, what: str = "") -> None:
    with open_atomic(path, "w", encoding="utf-8", what=what) as f:
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

    Returns ``folder``; raises spirula.engine.errors.OutputError naming the folder and the reason.
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
