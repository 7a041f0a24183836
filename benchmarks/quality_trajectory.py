"""Held-out quality along a run (issue 28's diagnostics): the PLY a trainer has at chosen
steps, scored afterwards by the protocol's one renderer, and JPEGs of the held-out renders.

quality_bench.py ``--score-at 7000,15000`` keeps a PLY at each of those steps (ours: the
trainer's evaluation hook; gsplat: its loop) and adds ``trajectory``: [{step, psnr, ssim,
num_gaussians, views: [psnr per held-out view]}] to the RESULT line. ``--renders DIR``
writes one JPEG per scored model (its held-out renders beside the ground truth), so a view
that collapses can be looked at.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def parse_steps(text: str | None, total: int) -> list[int]:
    """"7000,15000" (or "7000+15000", which a MATRIX line of h200_quality.sh can carry: it
    splits its runs at commas) -> sorted steps strictly inside (0, total); [] for None/empty."""
    if not text:
        return []
    steps = sorted({int(s) for s in text.replace("+", ",").split(",") if s.strip()})
    bad = [s for s in steps if not 0 < s < total]
    if bad:
        raise SystemExit(f"--score-at {bad}: each step must lie strictly between 0 and --steps {total}")
    return steps


def eval_interval(steps: list[int]) -> int:
    """The evaluation interval whose multiples include every step of ``steps`` (their gcd)."""
    out = 0
    for s in steps:
        out = math.gcd(out, s)
    return out


def ply_at(folder: Path, step: int) -> Path:
    """Where the PLY of step ``step`` is kept."""
    return folder / f"model-{step:06d}.ply"


def score_trajectory(folder: Path, steps: list[int], score, renders: Path | None) -> list[dict]:
    """[{step, psnr, ssim, num_gaussians, views}] of the PLYs kept at ``steps``; ``score(ply,
    render_dir)`` is the caller's one-renderer scoring (returns score_ply's dict)."""
    out = []
    for step in steps:
        ply = ply_at(folder, step)
        if not ply.exists():
            continue
        r = score(ply, None if renders is None else renders.with_name(f"{renders.name}-{step:06d}.jpg"))
        out.append({"step": step, "psnr": r["psnr"], "ssim": r["ssim"], "num_gaussians": r["num_gaussians"],
                    "views": [round(v["psnr"], 3) for v in r["views"]]})
        print("TRAJECTORY " + json.dumps(out[-1]), flush=True)  # kept in the log should the run be killed
        ply.unlink()
    return out


def save_renders(path: Path, views, render) -> None:
    """One JPEG at ``path``: a row per held-out view, its render beside its ground truth, at
    a quarter of the size (one file per model: the device tool returns few files)."""
    from PIL import Image

    rows = []
    for c, gt in views:
        a = (np.clip(render(c), 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
        img = Image.fromarray(np.concatenate([a, gt[..., :3]], axis=1))
        rows.append(np.asarray(img.resize((max(1, img.width // 4), max(1, img.height // 4)), Image.BOX)))
    if not rows:
        return
    width = max(r.shape[1] for r in rows)
    sheet = np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0))) for r in rows], axis=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(sheet).save(path, quality=85)
