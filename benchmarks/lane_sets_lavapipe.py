"""The bench scene's pixel-splat pairs, composited pairs and rasterize_backward's lane-set
counts (engine/profile/compute_floors.py lane_set_counts) from one render of the scene as
`spirula bench raster` generates it, on any Vulkan device, lavapipe included (about 40 s
on 2 cores). Prints one JSON line.

    PYTHONPATH=. python benchmarks/lane_sets_lavapipe.py
"""

from __future__ import annotations

import json
import time

import numpy as np

from engine.device import Gpu
from engine.profile import compute_floors as cf
from engine.profile.bench import synthetic_scene
from engine.splat.camera_table import View, camera_row
from engine.splat.render import Rasterizer


def main(n: int = 2_000_000, width: int = 1237, height: int = 822, degree: int = 3) -> None:
    t0 = time.perf_counter()
    gpu = Gpu("vulkan")
    sc = synthetic_scene(n, width, height, degree, seed=0)
    view = View(0, width, height)
    raster = Rasterizer(gpu, degree)
    cams = gpu.upload(camera_row(sc["w2c"], sc["fx"], sc["fy"], sc["cx"], sc["cy"], width, height)[None])
    raster.render(gpu.upload(sc["rows"]), n, cams, view, degree)
    pairs = cf.pair_count(raster.read("last_index", np.uint32, shape=(height, width)))
    visits, hit = cf.lane_set_counts(gpu, raster, view)
    print(json.dumps({"device": gpu.adapter, "intersections": raster.m, "pairs": pairs,
                      "composited": cf.composited_count(gpu, raster, view), "lane_set_visits": visits,
                      "lane_set_visits_with_composite": hit, "seconds": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
