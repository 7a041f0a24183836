"""Prepare identical inputs for our trainer and gsplat (run on the CPU machine).

Loads a dataset with Spirula's readers (undistorted, cropped to the valid rectangle,
downscaled to --max-size), draws the initial points (SfM points, or the random box for
datasets without points, with a fixed seed), and writes a compact folder:

    <out>/<name>/images/<i>.jpg   (quality 95)   <out>/<name>/cameras.json   <out>/<name>/points.npz
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from PIL import Image

from engine.ingest import load_dataset
from engine.splat.init import initial_points


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", type=Path, default=Path(".gpu/data"))
    ap.add_argument("--max-size", type=int, default=1000)
    ap.add_argument("--random-points", type=int, default=100_000)
    args = ap.parse_args()
    ds = load_dataset(args.dataset, args.max_size)
    out = args.out / args.name
    (out / "images").mkdir(parents=True, exist_ok=True)
    cams = []
    for i, c in enumerate(ds.cameras):
        Image.fromarray(c.image).save(out / "images" / f"{i:04d}.jpg", quality=95)
        cams.append({"name": c.name, "file": f"images/{i:04d}.jpg", "width": c.width, "height": c.height,
                     "fx": c.fx, "fy": c.fy, "cx": c.cx, "cy": c.cy, "w2c": c.w2c.tolist()})
    pts, cols = initial_points(ds, args.random_points, np.random.default_rng(0))
    np.savez_compressed(out / "points.npz", points=pts, colors=cols)
    (out / "cameras.json").write_text(json.dumps({"source": str(args.dataset), "cameras": cams}))
    print(f"{args.name}: {len(cams)} cameras, {len(pts)} points, {sum(f.stat().st_size for f in out.rglob('*')) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
