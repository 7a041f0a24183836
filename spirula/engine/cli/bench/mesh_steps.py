"""`spirula bench mesh <project>`: wall time of each step of `spirula mesh` on a trained project.

Each repeat runs the mesh stage exactly as `spirula mesh` does (spirula/engine/mesh/job.py, the
same settings and options) on a scratch copy of the project's ``splat.ply`` and
``train.json`` in a temporary folder, so the project's own ``exports/`` and ``mesh.json``
are left alone; the dataset is read where ``train.json`` names it. Reports per step
(load, depth, fuse, extract, clean, decimate, atlas, bake, export) the median over the
repeats of its wall time (GPU work included: every step ends with its results on the
host), each repeat's times, the counts of the last repeat and its peak host memory and
accounted GPU buffers.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def bench_mesh(project: Path, cfg, repeats: int = 1, progress=None) -> dict:
    """Mesh ``project`` ``repeats`` times with MeshConfig ``cfg``; returns the JSON-ready result."""
    from ...errors import SpirulaError
    from ...jobs.mesh import STEPS, run_mesh

    project = Path(project)
    for name in ("splat.ply", "train.json"):
        if not (project / name).is_file():
            raise SpirulaError(f"{project / name}: not found (run `spirula train <dataset> -o {project}` first)")
    runs = []
    with tempfile.TemporaryDirectory(prefix="spirula-bench-mesh-") as tmp:
        for k in range(repeats):
            scratch = Path(tmp) / f"run{k}"
            scratch.mkdir()
            for name in ("splat.ply", "train.json"):
                shutil.copy2(project / name, scratch / name)
            t = time.perf_counter()
            report = run_mesh(scratch, cfg)
            report["wall_s"] = time.perf_counter() - t
            runs.append(report)
            shutil.rmtree(scratch)
            if progress is not None:
                progress(k + 1, repeats, report["wall_s"])
    last = runs[-1]
    seconds = {s: float(np.median([r["seconds"][s] for r in runs])) for s in (*STEPS, "total") if s in last["seconds"]}
    return {"bench": "mesh", "device": last["device"], "project": str(project), "repeats": repeats,
            "config": last["config"], "views": last["views"], "gaussians": last["gaussians"],
            "grid": last["grid"], "faces_marching_cubes": last["faces_marching_cubes"], "faces": last["faces"],
            "vertices": last["vertices"], "texture_size": last["texture_size"],
            "texel_coverage": last["texel_coverage"], "seconds": seconds,
            "seconds_each": [r["seconds"] for r in runs], "memory": last["memory"],
            "note": "seconds: median over repeats of each step's wall time (spirula/engine/mesh/job.py), on a scratch copy"}


def add_parser(bs) -> None:
    """``spirula bench mesh`` (registered by spirula/engine/cli/bench/commands.py): `spirula mesh`'s options."""
    from ..options import int_at_least
    from ..mesh_command import add_options

    p = bs.add_parser("mesh", help="wall time of each `spirula mesh` step on a trained project (its files untouched)")
    add_options(p)
    p.add_argument("--repeats", type=int_at_least(1), default=1, help="runs of the whole mesh stage (default 1)")


def run(args) -> tuple[dict, list[str]]:
    import sys

    from ..mesh_command import config_from_args

    res = bench_mesh(args.project, config_from_args(args), args.repeats,
                     progress=lambda k, n, s: print(f"  repeat {k}/{n}: {s:.1f} s", file=sys.stderr))
    lines = [f"bench mesh on {res['device']}: {res['project']}, {res['views']} views, {res['gaussians']:,} Gaussians "
             f"-> {res['faces']:,} faces, texture {res['texture_size']}²; median of {res['repeats']} run(s)"]
    lines += [f"  {k:10s}{v:10.2f} s" for k, v in res["seconds"].items()]
    lines.append(f"  peak host memory {res['memory']['host_peak_mb']:.0f} MB, "
                 f"GPU buffers {res['memory']['gpu_peak_mb']:.0f} MB")
    return res, lines
