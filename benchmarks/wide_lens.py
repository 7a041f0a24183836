"""Issue 51's fisheye bar: a 180-degree fisheye capture trained on its pinhole faces against
the same scene in pinhole cameras, on the same held-out pinhole views.

Protocol (`python -m benchmarks.wide_lens --out DIR`):

* Scene: the ground-truth room of :mod:`benchmarks.mesh_gt` (scene "e"), rendered by its
  independent ray caster (:mod:`benchmarks.mesh_gt.raycast`; the fisheye rays from its
  :class:`~benchmarks.mesh_gt.raycast.WideCamera`, not the engine's camera code).
* Fisheye capture: ``--views`` equidistant fisheye images (180 degrees across the image
  circle inscribed in a ``--size`` square; the corners see on, up to 127 degrees), from
  positions on two rings inside the room looking outwards, written as a COLMAP dataset
  (SIMPLE_RADIAL_FISHEYE, k = 0) with the true poses and points on the true surface
  standing in for SfM's.
* Trained three ways, each from the same points, settings and seed, held-out views alike:
  ``faces``: the fisheye dataset loaded with --wide-lens faces (the split under test);
  ``pinhole``: the very same face cameras (poses, intrinsics, crops) rendered directly by
  the ray caster as pinhole images: the pinhole capture of the same scene, so the only
  difference is the fisheye and its resampling; ``crop``: today's undistort-and-crop
  (--wide-lens crop).
* Held out: ``--test`` pinhole views (90 degrees, 128 px) from other positions and
  directions inside the room; PSNR by spirula/engine/splat/evaluate.py.
* Pixels used: the source fisheye pixels (inside the 180-degree circle) whose direction a
  training image holds, for the faces, for today's crop of a fisheye dataset
  (spirula/engine/ingest/undistort.py, sides up to 2x the source's extent) and for COLMAP's
  undistorter (what `spirula run` trains on after SfM); and the training pixels.

Bar (issue 51): faces' held-out PSNR within 0.5 dB of pinhole's, with >= 1.8x the pixels
used of today's crop. Writes ``DIR/wide_lens.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
from PIL import Image

from benchmarks.mesh_gt.raycast import Camera as RayCamera
from benchmarks.mesh_gt.raycast import WideCamera, look_at, render
from benchmarks.mesh_gt.scenes import get_scene, surface_samples
from benchmarks.mesh_gt.texture import shade
from benchmarks.mesh_gt.writer import write_colmap


def _ring_poses(n: int, rng) -> list[np.ndarray]:
    """n w2c of cameras on two rings inside the room (as mesh_gt's room), looking outwards
    and slightly down."""
    out = []
    per = [n // 2 + (k < n % 2) for k in range(2)]
    for k, (z, m) in enumerate(zip((1.2, 1.6), per)):
        for a in (np.arange(m) + 0.5 * k) * 2 * np.pi / m + rng.uniform(-0.1, 0.1, m):
            eye = np.array([0.45 * np.cos(a), 0.35 * np.sin(a), z])
            out.append(look_at(eye, eye + [np.cos(a), np.sin(a), -0.3 if k == 0 else -0.1]))
    return out


def _test_cameras(n: int, rng) -> list[RayCamera]:
    cams = []
    for _ in range(n):
        eye = np.array([rng.uniform(-0.6, 0.6), rng.uniform(-0.5, 0.5), rng.uniform(1.1, 1.7)])
        a = rng.uniform(0, 2 * np.pi)
        aim = eye + [np.cos(a), np.sin(a), rng.uniform(-0.5, 0.1)]
        cams.append(RayCamera(look_at(eye, aim), 64.0, 64.0, 64.0, 64.0, 128, 128))
    return cams


def _u8(img: np.ndarray) -> np.ndarray:
    return (np.clip(img, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)


def make_capture(out: Path, views: int, size: int, seed: int, supersample: int, points: int) -> dict:
    """Render the fisheye capture and write it as a COLMAP dataset in ``out``."""
    scene = get_scene("e")
    shapes, textures = [p.shape for p in scene.parts], [p.texture for p in scene.parts]
    rng = np.random.default_rng(seed)
    f = (size / 2) / (math.pi / 2)
    fish = [WideCamera(w2c, "fisheye", size, size, f, size / 2, size / 2) for w2c in _ring_poses(views, rng)]
    (out / "images").mkdir(parents=True, exist_ok=True)
    names = [f"fish_{i:02d}.png" for i in range(views)]
    for cam, name in zip(fish, names):
        Image.fromarray(_u8(render(shapes, textures, cam, supersample)[0])).save(out / "images" / name)
    # points on the true surface, coloured as the renderer shades them
    p, n, k, vis = surface_samples(scene.parts, 0.05, None)
    keep = rng.permutation(np.flatnonzero(vis))[:points]
    p, n, k = p[keep], n[keep], k[keep]
    cols = np.zeros((len(p), 3))
    for j, tex in enumerate(textures):
        m = k == j
        if m.any():
            cols[m] = shade(tex.albedo(p[m]), n[m])
    # a COLMAP text model: write_colmap's pinhole camera line replaced by the fisheye's
    stand_in = [RayCamera(c.w2c, f, f, size / 2, size / 2, size, size) for c in fish]
    write_colmap(out, stand_in, names, p, _u8(cols))
    (out / "sparse" / "0" / "cameras.txt").write_text(
        "# CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n"
        f"1 SIMPLE_RADIAL_FISHEYE {size} {size} {float(f)!r} {size / 2!r} {size / 2!r} 0.0\n")
    return {"views": views, "size": size, "f": f, "points": int(len(p))}


def pixels_used(fisheye, dataset) -> dict:
    """Source fisheye pixels (centres inside the 180-degree circle) whose direction one of
    ``dataset``'s cameras holds (the cameras' poses relative to their source image's), and
    the dataset's training pixels per source image."""
    from spirula.engine.ingest.faces import FACE_ROTATIONS

    v, u = np.mgrid[0:fisheye.height, 0:fisheye.width] + 0.5
    a, b = (u - fisheye.cx) / fisheye.fx, (v - fisheye.cy) / fisheye.fy
    th = np.hypot(a, b)
    s = np.sinc(th / np.pi)
    d = np.stack([a * s, b * s, np.cos(th)], -1)[th < math.pi / 2]
    first = sorted({c.image_name for c in dataset.cameras})[0]
    covered = np.zeros(len(d), bool)
    train_px = 0
    for c in dataset.cameras:
        if c.image_name != first:
            continue
        rot = FACE_ROTATIONS[c.face] if c.face else np.eye(3)
        q = d @ rot.T
        with np.errstate(all="ignore"):
            x = c.fx * q[:, 0] / q[:, 2] + c.cx
            y = c.fy * q[:, 1] / q[:, 2] + c.cy
        covered |= (q[:, 2] > 0) & (x >= 0) & (x <= c.width) & (y >= 0) & (y <= c.height)
        train_px += c.width * c.height
    return {"lens_px": int(len(d)), "source_px_used": int(covered.sum()), "train_px": int(train_px)}


def colmap_crop(fisheye) -> list:
    """The pinhole camera COLMAP's undistorter gives the fisheye (what `spirula run` trains on
    today after SfM: spirula/engine/sfm/colmap_undistort.py, blank_pixels 0), as a one-camera list for
    :func:`pixels_used`."""
    from types import SimpleNamespace

    import pycolmap

    c = pycolmap.Camera(model="SIMPLE_RADIAL_FISHEYE", width=fisheye.width, height=fisheye.height,
                        params=[fisheye.fx, fisheye.cx, fisheye.cy, 0.0])
    o = pycolmap.UndistortCameraOptions()
    o.blank_pixels = 0.0
    u = pycolmap.undistort_camera(o, c)
    fx, fy, cx, cy = (float(v) for v in u.params)
    return SimpleNamespace(cameras=[SimpleNamespace(image_name="x", face="", fx=fx, fy=fy, cx=cx, cy=cy,
                                                    width=u.width, height=u.height)])


def train_and_score(gpu, dataset, tests: list, steps: int, seed: int, log) -> dict:
    from spirula.engine.config import TrainConfig
    from spirula.engine.ingest.dataset import Camera, Dataset
    from spirula.engine.splat.evaluate import evaluate
    from spirula.engine.splat.trainer import Trainer

    held = [Camera(f"zz_test_{i:02d}", Path("-"), c.width, c.height, c.fx, c.fy, c.cx, c.cy, c.w2c, img)
            for i, (c, img) in enumerate(tests)]
    ds = Dataset(dataset.root, list(dataset.cameras) + held, dataset.points, dataset.colors)
    train = list(range(len(dataset.cameras)))
    test = list(range(len(dataset.cameras), len(ds.cameras)))
    # the "software" preset's short-run schedule (spirula/engine/settings.py), a smaller budget
    cfg = TrainConfig(steps=steps, seed=seed, checkpoint_every=0, eval_interval=0, densify_from=100,
                      max_gaussians=60_000, mcmc_budget=60_000)
    t0 = time.perf_counter()
    tr = Trainer(gpu, ds, train, cfg)
    tr.train()
    out = evaluate(tr, test)
    tr.release()
    log(f"  {len(train)} training images, {time.perf_counter() - t0:.0f} s: held-out PSNR {out['psnr']:.2f} dB")
    return {"psnr": out["psnr"], "ssim": out["ssim"], "train_images": len(train),
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--views", type=int, default=10)
    ap.add_argument("--size", type=int, default=160, help="fisheye image side, px")
    ap.add_argument("--test", type=int, default=6, help="held-out pinhole views")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--supersample", type=int, default=2)
    ap.add_argument("--points", type=int, default=4000)
    ap.add_argument("--device", default=None)
    ap.add_argument("--no-crop", action="store_true", help="skip training on today's crop (the slowest)")
    args = ap.parse_args(argv)

    from spirula.engine.device import get_gpu
    from spirula.engine.ingest import load_dataset
    from spirula.engine.ingest.camera_model import CameraModel

    log = print
    out = args.out
    data = out / "fisheye"
    if not (data / "sparse" / "0" / "cameras.txt").is_file():
        log(f"rendering {args.views} fisheye views of {args.size} px")
        make_capture(data, args.views, args.size, args.seed, args.supersample, args.points)
    scene = get_scene("e")
    shapes, textures = [p.shape for p in scene.parts], [p.texture for p in scene.parts]
    faces = load_dataset(data, 0, wide_lens="faces")
    crop = load_dataset(data, 0, wide_lens="crop")
    # the pinhole capture: the face cameras themselves, rendered directly
    pin_cams = []
    for c in faces.cameras:
        rc = RayCamera(c.w2c, c.fx, c.fy, c.cx, c.cy, c.width, c.height)
        pin_cams.append(dataclasses.replace(c, image=_u8(render(shapes, textures, rc, args.supersample)[0])))
    pinhole = dataclasses.replace(faces, cameras=pin_cams)
    rng = np.random.default_rng(args.seed + 1)
    tests = [(c, _u8(render(shapes, textures, c, args.supersample)[0])) for c in _test_cameras(args.test, rng)]
    f = (args.size / 2) / (math.pi / 2)
    fish = CameraModel("SIMPLE_RADIAL_FISHEYE", args.size, args.size, f, f, args.size / 2, args.size / 2, (0.0,))
    result = {"capture": {"views": args.views, "size": args.size, "steps": args.steps, "seed": args.seed},
              "pixels": {"faces": pixels_used(fish, faces), "crop": pixels_used(fish, crop),
                         "colmap_crop": pixels_used(fish, colmap_crop(fish))}}
    gpu = get_gpu(args.device)
    runs = (("faces", faces), ("pinhole", pinhole)) + (() if args.no_crop else (("crop", crop),))
    for name, ds in runs:
        log(f"training on {name}")
        result[name] = train_and_score(gpu, ds, tests, args.steps, args.seed, log)
    px = result["pixels"]
    result["bar"] = {
        "psnr_gap_db": result["pinhole"]["psnr"] - result["faces"]["psnr"],
        "source_px_ratio": px["faces"]["source_px_used"] / px["crop"]["source_px_used"],
        "source_px_ratio_vs_colmap_crop": px["faces"]["source_px_used"] / px["colmap_crop"]["source_px_used"],
        "train_px_ratio": px["faces"]["train_px"] / px["crop"]["train_px"],
    }
    (out / "wide_lens.json").write_text(json.dumps(result, indent=2) + "\n")
    log(json.dumps(result["bar"], indent=2))
    for name, _ in runs:
        log(f"{name:8s} PSNR {result[name]['psnr']:.2f} dB  SSIM {result[name]['ssim']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
