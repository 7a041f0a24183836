"""`spirula clean PROJECT...`: drop the SfM feature/match cache (``<project>/cache/sfm``) of
finished projects; `spirula clean --prune [FOLDER]`: apply the cache's age and size rules
to a projects folder (spirula/engine/sfm/cache.py says which; default the studio's folder)."""

from __future__ import annotations

from pathlib import Path

from ..errors import SpirulaError
from ..sfm import cache
from .options import float_range


def _size(n: int) -> str:
    return f"{n / 1024 ** 2:,.1f} MiB"


def add_parser(sub) -> None:
    p = sub.add_parser("clean", help="remove the SfM cache (features and matches) of projects",
                       description="Remove <project>/cache/sfm: the SIFT features and matches kept so that a "
                                   "cancelled or failed SfM, or a rerun with other mapper settings, does not start "
                                   "over; and the temporary files of interrupted writes. Results (frames, sparse model, "
                                   "training, exports) are never touched.")
    p.add_argument("paths", type=Path, nargs="*", metavar="PATH",
                   help="project folders to clean (with --prune: the folder of projects; default: the studio's, "
                        "$SPIRULA_PROJECTS or ~/Spirula)")
    p.add_argument("--prune", action="store_true",
                   help=f"only remove caches unused for --max-age-days, then the least recently used while all "
                        f"of them total more than --max-gb (a cache used in the last "
                        f"{cache.IN_USE_S / 3600:.0f} h is kept)")
    p.add_argument("--max-age-days", type=float_range(0.0), default=cache.MAX_AGE_DAYS,
                   help="with --prune: the age rule (default %(default)s)")
    p.add_argument("--max-gb", type=float_range(0.0), default=cache.MAX_TOTAL_BYTES / 1024 ** 3,
                   help="with --prune: the size cap over the folder, GiB (default %(default)s)")


def run(args) -> int:
    if args.prune:
        from ..studio.projects import projects_root

        roots = args.paths or [projects_root()]
        for root in roots:
            if not root.is_dir():
                raise SpirulaError(f"{root}: not a folder of projects")
            removed = cache.prune(root, int(args.max_gb * 1024 ** 3), args.max_age_days)
            for project, freed, why in removed:
                print(f"{project}: removed its SfM cache ({_size(freed)}; {why})")
            print(f"{root}: {len(removed)} SfM cache(s) removed, {_size(sum(r[1] for r in removed))} freed")
        return 0
    if not args.paths:
        raise SpirulaError("name the project folder(s) to clean, or use --prune [FOLDER]")
    for project in args.paths:
        if not project.is_dir():
            raise SpirulaError(f"{project}: not a project folder")
        had = cache.cache_folder(project).is_dir()
        freed = cache.clear(project)
        print(f"{project}: " + (f"removed the SfM cache, {_size(freed)} freed" if had else "no SfM cache"))
        _remove_temporaries(project)
    return 0


def _remove_temporaries(project: Path) -> None:
    """The temporary files of killed writes (spirula/engine/fileio.py remove_temporaries), under the
    project's lock (spirula/engine/jobs/lock.py, which removes them as it is taken): left alone
    while another process writes the project."""
    from ..jobs.lock import ProjectBusyError, acquire

    notes = []
    try:
        acquire(project, "spirula clean", on_note=notes.append).release()
    except ProjectBusyError as e:
        print(f"{project}: temporary files left: {e}")
        return
    for note in notes:
        print(note.removeprefix("note: "))
