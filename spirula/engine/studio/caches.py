"""The SfM caches from the studio (spirula/engine/sfm/cache.py has the rules): ClearSfmCache
(File > Clear SfM cache), the drop after a finished reconstruction when StartPipeline asks
for it, and the age / size rules applied to the projects folder once the engine is ready,
on a thread of its own (it only walks and deletes files). Each removal is a CacheCleared."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from ..sfm import cache
from . import protocol as M

log = logging.getLogger("spirula.session")


def clear_command(engine, cmd: M.ClearSfmCache) -> None:
    busy = engine.loads.pending
    if busy is not None and busy[0] == "pipeline":
        engine.emit(M.Warning(f"cannot clear the SfM cache of {cmd.path}: a reconstruction is running "
                              "(it may be using it); cancel it first"))
        return
    folder = cache.find_cache(cmd.path)
    if folder is None:
        engine.emit(M.Warning(f"{cmd.path}: no SfM cache (cache/sfm) in this project"))
        return
    drop(engine, folder.parent.parent, "asked for")


def drop(engine, project: Path, why: str) -> None:
    try:
        freed = cache.clear(project)
    except OSError as exc:
        engine.emit(M.Warning(f"could not remove {cache.cache_folder(project)}: {exc}"))
        return
    log.info("SfM cache of %s removed (%d bytes; %s)", project, freed, why)
    engine.emit(M.CacheCleared(str(project), freed, why))


def prune_in_background(engine, root: Path) -> threading.Thread | None:
    """The age and size rules on ``root``'s projects, on a daemon thread."""
    if not Path(root).is_dir():
        return None

    def work() -> None:
        try:
            for project, freed, why in cache.prune(root):
                log.info("SfM cache of %s removed by rule (%d bytes; %s)", project, freed, why)
                engine.emit(M.CacheCleared(str(project), freed, why))
        except Exception:  # a cache we cannot read or delete is not the session's failure
            log.exception("pruning the SfM caches of %s failed", root)

    t = threading.Thread(target=work, name="sfm-cache-prune", daemon=True)
    t.start()
    return t
