"""Speed of the mesh stage's UV atlas (spirula/engine/mesh/atlas.py) and what a lower face budget
costs, on a synthetic marching-cubes mesh or on a trained project (issue 21, part 4).

    python benchmarks/mesh_speed.py synthetic [--grid 320] [--faces 500000] [--chunks 0,500,1000,2000]
    python benchmarks/mesh_speed.py project PROJECT [--chunks 0,1000] [--budgets 200000] [--save DIR]

synthetic: a blob with low-frequency bumps and ~1 voxel of fine noise (like a fused TSDF:
~5 faces per xatlas chart, as the mouse and office_chair meshes) over a thin slab, meshed
by marching cubes on a dense grid, small components dropped, decimated as the stage does;
then `unwrap` per chunk size (0 = one xatlas mesh, the old behaviour).
project: `run_mesh` at the defaults on the project (its mesh.json report printed: step
times, peak memory per step), capturing the decimated mesh and the mesh before decimation;
then `unwrap` per chunk size on the captured mesh, and for each lower face budget the
decimation time, atlas time and the distance of both meshes to the undecimated one
(Chamfer, p99 and Hausdorff of area-uniform samples, in % of the bounding diagonal).
Prints one JSON line per result ("RESULT {...}"); wall and CPU seconds (CPU: all threads).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def emit(**kw) -> None:
    print("RESULT " + json.dumps(kw), flush=True)


def noisy_blob(grid: int, amp_vox: float = 1.0, sigma_vox: float = 0.8, seed: int = 0):
    """(verts [V, 3], faces [F, 3]) marching cubes of a bumpy sphere over a slab, world [-1, 1]^3."""
    from scipy import ndimage
    from skimage.measure import marching_cubes

    rng = np.random.default_rng(seed)
    ax = np.linspace(-1, 1, grid, dtype=np.float32)
    x, y, z = np.meshgrid(ax, ax, ax, indexing="ij", sparse=True)
    low = ndimage.gaussian_filter(rng.standard_normal((grid,) * 3).astype(np.float32), grid / 24, mode="wrap")
    low *= 0.08 / low.std()
    high = ndimage.gaussian_filter(rng.standard_normal((grid,) * 3).astype(np.float32), sigma_vox)
    high *= (amp_vox * 2 / grid) / high.std()
    sdf = np.minimum(np.sqrt(x ** 2 + y ** 2 + z ** 2) - 0.6 + low, np.abs(z + 0.75) - 3.0 / grid) + high
    v, f, _, _ = marching_cubes(sdf, 0.0)
    return v * (2 / (grid - 1)) - 1, f.astype(np.int64)


def atlas_variants(verts, faces, chunks, texture: int, tag: str) -> None:
    from spirula.engine.mesh.atlas import unwrap

    for cf in chunks:
        t, c = time.perf_counter(), _cpu()
        uv = unwrap(verts, faces, texture, chunk_faces=cf)
        wall, cpu = time.perf_counter() - t, _cpu() - c
        ok = bool((uv.vmapping[uv.faces] == faces).all() and uv.uvs.min() >= 0 and uv.uvs.max() <= 1)
        emit(what="atlas", mesh=tag, faces=len(faces), chunk_faces=cf, wall_s=round(wall, 2), cpu_s=round(cpu, 2),
             charts=uv.charts, uv_vertices=len(uv.vertices), seam_ratio=round(len(uv.vertices) / len(verts), 3),
             valid=ok, cpus=os.cpu_count())


def _samples(verts, faces, n, rng):
    tri = verts[faces]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    fi = rng.choice(len(faces), n, p=area / area.sum())
    b = rng.dirichlet([1, 1, 1], n)
    return (b[:, :, None] * tri[fi]).sum(1)


def distances(ref, test, n: int = 400_000, seed: int = 0) -> dict:
    """Symmetric distances between two meshes (verts, faces) by area-uniform samples, % of diagonal."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    a, b = _samples(*ref, n, rng), _samples(*test, n, rng)
    d_ab, _ = cKDTree(b).query(a, workers=-1)
    d_ba, _ = cKDTree(a).query(b, workers=-1)
    diag = float(np.linalg.norm(np.ptp(ref[0], axis=0)))
    both = np.concatenate([d_ab, d_ba])
    return {"chamfer_pct": round(100 * 0.5 * (d_ab.mean() + d_ba.mean()) / diag, 4),
            "p99_pct": round(100 * float(np.quantile(both, 0.99)) / diag, 4),
            "hausdorff_pct": round(100 * float(both.max()) / diag, 4)}


