"""The issue's bars for a partitioned run, measured against the unpartitioned one (used by
tests/partition/test_city_bars.py at CI size and benchmarks/partition_quality.py at full
size):

* peak VRAM: the VRAM pool's high-water mark (spirula/engine/profile/pool.py: every device buffer
  the engine allocates, by its accounting, not the driver's: lavapipe has no real VRAM),
  reset before each run, for the whole scene and for each part;
* held-out PSNR of the merged model and of the unpartitioned one, on the same views (the
  whole scene's every 8th image), at the same steps per Gaussian (each part gets its share
  of the MCMC budget and the steps of its share of the cameras, so a Gaussian is trained
  as often as in the whole run: spirula/engine/partition/run_parts.py part_config);
* seams: with the ray caster's hit points, the held-out pixels whose surface lies within
  ``band`` world units (on the ground plane) of an inner cell border, against the others,
  PSNR from the saved 8-bit renders.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from PIL import Image


def train_whole(dataset: Path, out: Path, cfg) -> dict:
    """`spirula train`'s job on the whole scene; metrics plus peak_vram_mib and seconds."""
    from spirula.engine.device import get_gpu
    from spirula.engine.jobs.train import run_training

    gpu = get_gpu(cfg.device)
    gpu.pool.reset_high()
    t0 = time.perf_counter()
    m = run_training(dataset, out, cfg, on_message=lambda _: None)
    return {**m, "peak_vram_mib": gpu.pool.job_peak() / 2**20, "seconds": time.perf_counter() - t0}


def train_partitioned(dataset: Path, parts_dir: Path, project: Path, cfg, settings, use_ray: bool = False,
                      steps_rule: str = "cameras", finetune_steps: int | None = None) -> dict:
    """split -> train (in-process unless ``use_ray``) -> merge; the merged metrics plus
    each part's peak VRAM and the seconds."""
    from spirula.engine.partition.merge import merge_parts
    from spirula.engine.partition.parts import split_dataset
    from spirula.engine.partition.run_parts import train_parts

    t0 = time.perf_counter()
    split_dataset(dataset, parts_dir, settings, on_message=lambda _: None)
    out = train_parts(parts_dir, cfg, use_ray=use_ray, steps_rule=steps_rule)
    steps = {k: v["metrics"]["step"] for k, v in out["parts"].items()}
    merged = merge_parts(parts_dir, project, finetune_steps=finetune_steps)
    peaks = {k: v["peak_vram_mib"] for k, v in out["parts"].items()}
    cams = {p["name"]: len(p["cameras"]) for p in json.loads((parts_dir / "partition.json").read_text())["parts"]}
    return {**merged, "part_peak_vram_mib": peaks, "part_cameras": cams, "part_steps": steps, "seconds": time.perf_counter() - t0}


def inner_edges(parts_dir: Path) -> list[tuple[int, float, float, float]]:
    """(axis, position, lo, hi) of every finite owner edge: the line ground[axis] =
    position for ground[1 - axis] in [lo, hi)."""
    d = json.loads((parts_dir / "partition.json").read_text())
    edges = []
    for p in d["parts"]:
        inf = (-np.inf, np.inf, -np.inf, np.inf)  # a null edge is infinite
        x0, x1, y0, y1 = [inf[i] if v is None else float(v) for i, v in enumerate(p["owner"])]
        for axis, pos, lo, hi in ((0, x0, y0, y1), (0, x1, y0, y1), (1, y0, x0, x1), (1, y1, x0, x1)):
            if np.isfinite(pos):
                edges.append((axis, float(pos), float(lo), float(hi)))
    return edges


def border_distance(xyz: np.ndarray, frame: np.ndarray, edges) -> np.ndarray:
    """[N] ground-plane distance of world points [N, 3] to the nearest inner edge."""
    g = xyz @ frame.T
    best = np.full(len(g), np.inf)
    for axis, pos, lo, hi in edges:
        other = g[:, 1 - axis]
        along = np.clip(other, lo, hi) - other
        best = np.minimum(best, np.hypot(g[:, axis] - pos, along))
    return best


def seam_psnr(eval_dir: Path, hits: dict, parts_dir: Path, band: float) -> dict:
    """{'border', 'rest'}: PSNR (dB) of the held-out renders in ``eval_dir`` over the pixels
    whose ray-caster hit lies within ``band`` of an inner border, and over the other hit
    pixels (each pooled over every view)."""
    d = json.loads((parts_dir / "partition.json").read_text())
    frame, edges = np.asarray(d["frame"]), inner_edges(parts_dir)
    se = {"border": [0.0, 0], "rest": [0.0, 0]}
    for name in d["test"]:
        stem = Path(name).stem
        r = np.asarray(Image.open(eval_dir / f"{stem}.render.png"), np.float64) / 255
        gt = np.asarray(Image.open(eval_dir / f"{stem}.gt.png"), np.float64) / 255
        p = hits[name]
        if p.shape[:2] != r.shape[:2]:
            raise ValueError(f"{name}: hits {p.shape[:2]} vs render {r.shape[:2]}: evaluate at the dataset's size")
        ok = np.isfinite(p[..., 0])
        dist = np.full(ok.shape, np.inf)
        dist[ok] = border_distance(p[ok], frame, edges)
        err = ((r - gt) ** 2).mean(axis=2)
        for key, mask in (("border", ok & (dist < band)), ("rest", ok & (dist >= band))):
            se[key][0] += float(err[mask].sum())
            se[key][1] += int(mask.sum())
    return {k: float(-10 * np.log10(max(s / max(n, 1), 1e-12))) for k, (s, n) in se.items()} | {
        "border_pixels": se["border"][1], "rest_pixels": se["rest"][1]}
