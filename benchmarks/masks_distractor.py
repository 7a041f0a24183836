"""Masks' bar (issue 51): a synthetic object with a moving distractor, masked as ignore.

Scene (rendered by the independent ray caster of benchmarks/mesh_gt, not our rasterizer):
a toy (a textured block with a ball on it) on a tiled floor in a textured room, a full orbit
of cameras at two heights. In half of the views a distractor -- a magenta ball of radius 5 cm,
textured, someone's thing that was put down and taken away -- stands on the floor beside the
toy. ``--layout half`` (the default since 2026-12-08): in the first half of the views (the
low ring) at one place, so that place is seen with it in half of the views and without it in
the other half; ``--layout quarters`` (the 2026-12-07 run): in the first quarter of the views
(the first half of the low ring) at one place, in the third quarter (the first half of the
high ring) at another, so each place has it in a quarter of the views only and an unmasked
training mostly outvotes it. Like a
real transient it stands still long enough for SfM to triangulate it: the SfM-like points are
drawn from every view, the ball's included. Its masks (``masks/<name>.png``: 0 on the pixels
whose centre ray hits it, dilated by DILATE px for the anti-aliased edge; 255 elsewhere; every
view has one) come from the ray caster's hit map.

The dataset (``images/``, ``masks/``, ``sparse/0`` with the true cameras and SfM-like points
from the distractor-free views, as benchmarks/mesh_gt/writer.py makes them) is trained twice
by `spirula train` at the same settings, ``--masks ignore`` and ``--masks off``, every 6th
view held out (views 0, 6, 12, ...: some show the distractor, some do not), then meshed by
`spirula mesh`. Scores, from the held-out renders (<out>/eval/*.render.png) and the meshes:

* ``psnr_kept``: held-out PSNR over the kept (unmasked) pixels against the images (and
  ``psnr_kept_without`` / ``psnr_kept_with``: over the held-out views without / with the
  distractor: a ghost of it shows in the former);
* ``psnr_distractor_region``: over the masked-out pixels, against the same view rendered
  WITHOUT the distractor (what is behind it): high when the render shows the scene there;
* ``magenta``: share of the masked-out pixels whose render is distractor-coloured, and
  ``ghost``: share of the kept pixels whose render is (a ghost of the distractor elsewhere);
* ``mesh_in_distractor``: mesh vertices inside any of the distractor's balls (grown by
  25%), and ``mesh_magenta`` vertices coloured like it.

Usage (CI size: 200 x 150 px, 32 views; 1500 steps take about 7 minutes per run on software
Vulkan with 2 cores; each seed trains both modes; the mesh only for the first seed unless
``--mesh-all``):

    PYTHONPATH=. .venv/bin/python -m benchmarks.masks_distractor --out DIR [--steps 1500] [--no-mesh]
        [--seeds 0,1,2] [--layout half|quarters] [--size ci|gpu] [--device vulkan|cuda]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image
from scipy import ndimage

from benchmarks.mesh_gt.geometry import Box, Sphere
from benchmarks.mesh_gt.raycast import render
from benchmarks.mesh_gt.scenes import SIZES, Part, Scene, _backdrop, _ring_cameras
from benchmarks.mesh_gt.texture import Texture
from benchmarks.mesh_gt.writer import sparse_points, write_colmap

REPO = Path(__file__).resolve().parents[1]
DIST_R = 0.05        # the distractor ball's radius (m)
DIST_ORBIT = 0.2     # its distance from the toy's axis (m)
DIST_PLACES = ((0.2, 0.06), (-0.12, 0.17))  # where it stands (x, y metres) in its two stretches
DILATE = 1           # px the mask grows past the pixels whose centre ray hits the distractor
MAGENTA = Texture("noise", (0.92, 0.12, 0.85), (0.70, 0.06, 0.62), scale=0.015, seed=53)


def scene() -> Scene:
    toy = Texture("noise", (0.20, 0.55, 0.30), (0.92, 0.88, 0.30), scale=0.02, seed=41)
    ball = Texture("noise", (0.20, 0.25, 0.75), (0.92, 0.92, 0.96), scale=0.015, seed=42)
    parts = [Part("block", Box((-0.07, -0.05, 0.0), (0.07, 0.05, 0.08)), toy),
             Part("ball", Sphere((0.0, 0.0, 0.125), 0.045), ball)]
    parts += _backdrop(3.0, 2.5, 51, Texture("tiles", (0.62, 0.60, 0.55), (0.42, 0.44, 0.47), scale=0.12, seed=52))
    return Scene("distractor", "toy with a moving distractor in half of the views", "object", parts,
                 lambda size, rng: _ring_cameras(size, (0.0, 0.0, 0.07), 0.6, (0.25, 0.5), 50.0))


LAYOUTS = ("half", "quarters")


def distractor_place(i: int, views: int, layout: str = "half") -> int | None:
    """Which of DIST_PLACES the distractor stands at in view i of ``views`` (None: absent):
    "half": the first place in the first half of the views; "quarters": the first place in
    the first quarter, the second in the third quarter."""
    if layout == "half":
        return 0 if 2 * i < views else None
    q = 4 * i // views
    return {0: 0, 2: 1}.get(q)


def generate(out: Path, size_name="ci", seed: int = 0, log=print, layout: str = "half") -> dict:
    """Write the dataset into ``out`` (module docstring) and ``clean/`` (the distractor views
    rendered without it) beside it; returns its description. ``size_name``: a name of
    benchmarks/mesh_gt's SIZES or a Size (the CI test's smaller one)."""
    size = SIZES[size_name] if isinstance(size_name, str) else size_name
    sc = scene()
    rng = np.random.default_rng(seed)
    cams = sc.cameras(size, rng)
    shapes = [p.shape for p in sc.parts]
    textures = [p.texture for p in sc.parts]
    for sub in ("images", "masks", "clean"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    names = [f"view_{i:03d}.png" for i in range(len(cams))]
    images, depths, whiches, centres = [], [], [], {}
    t = time.perf_counter()
    balls = [Sphere((x, y, DIST_R), DIST_R) for x, y in DIST_PLACES]
    sc_all = Scene(sc.name, sc.title, sc.kind, sc.parts + [Part(f"distractor_{k}", b, MAGENTA, "background")
                                                           for k, b in enumerate(balls)], sc.cameras)
    for i, cam in enumerate(cams):
        img, depth, which = render(shapes, textures, cam, size.supersample)
        clean8 = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
        mask = np.full((cam.height, cam.width), 255, np.uint8)
        shown = clean8
        k = distractor_place(i, len(cams), layout)
        if k is not None:
            centres[names[i]] = np.asarray(balls[k].centre, float)
            img_d, depth, which_d = render(shapes + [balls[k]], textures + [MAGENTA], cam, size.supersample)
            shown = (np.clip(img_d, 0, 1) * 255 + 0.5).astype(np.uint8)
            on_ball = which_d == len(shapes)
            mask[ndimage.binary_dilation(on_ball, iterations=DILATE)] = 0
            which = np.where(on_ball, len(shapes) + k, which_d)  # the ball's part in sc_all
            Image.fromarray(clean8).save(out / "clean" / names[i])
        Image.fromarray(shown).save(out / "images" / names[i])
        Image.fromarray(mask).save(out / "masks" / names[i])
        images.append(shown)
        depths.append(depth)
        whiches.append(which)
    # SfM-like points from every view as shot: the ball, still for a stretch, gets some too
    pts, cols = sparse_points(sc_all, cams, images, depths, whiches, size.points, rng)
    write_colmap(out, cams, names, pts, cols)
    info = {"size": size.name, "layout": layout, "views": len(cams), "distractor_views": len(centres), "points": int(len(pts)),
            "distractor_centres": {k: v.tolist() for k, v in centres.items()}, "radius": DIST_R,
            "generate_s": time.perf_counter() - t}
    (out / "distractor.json").write_text(json.dumps(info, indent=1) + "\n")
    log(f"generated {len(cams)} views ({len(centres)} with the distractor), {len(pts)} points "
        f"in {info['generate_s']:.0f} s")
    return info


def psnr(a: np.ndarray, b: np.ndarray, sel: np.ndarray) -> float | None:
    if not sel.any():
        return None
    mse = float(np.mean((a[sel].astype(np.float64) - b[sel].astype(np.float64)) ** 2)) / 255.0 ** 2
    return float("inf") if mse == 0 else -10 * np.log10(mse)


def is_magenta(rgb: np.ndarray) -> np.ndarray:
    """Distractor-coloured: red and blue high, green low (uint8 [..., 3])."""
    r, g, b = (rgb[..., k].astype(np.int32) for k in range(3))
    return (r > 140) & (b > 120) & (g < 90) & (r - g > 80) & (b - g > 70)


def score_renders(data: Path, train_out: Path) -> dict:
    """Held-out scores of one training (module docstring)."""
    held = json.loads((train_out / "metrics.json").read_text())["held_out"]
    kept, region, magenta, ghost, views, by_presence = [], [], [], [], [], {True: [], False: []}
    for name in held:
        stem = Path(name).stem
        ren = np.asarray(Image.open(train_out / "eval" / f"{stem}.render.png").convert("RGB"))
        img = np.asarray(Image.open(data / "images" / name).convert("RGB"))
        mask = np.asarray(Image.open(data / "masks" / name)) >= 128
        out = ~mask
        v = {"name": name, "psnr_kept": psnr(ren, img, mask), "ghost": float(is_magenta(ren[mask]).mean())}
        ghost.append(v["ghost"])
        if out.any():
            clean = np.asarray(Image.open(data / "clean" / name).convert("RGB"))
            v["psnr_distractor_region"] = psnr(ren, clean, out)
            v["magenta"] = float(is_magenta(ren[out]).mean())
            region.append(v["psnr_distractor_region"])
            magenta.append(v["magenta"])
        kept.append(v["psnr_kept"])
        by_presence[bool(out.any())].append(v["psnr_kept"])
        views.append(v)
    return {"psnr_kept": float(np.mean(kept)),
            "psnr_kept_without": float(np.mean(by_presence[False])) if by_presence[False] else None,
            "psnr_kept_with": float(np.mean(by_presence[True])) if by_presence[True] else None,
            "ghost": float(np.mean(ghost)), "psnr_distractor_region": float(np.mean(region)) if region else None,
            "magenta": float(np.mean(magenta)) if magenta else None, "views": views}


def score_mesh(data: Path, mesh_path: Path) -> dict:
    import trimesh

    info = json.loads((data / "distractor.json").read_text())
    mesh = trimesh.load(mesh_path, force="mesh", process=False)
    v = np.asarray(mesh.vertices)
    centres = np.array(list(info["distractor_centres"].values()))
    d = np.linalg.norm(v[:, None, :] - centres[None], axis=2).min(1)
    # above the floor: the grown ball reaches below the floor it stands on, whose mesh is no ghost
    inside = int(((d < 1.25 * info["radius"]) & (v[:, 2] > 0.2 * info["radius"])).sum())
    colours = getattr(mesh.visual, "vertex_colors", None)
    mag = int(is_magenta(np.asarray(colours)[:, :3]).sum()) if colours is not None and len(colours) == len(v) else None
    return {"vertices": int(len(v)), "mesh_in_distractor": inside, "mesh_magenta": mag}


def train(data: Path, out: Path, masks: str, steps: int, device: str | None, mesh: bool, log=print,
          extra=(), seed: int = 0) -> dict:
    """`spirula train` (and with ``mesh`` `spirula mesh`) of the dataset in one masks mode,
    scored (module docstring); ``extra``: more `spirula train` options."""
    cmd = [sys.executable, "-m", "spirula.engine.cli", "train", str(data), "-o", str(out), "--steps", str(steps),
           "--masks", masks, "--max-size", "0", "--eval-every", "6", "--seed", str(seed), "--checkpoint-every", "0",
           *extra]
    if device:
        cmd += ["--device", device]
    t = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "w") as fh:
        rc = subprocess.run(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT).returncode
    res = {"masks": masks, "seed": seed, "returncode": rc, "train_s": time.perf_counter() - t}
    log(f"[{masks} seed {seed}] train exited {rc} after {res['train_s']:.0f} s")
    if rc != 0:
        return res
    metrics = json.loads((out / "metrics.json").read_text())
    res.update(psnr_full=metrics["psnr"], masks_in_force=metrics.get("masks"), num_gaussians=metrics["num_gaussians"])
    res.update(score_renders(data, out))
    if mesh:
        res.update(mesh_and_score(data, out, device, log=log))
    return res


def mesh_and_score(data: Path, out: Path, device: str | None, bounds=None, log=print) -> dict:
    """`spirula mesh` of the trained project ``out`` (``bounds``: six numbers for --bounds, else
    auto: the toy's box, which leaves the ball out), scored by :func:`score_mesh`."""
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "spirula.engine.cli", "mesh", str(out), "--faces", "50000", "--texture-size", "512"]
    if bounds:
        cmd += ["--bounds", *[str(b) for b in bounds]]
    if device:
        cmd += ["--device", device]
    tag = "" if not bounds else ".box"
    with open(out.parent / f"{out.name}{tag}.mesh.log", "w") as fh:
        rc = subprocess.run(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT).returncode
    res = {"mesh_s": time.perf_counter() - t}
    ply = out / "exports" / "mesh.ply"
    if rc == 0 and ply.is_file():
        res.update(score_mesh(data, ply))
    else:
        res["mesh_error"] = f"spirula mesh exited {rc}"
    log(f"[{out.name}] mesh{' in ' + ' '.join(map(str, bounds)) if bounds else ''} exited {rc} after {res['mesh_s']:.0f} s")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", default="ci", choices=tuple(SIZES))
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--device", default=None)
    ap.add_argument("--no-mesh", action="store_true")
    ap.add_argument("--mesh-all", action="store_true", help="mesh every seed's runs (default: the first seed's)")
    ap.add_argument("--modes", default="ignore,off")
    ap.add_argument("--seeds", default="0", help="training seeds, comma-separated (the scene is the same)")
    ap.add_argument("--layout", default="half", choices=LAYOUTS)
    ap.add_argument("--remesh", nargs=6, type=float, metavar="B", default=None,
                    help="mesh the trained train_* folders of --out again in this box (XMIN YMIN ZMIN XMAX YMAX ZMAX, "
                         "one holding the ball; auto bounds keep only the toy) and add the scores to results.json")
    a = ap.parse_args(argv)
    data = a.out / "data"
    if a.remesh:
        results = json.loads((a.out / "results.json").read_text())
        for r in results["runs"]:
            name = f"train_{r['masks']}" + ("" if (a.out / f"train_{r['masks']}").is_dir() else f"_s{r['seed']}")
            if r.get("returncode") == 0 and (a.out / name).is_dir() and (r["seed"] == results["runs"][0]["seed"]
                                                                          or a.mesh_all):
                r["mesh_box"] = {"bounds": a.remesh, **mesh_and_score(data, a.out / name, a.device, a.remesh)}
                print(json.dumps({"masks": r["masks"], "seed": r["seed"], **r["mesh_box"]}), flush=True)
        (a.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        return 0
    if not (data / "distractor.json").is_file():
        generate(data, a.size, layout=a.layout)
    results = {"size": a.size, "steps": a.steps, "layout": a.layout, "runs": []}
    seeds = [int(x) for x in a.seeds.split(",")]
    for k, seed in enumerate(seeds):
        for mode in a.modes.split(","):
            name = f"train_{mode}" if len(seeds) == 1 else f"train_{mode}_s{seed}"
            r = train(data, a.out / name, mode, a.steps, a.device, not a.no_mesh and (k == 0 or a.mesh_all),
                      seed=seed)
            results["runs"].append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "views"}), flush=True)
            results["means"] = means(results["runs"])
            (a.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


def means(runs: list[dict]) -> dict:
    """Per masks mode: the seeds' mean and spread (max - min) of each score."""
    out = {}
    for mode in dict.fromkeys(r["masks"] for r in runs):
        rs = [r for r in runs if r["masks"] == mode and r.get("returncode") == 0]
        row = {"seeds": [r["seed"] for r in rs]}
        for key in ("psnr_kept", "psnr_kept_without", "psnr_kept_with", "psnr_distractor_region", "magenta", "ghost",
                    "psnr_full", "mesh_in_distractor", "mesh_magenta"):
            vals = [r[key] for r in rs if r.get(key) is not None]
            if vals:
                row[key] = {"mean": float(np.mean(vals)), "spread": float(np.max(vals) - np.min(vals)), "n": len(vals)}
        out[mode] = row
    return out


if __name__ == "__main__":
    sys.exit(main())
