"""A ground-truth scene -> a dataset folder our pipeline reads, plus its ground truth.

Layout of ``<out>/``:

* ``images/view_NNN.png``: the renders (8-bit RGB) of :mod:`benchmarks.mesh_gt.raycast`.
* ``sparse/0/cameras.txt``, ``images.txt``, ``points3D.txt``: a COLMAP text model with the
  true poses (one PINHOLE camera; images.txt's quaternion and translation are
  world-to-camera, OpenCV axes, as COLMAP writes them) and a sparse point cloud standing
  in for SfM's: pixels drawn at random (seeded) in every view, lifted to the surface by
  the true depth, kept when on a textured surface (a textureless one gives SIFT nothing)
  and seen (unoccluded, in the frame) by at least MIN_VIEWS views, then noised by
  NOISE_PX pixels of angular error at their depth; colour: the render's pixel. No tracks.
* ``gt.npz``: points [N, 3] float32, normals [N, 3] float32, part [N] int32, visible [N]
  bool, views [N] int32 (how many views see the point, :func:`seen_count`) (the ground truth surface of :func:`benchmarks.mesh_gt.scenes.ground_truth`).
* ``gt.json``: scene, kind, size, seed, up axis, units (metres), object box, its diagonal,
  tau at 0.5% and 1%, the sample spacing, the parts (name, label, thin), the extra
  `spirula run` options of the scene, the cameras' and points' counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from scipy.spatial.transform import Rotation

from .raycast import Camera, render
from .scenes import LABELS, MIN_SEEN, GroundTruth, Scene, Size, ground_truth

MIN_VIEWS = 3      # a sparse point is kept when at least this many views see it
NOISE_PX = 0.3     # angular noise of a sparse point, in pixels at its depth
DEPTH_TOL = 0.01   # a view sees a point when its depth map agrees within 1%
FORMAT = 2         # gt.json's "format": a dataset of another format is made again, not reused


def _fmt(*vals) -> str:
    return " ".join(repr(float(v)) for v in vals)


def write_colmap(root: Path, cams: list[Camera], names: list[str], points: np.ndarray, colors: np.ndarray) -> None:
    """COLMAP text model in ``root/sparse/0`` (one PINHOLE camera shared by all views when
    their intrinsics agree, else one per view)."""
    d = root / "sparse" / "0"
    d.mkdir(parents=True, exist_ok=True)
    keys = sorted({(c.width, c.height, c.fx, c.fy, c.cx, c.cy) for c in cams})
    cam_id = {k: i + 1 for i, k in enumerate(keys)}
    lines = ["# Camera list: CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]"]
    lines += [f"{cam_id[k]} PINHOLE {k[0]} {k[1]} {_fmt(*k[2:])}" for k in keys]
    (d / "cameras.txt").write_text("\n".join(lines) + "\n")
    lines = ["# IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME", "# POINTS2D[] as (X, Y, POINT3D_ID)"]
    for i, (c, name) in enumerate(zip(cams, names)):
        qx, qy, qz, qw = Rotation.from_matrix(c.w2c[:3, :3]).as_quat()
        k = (c.width, c.height, c.fx, c.fy, c.cx, c.cy)
        lines += [f"{i + 1} {_fmt(qw, qx, qy, qz, *c.w2c[:3, 3])} {cam_id[k]} {name}", ""]
    (d / "images.txt").write_text("\n".join(lines) + "\n")
    lines = ["# POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[]"]
    lines += [f"{k + 1} {_fmt(*p)} {c[0]} {c[1]} {c[2]} 0.5" for k, (p, c) in enumerate(zip(points.tolist(), colors.tolist()))]
    (d / "points3D.txt").write_text("\n".join(lines) + "\n")


def seen_count(points: np.ndarray, cams: list[Camera], depths: list[np.ndarray]) -> np.ndarray:
    """[N] how many views see each world point [N, 3]: in front of the camera, projected
    inside the frame's pixel centres, and its camera depth between the least and the
    greatest true depth of the 2 x 2 pixel centres around its projection (within
    DEPTH_TOL of them): a point of a surface the view sees lies between its neighbouring
    depth samples, a hidden one lies behind all of them."""
    count = np.zeros(len(points), np.int64)
    for cam, depth in zip(cams, depths):
        uv, z = cam.project(points)
        with np.errstate(invalid="ignore"):
            c0, r0 = np.floor(uv[:, 0] - 0.5), np.floor(uv[:, 1] - 0.5)
        ok = (z > 0) & (c0 >= 0) & (r0 >= 0) & (c0 <= cam.width - 2) & (r0 <= cam.height - 2)
        c0, r0 = c0[ok].astype(np.int64), r0[ok].astype(np.int64)
        quad = np.stack([depth[r0, c0], depth[r0, c0 + 1], depth[r0 + 1, c0], depth[r0 + 1, c0 + 1]], 1)
        lo = quad.min(1)
        hi = np.where(np.isfinite(quad), quad, -np.inf).max(1)
        zz = z[ok]
        count[np.flatnonzero(ok)] += (zz >= lo * (1 - DEPTH_TOL)) & (zz <= hi * (1 + DEPTH_TOL))
    return count


def sparse_points(scene: Scene, cams: list[Camera], images, depths, whiches, count: int, rng
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(points [M, 3] float64, colours [M, 3] uint8), M <= count: the module docstring's
    stand-in for SfM's points."""
    textured = np.array([p.texture.kind != "plain" for p in scene.parts])
    per_view = max(1, 4 * count // len(cams))
    pts, cols = [], []
    for cam, img, depth, which in zip(cams, images, depths, whiches):
        row = rng.integers(0, cam.height, per_view)
        col = rng.integers(0, cam.width, per_view)
        k = which[row, col]
        ok = (k >= 0) & textured[np.maximum(k, 0)]
        row, col = row[ok], col[ok]
        ray = np.stack([(col + 0.5 - cam.cx) / cam.fx, (row + 0.5 - cam.cy) / cam.fy, np.ones(len(row))], 1)
        pts.append(cam.centre + (ray * depth[row, col][:, None]) @ cam.w2c[:3, :3])
        cols.append(img[row, col])
    p, c = np.concatenate(pts), np.concatenate(cols)
    keep = seen_count(p, cams, depths) >= MIN_VIEWS
    p, c = p[keep], c[keep]
    pick = rng.permutation(len(p))[:count]
    p, c = p[pick], c[pick]
    # angular noise: NOISE_PX pixels at the point's distance from the nearest camera centre
    centres = np.stack([cam.centre for cam in cams])
    dist = np.min(np.linalg.norm(p[:, None] - centres[None], axis=2), axis=1)
    p = p + rng.normal(0.0, 1.0, p.shape) * (NOISE_PX * dist / cams[0].fx)[:, None]
    return p, c


def _render_view(shapes, textures, cam: Camera, supersample: int):
    img, depth, which = render(shapes, textures, cam, supersample)
    return (np.clip(img, 0.0, 1.0) * 255 + 0.5).astype(np.uint8), depth.astype(np.float32), which.astype(np.int16)


def write_scene(scene: Scene, size: Size, out: Path, seed: int = 0, progress=None, jobs: int = 1) -> dict:
    """Render ``scene`` at ``size`` into the dataset folder ``out`` (module docstring) and
    return gt.json's contents. ``progress(done, total)`` is called after each view;
    ``jobs`` > 1 renders that many views at once in worker processes (the same images)."""
    out = Path(out)
    rng = np.random.default_rng(seed)
    cams = scene.cameras(size, rng)
    shapes = [p.shape for p in scene.parts]
    textures = [p.texture for p in scene.parts]
    (out / "images").mkdir(parents=True, exist_ok=True)
    names = [f"view_{i:03d}.png" for i in range(len(cams))]
    images, depths, whiches = [], [], []

    def keep(i, result):
        img8, depth, which = result
        Image.fromarray(img8).save(out / "images" / names[i])
        images.append(img8)
        depths.append(depth.astype(np.float64))
        whiches.append(which.astype(np.int64))
        if progress is not None:
            progress(i + 1, len(cams))

    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs) as pool:
            futures = [pool.submit(_render_view, shapes, textures, cam, size.supersample) for cam in cams]
            for i, fut in enumerate(futures):
                keep(i, fut.result())
    else:
        for i, cam in enumerate(cams):
            keep(i, _render_view(shapes, textures, cam, size.supersample))
    pts, cols = sparse_points(scene, cams, images, depths, whiches, size.points, rng)
    write_colmap(out, cams, names, pts, cols)
    gt = ground_truth(scene)
    gt.views = seen_count(gt.points, cams, depths).astype(np.int32)
    np.savez_compressed(out / "gt.npz", points=gt.points.astype(np.float32), normals=gt.normals.astype(np.float32),
                        part=gt.part, visible=gt.visible, views=gt.views)
    info = {
        "format": FORMAT, "scene": scene.name, "title": scene.title, "kind": scene.kind, "size": size.name,
        "seed": seed,
        "width": size.width, "height": size.height, "views": len(cams), "sparse_points": int(len(pts)),
        "units": "metres", "up": list(gt.up),
        "object_box": {"lo": gt.object_lo.tolist(), "hi": gt.object_hi.tolist()},
        "diagonal": gt.diagonal, "tau": {"0.5%": 0.005 * gt.diagonal, "1%": 0.01 * gt.diagonal},
        "spacing": gt.spacing, "labels": list(LABELS), "parts": gt.parts,
        "mesh_args": list(scene.mesh_args), "gt_points": int(len(gt.points)),
        "gt_points_to_cover": int(gt.mask().sum()), "min_seen": MIN_SEEN,
    }
    (out / "gt.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def read_ground_truth(folder: Path) -> GroundTruth:
    """The GroundTruth saved by :func:`write_scene` in ``folder`` (gt.json + gt.npz)."""
    folder = Path(folder)
    info = json.loads((folder / "gt.json").read_text())
    with np.load(folder / "gt.npz") as z:
        pts, nrm, part, vis = (z["points"].astype(np.float64), z["normals"].astype(np.float64), z["part"],
                               z["visible"])
        views = z["views"] if "views" in z.files else None
    return GroundTruth(pts, nrm, part, vis, info["parts"], np.asarray(info["object_box"]["lo"]),
                       np.asarray(info["object_box"]["hi"]), info["kind"], info["spacing"], tuple(info["up"]), views)
