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
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..fileio import write_json_atomic
from .config import SfmConfig

STATE_FILE = "state.json"
DATABASE = "database.db"
FEATURE_SETTINGS = ("max_image_size", "max_features", "upsample", "device")
MATCH_SETTINGS = ("overlap", "loop_every", "loop_max_keyframes", "vocab_tree", "device")


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _pycolmap_version() -> str:
    import pycolmap

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
            import pycolmap

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