def cmd_synthetic(args) -> None:
    from spirula.engine.mesh.clean import decimate, remove_small_components

    t = time.perf_counter()
    v, f = noisy_blob(args.grid)
    emit(what="marching_cubes", grid=args.grid, faces=len(f), wall_s=round(time.perf_counter() - t, 2))
    v, f, _ = remove_small_components(v, f, 0.02)
    t, c = time.perf_counter(), _cpu()
    dv, df = decimate(v, f, args.faces)
    emit(what="decimate", faces_in=len(f), faces=len(df), wall_s=round(time.perf_counter() - t, 2),
         cpu_s=round(_cpu() - c, 2))
    atlas_variants(dv, df, args.chunks, args.texture, f"synthetic{args.grid}")


def cmd_project(args) -> None:
    import spirula.engine.mesh.atlas as atlas_mod
    import spirula.engine.mesh.clean as clean_mod
    from spirula.engine.jobs.mesh import run_mesh
    from spirula.engine.mesh.mesh_config import MeshConfig

    seen = {}
    real_unwrap, real_decimate = atlas_mod.unwrap, clean_mod.decimate

    def unwrap(verts, faces, *a, **kw):
        seen["mesh"] = (np.array(verts), np.array(faces))
        return real_unwrap(verts, faces, *a, **kw)

    def decimate(verts, faces, *a, **kw):
        seen["full"] = (np.array(verts), np.array(faces))
        return real_decimate(verts, faces, *a, **kw)

    atlas_mod.unwrap, clean_mod.decimate = unwrap, decimate  # run_mesh imports them at call time
    cfg = MeshConfig()
    report = run_mesh(Path(args.project), cfg)
    atlas_mod.unwrap, clean_mod.decimate = real_unwrap, real_decimate
    name = Path(args.project).name
    emit(what="mesh_stage", project=name, seconds=report["seconds"], memory=report["memory"],
         faces_marching_cubes=report["faces_marching_cubes"], faces=report["faces"], charts=report["charts"],
         uv_vertices=report["uv_vertices"], texel_coverage=report["texel_coverage"])
    v, f = seen["mesh"]
    if args.save:
        Path(args.save).mkdir(parents=True, exist_ok=True)
        np.savez_compressed(Path(args.save) / f"{name}-decimated.npz", v=v.astype(np.float32), f=f.astype(np.int32))
    atlas_variants(v, f, args.chunks, cfg.texture_size, name)
    full = seen["full"]
    emit(what="budget", project=name, faces=len(f), **distances(full, (v, f)))
    for budget in args.budgets:
        t, c = time.perf_counter(), _cpu()
        bv, bf = real_decimate(*full, budget)
        dec = time.perf_counter() - t
        emit(what="budget", project=name, faces=len(bf), decimate_s=round(dec, 2), **distances(full, (bv, bf)),
             vs_default=distances((v, f), (bv, bf)))
        atlas_variants(bv, bf, [atlas_mod.CHUNK_FACES], cfg.texture_size, f"{name}-{budget}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    s = sub.add_parser("synthetic")
    s.add_argument("--grid", type=int, default=320)
    s.add_argument("--faces", type=int, default=500_000)
    s.add_argument("--texture", type=int, default=4096)
    s.add_argument("--chunks", type=ints, default=[0, 500, 1000, 2000])
    p = sub.add_parser("project")
    p.add_argument("project")
    p.add_argument("--chunks", type=ints, default=[0, 1000])
    p.add_argument("--budgets", type=ints, default=[200_000])
    p.add_argument("--save", default="")
    args = ap.parse_args()
    (cmd_synthetic if args.cmd == "synthetic" else cmd_project)(args)


if __name__ == "__main__":
    main()
