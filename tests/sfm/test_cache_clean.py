"""Cleaning the SfM cache (spirula/engine/sfm/cache.py): clear() removes exactly <project>/cache/sfm
and says how many bytes; prune() removes caches unused for the age limit, then the least
recently used while the total is over the cap, never one in use or kept; the CLI's
`spirula clean` and `--prune`; the studio's ClearSfmCache and its rules at start."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from spirula.engine.sfm import cache

DAY = 86400.0


def _project(root, name, nbytes, age_days, now, rng):
    """A project with results and a cache of ``nbytes`` in a few files, last used ``age_days`` ago."""
    p = root / name
    (p / "sfm" / "sparse" / "0").mkdir(parents=True)
    (p / "sfm" / "sparse" / "0" / "images.bin").write_bytes(b"result")
    folder = cache.cache_folder(p)
    folder.mkdir(parents=True)
    cut = np.sort(rng.integers(0, nbytes, 2))
    for fname, size in (("database.db", cut[0]), ("state.json", cut[1] - cut[0]), ("database.db-wal", nbytes - cut[1])):
        (folder / fname).write_bytes(b"x" * int(size))
        t = now - age_days * DAY
        os.utime(folder / fname, (t, t))
    os.utime(folder, (now - age_days * DAY,) * 2)
    return p


def test_clear_removes_only_the_cache_and_counts_its_bytes(tmp_path, rng):
    n = int(rng.integers(1000, 50_000))
    p = _project(tmp_path, "a", n, 0, time.time(), rng)
    assert cache.clear(p) == n
    assert not (p / "cache").exists() and (p / "sfm" / "sparse" / "0" / "images.bin").read_bytes() == b"result"
    assert cache.clear(p) == 0  # nothing left: nothing to do


def test_clear_keeps_a_cache_folder_shared_with_other_caches(tmp_path, rng):
    p = _project(tmp_path, "a", 100, 0, time.time(), rng)
    (p / "cache" / "other").mkdir()
    cache.clear(p)
    assert (p / "cache" / "other").is_dir() and not cache.cache_folder(p).exists()


def test_find_cache_from_the_project_its_train_folder_or_an_export(tmp_path, rng):
    p = _project(tmp_path, "a", 10, 0, time.time(), rng)
    (p / "train" / "exports").mkdir(parents=True)
    for q in (p, p / "train", p / "train" / "exports"):
        assert cache.find_cache(q) == cache.cache_folder(p).resolve()
    assert cache.find_cache(tmp_path / "elsewhere") is None


def test_prune_by_age_then_by_size_least_recently_used_first(tmp_path, rng):
    now = time.time()
    mib = 1024 ** 2
    # (name, size, age in days): old ones go by age; of the rest, the oldest go until under the cap
    specs = [("old", 3 * mib, 45), ("older", mib, 60), ("b", 4 * mib, 10), ("c", 3 * mib, 5), ("d", 2 * mib, 2),
             ("busy", 6 * mib, 0.01), ("kept", 5 * mib, 20)]
    projects = {name: _project(tmp_path, name, size, age, now, rng) for name, size, age in specs}
    cap = 12 * mib
    removed = cache.prune(tmp_path, cap, 30.0, keep=[projects["kept"]], now=now)
    gone = [p.name for p, _, _ in removed]
    # by age: older and old (any order of age, oldest first); then the total left is
    # b 4 + c 3 + d 2 + busy 6 + kept 5 = 20 MiB > 12: b goes (16), then c (13), then d (11)
    assert gone == ["older", "old", "b", "c", "d"], gone
    assert [r[1] for r in removed] == [mib, 3 * mib, 4 * mib, 3 * mib, 2 * mib]
    assert "days" in removed[0][2] and "GiB" in removed[2][2]
    for name in ("busy", "kept"):
        assert cache.cache_folder(projects[name]).is_dir()
    for name in gone:
        assert not cache.cache_folder(projects[name]).exists() and (projects[name] / "sfm").is_dir()
    assert cache.prune(tmp_path, cap, 30.0, keep=[projects["kept"]], now=now) == []
    with pytest.raises(ValueError):
        cache.prune(tmp_path, -1, 30.0)


def test_opening_a_cache_marks_it_used(tmp_path, rng):
    now = time.time()
    p = _project(tmp_path, "a", 100, 40, now, rng)
    cache.SfmCache(cache.cache_folder(p))   # a rerun of SfM opens it
    assert cache.prune(tmp_path, 10 ** 12, 30.0) == []


def test_the_clean_command(tmp_path, capsys, rng):
    from spirula.engine.cli.main import main

    now = time.time()
    a = _project(tmp_path, "a", 2048, 0, now, rng)
    b = _project(tmp_path, "b", 4096, 90, now, rng)
    assert main(["clean", str(a)]) == 0
    assert not cache.cache_folder(a).exists() and "removed the SfM cache" in capsys.readouterr().out
    assert main(["clean", str(a)]) == 0 and "no SfM cache" in capsys.readouterr().out
    assert main(["clean", "--prune", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert not cache.cache_folder(b).exists() and "1 SfM cache(s) removed" in out and "unused for 90 days" in out
    assert main(["clean"]) == 1 and "name the project" in capsys.readouterr().err
    assert main(["clean", str(tmp_path / "nope")]) == 1 and "not a project folder" in capsys.readouterr().err
