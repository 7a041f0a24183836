"""Prepare one dataset for the benchmark trainers (run on the CPU machine).

Loads a dataset with Spirula's readers (undistorted, cropped to the valid rectangle,
downscaled to --max-size) and writes a compact folder:

    <out>/<name>/images/<i>.jpg   (quality 95)
    <out>/<name>/cameras.json     {"source", "has_points", "cameras": [...]}
    <out>/<name>/points.npz       the dataset's SfM points and colours only: points [P, 3]
                                  float32, colors [P, 3] uint8 (P = 0 when it has none)
    <out>/<name>/hires/<i>.jpg    with --hires: the held-out views (every 8th) loaded at twice
                                  --max-size (at most the originals' size), their cameras in
                                  cameras.json as each camera's "hires" record; quality_bench.py
                                  scores them as the 2x resolution (issue 28: train at <= 1000 px,
                                  evaluate at 1/2x and 2x)

No initial points are drawn here: every trainer does its own initialisation (ours, and
gsplat's own as its users run it). The labelled parity check that hands both trainers the
same Spirula points draws them at run time (benchmarks/train_bench.py:parity_points).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from PIL import Image

from spirula.engine.ingest import load_dataset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", type=Path, default=Path(".gpu/data"))
    ap.add_argument("--max-size", type=int, default=1000)
    ap.add_argument("--hires", action="store_true", help="also write the held-out views at 2 x --max-size")
    args = ap.parse_args()
    ds = load_dataset(args.dataset, args.max_size)
    out = args.out / args.name
    (out / "images").mkdir(parents=True, exist_ok=True)
    cams = []
    for i, c in enumerate(ds.cameras):
        Image.fromarray(c.image).save(out / "images" / f"{i:04d}.jpg", quality=95)
        cams.append({"name": c.name, "file": f"images/{i:04d}.jpg", "width": c.width, "height": c.height,
                     "fx": c.fx, "fy": c.fy, "cx": c.cx, "cy": c.cy, "w2c": c.w2c.tolist()})
    if args.hires:
        _write_hires(args.dataset, 2 * args.max_size, ds, out, cams)
    has_points = ds.points is not None and len(ds.points) > 0
    if has_points:
        pts = np.asarray(ds.points, np.float32)
        cols = (np.asarray(ds.colors, np.uint8) if ds.colors is not None
                else np.full((len(pts), 3), 128, np.uint8))  # as spirula.engine.splat.init does for colourless points
    else:
        pts, cols = np.zeros((0, 3), np.float32), np.zeros((0, 3), np.uint8)
    np.savez_compressed(out / "points.npz", points=pts, colors=cols)
    (out / "cameras.json").write_text(json.dumps({"source": str(args.dataset), "has_points": has_points,
                                                  "cameras": cams}))
    print(f"{args.name}: {len(cams)} cameras, {len(pts)} SfM points, "
          f"{sum(f.stat().st_size for f in out.rglob('*')) / 1e6:.1f} MB")


def _write_hires(source: Path, max_size: int, ds, out: Path, cams: list) -> None:
    """The held-out views (train_bench.split: every 8th) at ``max_size`` into out/hires/,
    each camera's intrinsics there as cams[i]["hires"] (the pose is the same camera's)."""
    big = load_dataset(source, max_size)
    if [c.name for c in big.cameras] != [c.name for c in ds.cameras]:
        raise SystemExit("--hires: the dataset loads other cameras at the larger size")
    (out / "hires").mkdir(exist_ok=True)
    for i in range(0, len(cams), 8):
        c = big.cameras[i]
        Image.fromarray(c.image).save(out / "hires" / f"{i:04d}.jpg", quality=95)
        cams[i]["hires"] = {"file": f"hires/{i:04d}.jpg", "width": c.width, "height": c.height, "fx": c.fx,
                            "fy": c.fy, "cx": c.cx, "cy": c.cy}


if __name__ == "__main__":
    main()
