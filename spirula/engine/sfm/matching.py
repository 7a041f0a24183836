"""Feature matching and two-view geometric verification of chosen image pairs (pycolmap).

Pairs come from :mod:`spirula.engine.sfm.pairs` (sequential + loop keyframes for a video,
exhaustive for small photo sets) and are matched in chunks through
``pycolmap.match_image_pairs`` (a pair-list file per chunk), so progress and
cancellation work between chunks. With a vocabulary tree configured, a video is matched
by ``pycolmap.match_sequential`` with COLMAP's retrieval-based loop detection instead.
Pairs whose matches the database already holds (a matching cancelled earlier and
continued, see :mod:`spirula.engine.sfm.cache`) are not matched again.
Image names must not contain whitespace (the pair-list format is space separated); the
frame writers guarantee it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .sfm_config import SfmConfig
from .features import CAPTURE_ADVICE, SfmError, device
from .pairs import exhaustive_pairs, loop_pairs, sequential_pairs
from ..optional import need


def choose_matching(cfg: SfmConfig, kind: str, n: int) -> str:
    """'sequential' or 'exhaustive' for input ``kind`` ('video' or 'photos') of n images."""
    if cfg.matching in ("sequential", "exhaustive"):
        return cfg.matching
    if kind == "video":
        return "sequential"
    return "exhaustive" if n <= cfg.exhaustive_max_images else "sequential"


def plan_pairs(names: list[str], method: str, cfg: SfmConfig) -> list[tuple[str, str]]:
    """Name pairs to match for ``names`` (in capture order for 'sequential')."""
    n = len(names)
    if method == "exhaustive":
        idx = exhaustive_pairs(n)
    else:
        idx = sequential_pairs(n, cfg.overlap) | loop_pairs(n, cfg.overlap, cfg.loop_every, cfg.loop_max_keyframes)
    return [(names[i], names[j]) for i, j in sorted(idx)]


def match(database: Path, work_dir: Path, names: list[str], method: str, cfg: SfmConfig,
          progress: Callable[[int, int], None] | None = None,
          should_stop: Callable[[], bool] | None = None, label: object = None) -> dict:
    """Match and verify the planned pairs of ``names``; returns a summary dict
    (method, pairs, verified_pairs). ``label`` names the input in errors."""
    pycolmap = need("pycolmap")

    bad = [n for n in names if any(c.isspace() for c in n)]
    if bad:
        raise SfmError(f"image names with whitespace cannot be matched: {bad[:3]}")
    matching = pycolmap.FeatureMatchingOptions()
    matching.num_threads = cfg.num_threads
    matching.use_gpu = device(cfg) != pycolmap.Device.cpu
    if method == "sequential" and cfg.vocab_tree:
        if not Path(cfg.vocab_tree).is_file():
            raise SfmError(f"{cfg.vocab_tree}: vocabulary tree file not found")
        pairing = pycolmap.SequentialPairingOptions()
        pairing.overlap = cfg.overlap
        pairing.loop_detection = True
        pairing.vocab_tree_path = str(cfg.vocab_tree)
        if progress is not None:
            progress(0, 1)
        pycolmap.match_sequential(database, matching_options=matching, pairing_options=pairing, device=device(cfg))
        if progress is not None:
            progress(1, 1)
        planned = None
    else:
        pairs = plan_pairs(names, method, cfg)
        planned = len(pairs)
        with pycolmap.Database.open(database) as db:
            ids = {im.name: im.image_id for im in db.read_all_images()}
            todo = [(a, b) for a, b in pairs if not db.exists_matches(ids[a], ids[b])]
        skipped = planned - len(todo)
        pairs = todo
        chunk = max(50, min(500, len(pairs) // 20 or 1))
        work_dir.mkdir(parents=True, exist_ok=True)
        pair_file = work_dir / "pairs.txt"
        for start in range(0, len(pairs), chunk):
            if should_stop is not None and should_stop():
                raise KeyboardInterrupt
            part = pairs[start:start + chunk]
            pair_file.write_text("".join(f"{a} {b}\n" for a, b in part), encoding="utf-8")
            pairing = pycolmap.ImportedPairingOptions()
            pairing.match_list_path = str(pair_file)
            pycolmap.match_image_pairs(database, matching_options=matching, pairing_options=pairing,
                                       device=device(cfg))
            if progress is not None:
                progress(skipped + start + len(part), planned)
    with pycolmap.Database.open(database) as db:
        _, inliers = db.read_two_view_geometry_num_inliers()   # pairs with a verified geometry only
    verified = sum(1 for k in inliers if k > 0)
    if verified == 0:
        raise SfmError(f"{label or database.parent}: no two images share enough matched features (no overlap between "
                       f"views). {CAPTURE_ADVICE}")
    return {"method": method, "pairs": planned, "verified_pairs": int(verified),
            "loop_detection": "vocab tree" if (method == "sequential" and cfg.vocab_tree)
            else ("keyframes" if method == "sequential" and cfg.loop_every > 0 else None)}
