"""The feature/match database kept between SfM runs, keyed by its inputs and settings.

Extracting and matching features is most of an SfM run's time, and the mapping after
it is what fails or gets cancelled. So the COLMAP database lives in a folder of its own
(``<project>/cache/sfm/``) that no stage replaces, beside ``state.json``:

    {"features": {"key": K, "done": bool, "cameras": {group: camera id}},
     "matches":  {"key": M, "done": bool}}

K is the SHA-256 of the images (name, size, mtime of every file, the groups and their
sizes), the camera model, the extraction settings and the pycolmap version; M is K plus
the matching method and its settings. A run whose K matches a finished extraction skips
it; an unfinished one resumes (images already in the database are not extracted again).
The same holds for M and the pairs already matched. A changed K starts a fresh
database; a changed M clears the matches only. ``state.json`` is written atomically
after every chunk, so a cancel or a crash loses at most the chunk in flight.

Cleaning. The cache only saves time (a rerun of SfM after a cancel, a failure, or with other
mapper settings); dropping it never loses a result. It goes:
- on request: ``spirula clean PROJECT`` (:func:`clear`), ``spirula run --drop-sfm-cache``
  once the run finished, the studio's File > Clear SfM cache, or its setting "Drop the SfM
  cache when a reconstruction finishes";
- by rule (:func:`prune`: the studio applies it to its projects folder at start,
  ``spirula clean --prune FOLDER`` on demand): a cache unused for MAX_AGE_DAYS is removed;
  then, while the caches left total more than MAX_TOTAL_BYTES, the least recently used go
  first. "Used" is the newest file time in the folder (opening the cache touches
  ``state.json``); a cache used within the last IN_USE_S, or named in ``keep``, is never
  removed by rule (an SfM may be running on it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from ..fileio import write_json_atomic
from .sfm_config import SfmConfig
from ..optional import need

STATE_FILE = "state.json"
DATABASE = "database.db"
FEATURE_SETTINGS = ("max_image_size", "max_features", "upsample", "device")
MATCH_SETTINGS = ("overlap", "loop_every", "loop_max_keyframes", "vocab_tree", "device")
CACHE_PARTS = ("cache", "sfm")     # <project>/cache/sfm
MAX_AGE_DAYS = 30.0
MAX_TOTAL_BYTES = 5 * 1024 ** 3    # 5 GiB over all the projects of a folder
IN_USE_S = 3600.0


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _pycolmap_version() -> str:
    pycolmap = need("pycolmap")

    return pycolmap.__version__


def features_key(image_dir: Path, groups: dict[str, list[str]], sizes: dict, model: str, cfg: SfmConfig) -> str:
    files = []
    for names in groups.values():
        for n in names:
            st = (Path(image_dir) / n).stat()
            files.append((n, st.st_size, st.st_mtime_ns))
    return _sha({"files": sorted(files), "groups": groups, "sizes": {k: list(v) for k, v in sizes.items()},
                 "model": model, "settings": {k: getattr(cfg, k) for k in FEATURE_SETTINGS},
                 "pycolmap": _pycolmap_version()})


def matches_key(feat_key: str, names: list[str], method: str, cfg: SfmConfig) -> str:
    vocab = Path(cfg.vocab_tree)
    vocab_id = [str(vocab), vocab.stat().st_size, vocab.stat().st_mtime_ns] if cfg.vocab_tree and vocab.is_file() else None
    return _sha({"features": feat_key, "names": names, "method": method, "vocab": vocab_id,
                 "settings": {k: getattr(cfg, k) for k in MATCH_SETTINGS}})


class SfmCache:
    """The database and its state in ``folder``; see the module docstring."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.database = self.folder / DATABASE
        try:
            self.state = json.loads((self.folder / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.state = {}
        if not self.database.exists():   # state without its database says nothing
            self.state = {}
        elif (self.folder / STATE_FILE).exists():
            os.utime(self.folder / STATE_FILE)  # used now: the age rule of prune() counts from here

    def save(self) -> None:
        write_json_atomic(self.folder / STATE_FILE, self.state)

    def begin_features(self, key: str) -> str:
        """'reuse', 'resume' or 'fresh' for feature key ``key`` (a fresh one empties the database)."""
        f = self.state.get("features", {})
        if f.get("key") == key:
            return "reuse" if f.get("done") else "resume"
        self.database.unlink(missing_ok=True)
        self.state = {"features": {"key": key, "done": False, "cameras": {}}}
        self.save()
        return "fresh"

    @property
    def cameras(self) -> dict[str, int]:
        return self.state["features"]["cameras"]

    def finish_features(self) -> None:
        self.state["features"]["done"] = True
        self.save()

    def begin_matches(self, key: str) -> str:
        """'reuse', 'resume' or 'fresh' for match key ``key`` (a fresh one clears earlier matches)."""
        m = self.state.get("matches", {})
        if m.get("key") == key:
            return "reuse" if m.get("done") else "resume"
        if m:
            pycolmap = need("pycolmap")

            with pycolmap.Database.open(self.database) as db:
                db.clear_matches()
                db.clear_two_view_geometries()
        self.state["matches"] = {"key": key, "done": False}
        self.save()
        return "fresh"

    def finish_matches(self, summary: dict) -> None:
        self.state["matches"].update(done=True, summary=summary)
        self.save()

    @property
    def match_summary(self) -> dict:
        return self.state["matches"].get("summary", {})


# --- cleaning -------------------------------------------------------------------------------
def cache_folder(project: str | Path) -> Path:
    return Path(project).joinpath(*CACHE_PARTS)


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it does not exist)."""
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())


def last_used(folder: Path) -> float:
    """Newest modification time (s since the epoch) of ``folder`` and the files in it."""
    folder = Path(folder)
    return max([folder.stat().st_mtime] + [f.stat().st_mtime for f in folder.rglob("*") if f.is_file()])


def find_cache(path: str | Path) -> Path | None:
    """The SfM cache of the project ``path`` belongs to: ``path`` itself, or its parent or
    grandparent (a project's train/ folder, a file in its exports/); None when none has one."""
    p = Path(path).resolve()
    for folder in (p, p.parent, p.parent.parent):
        if cache_folder(folder).is_dir():
            return cache_folder(folder)
    return None


def clear(project: str | Path) -> int:
    """Remove ``<project>/cache/sfm`` (and ``cache/`` when that leaves it empty); returns the
    bytes freed (0 when there was no cache). OSError when a file cannot be removed."""
    folder = cache_folder(project)
    if not folder.is_dir():
        return 0
    freed = folder_bytes(folder)
    # rename first: a half-deleted cache never looks like a usable one to a later run
    doomed = folder.with_name(f".sfm.deleting-{os.getpid()}-{time.monotonic_ns()}")
    os.replace(folder, doomed)
    shutil.rmtree(doomed)
    try:
        folder.parent.rmdir()
    except OSError:  # not empty: other caches live there
        pass
    return freed


def prune(root: str | Path, max_total_bytes: int = MAX_TOTAL_BYTES, max_age_days: float = MAX_AGE_DAYS,
          keep=(), now: float | None = None) -> list[tuple[Path, int, str]]:
    """Apply the rules of the module docstring to the projects of ``root`` (``root`` itself
    and the folders in it). Returns (project, bytes freed, why) per cache removed, oldest
    first. ValueError for a negative limit."""
    if max_total_bytes < 0 or max_age_days < 0:
        raise ValueError(f"prune limits must be >= 0 (got {max_total_bytes} bytes, {max_age_days} days)")
    root = Path(root)
    now = time.time() if now is None else now
    kept = {Path(k).resolve() for k in keep}
    candidates = [root] + (sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
    caches = []
    for project in candidates:
        folder = cache_folder(project)
        if folder.is_dir():
            caches.append([project, folder_bytes(folder), last_used(folder)])
    caches.sort(key=lambda c: c[2])  # least recently used first
    removable = lambda c: c[0].resolve() not in kept and now - c[2] > IN_USE_S  # noqa: E731
    removed = []
    for c in caches:
        if removable(c) and now - c[2] > max_age_days * 86400.0:
            removed.append((c[0], clear(c[0]), f"unused for {(now - c[2]) / 86400.0:.0f} days"))
    left = [c for c in caches if c[0] not in {r[0] for r in removed}]
    total = sum(c[1] for c in left)
    for c in left:
        if total <= max_total_bytes:
            break
        if removable(c):
            removed.append((c[0], clear(c[0]), f"the SfM caches total {total / 1024 ** 3:.1f} GiB "
                                                f"(over {max_total_bytes / 1024 ** 3:.1f} GiB)"))
            total -= c[1]
    return removed
