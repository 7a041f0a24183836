"""Fresh random small scenes for kernel tests (never zeros)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from spirula.engine.ingest.dataset import Camera, Dataset
from spirula.engine.pose import look_at
from spirula.engine.splat.param_layout import pack, sh_coeffs


def look_at_w2c(eye, target, up=(0.0, -1.0, 0.0)):
    """[4,4] world-to-camera, OpenCV axes (z forward, y down); ``up`` is the world direction
    of the image's y axis (down in the image), hence the sign for spirula.engine.pose.look_at."""
    return look_at(eye, target, -np.asarray(up, np.float64))


def random_scene(rng, n, degree=3, max_degree=3, spread=1.0, scale=(-3.0, -1.5), opacity=(-1.0, 2.0)):
    """Gaussians around the origin. Returns (fields dict float64, packed rows float32)."""
    means = rng.normal(0, spread, (n, 3)) * [1.0, 0.7, 0.5]
    log_scales = rng.uniform(*scale, (n, 3))
    quats = rng.normal(0, 1, (n, 4))
    logits = rng.uniform(*opacity, n)
    k = sh_coeffs(max_degree)
    sh = rng.normal(0, 0.3, (n, k, 3))
    sh[:, sh_coeffs(degree):] = 0
    rows = pack(means, log_scales, quats, logits, sh[:, 0], sh[:, 1:], max_degree)
    # use exactly the float32 values the GPU sees
    fields = dict(means=rows[:, 0:3].astype(np.float64), log_scales=rows[:, 3:6].astype(np.float64),
                  quats=rows[:, 6:10].astype(np.float64), logits=rows[:, 10].astype(np.float64),
                  sh=rows[:, 11:].reshape(n, k, 3).astype(np.float64))
    return fields, rows


def random_camera(rng, width, height, dist=4.0):
    eye = rng.normal(0, 1, 3)
    eye = eye / np.linalg.norm(eye) * dist
    w2c = look_at_w2c(eye, rng.normal(0, 0.1, 3))
    f = rng.uniform(0.9, 1.2) * width
    return w2c, f, f * rng.uniform(0.95, 1.05), width * rng.uniform(0.45, 0.55), height * rng.uniform(0.45, 0.55)


def tiny_dataset(seed: int = 0, n_cams: int = 4, w: int = 64, h: int = 48, n_points: int = 800) -> Dataset:
    """A ring of ``n_cams`` cameras looking at a Gaussian blob of SfM-like points, with
    random images (training runs that exercise the loop, not its quality)."""
    rng = np.random.default_rng(seed)
    cams = []
    for i in range(n_cams):
        a = 2 * math.pi * i / n_cams
        w2c = look_at_w2c([3 * math.cos(a), 0.4, 3 * math.sin(a)], [0.0, 0.0, 0.0])
        cams.append(Camera(name=f"c{i}.png", image_path=Path(f"c{i}.png"), width=w, height=h, fx=0.9 * w,
                           fy=0.9 * w, cx=w / 2, cy=h / 2, w2c=w2c,
                           image=rng.integers(0, 256, (h, w, 3), dtype=np.uint8)))
    pts = rng.normal(0.0, 0.5, (n_points, 3)).astype(np.float32)
    return Dataset(root=Path("."), cameras=cams, points=pts, colors=rng.integers(0, 256, (n_points, 3), dtype=np.uint8))


def random_screen_splats(rng, n, width, height):
    """Splats of every shape straight in screen space: round to needles (axis ratio up to
    2000, any angle), 0.5-400 px, opacity from just over 1/255 to 1, means up to a third of
    the image outside it; the first eighth are sure needles (40-400 px long, axis ratio
    500-2000, 25-65 degrees off the axes), so every draw mixes both kinds. Returns float32
    means2d [N, 2], conic_opac [N, 4], radii [N, 2]."""
    major = np.exp(rng.uniform(np.log(0.5), np.log(400), n))
    minor = major / np.exp(rng.uniform(0, np.log(2000), n))
    angle = rng.uniform(0, np.pi, n)
    k = n // 8
    major[:k] = np.exp(rng.uniform(np.log(40), np.log(400), k))
    minor[:k] = major[:k] / np.exp(rng.uniform(np.log(500), np.log(2000), k))
    angle[:k] = np.radians(rng.uniform(25, 65, k)) + rng.integers(0, 2, k) * np.pi / 2
    c, s = np.cos(angle), np.sin(angle)
    var_a = c * c * major ** 2 + s * s * minor ** 2 + 0.3  # the projection's 0.3 px^2 low-pass
    var_c = s * s * major ** 2 + c * c * minor ** 2 + 0.3
    cov_b = c * s * (major ** 2 - minor ** 2)
    det = var_a * var_c - cov_b ** 2
    opac = np.exp(rng.uniform(np.log(1.001 / 255), 0, n))
    extend = np.minimum(3.33, np.sqrt(2 * np.log(255 * opac)))
    radii = np.stack([np.ceil(extend * np.sqrt(var_a)), np.ceil(extend * np.sqrt(var_c))], 1)
    means = rng.uniform(-0.3, 1.3, (n, 2)) * [width, height]
    co = np.stack([var_c / det, -cov_b / det, var_a / det, opac], 1)
    return means.astype(np.float32), co.astype(np.float32), radii.astype(np.int32)


def geometry_map_reader(gpu, raster, cams, ds):
    """view_map(params, n, i): view i's geometry map [H, W, 4] and final transmittance [H, W]
    (float64) rendered alone by ``raster`` (the geometry phase's forward), for comparing a
    training step's loss with NumPy on separate renders."""
    from spirula.engine.splat.camera_table import View

    def view_map(params, n, i):
        c = ds.cameras[i]
        raster.prepare(params, n, cams, View(i, c.width, c.height), 0, geometry=True)
        enc = gpu.encoder()
        raster.record_forward(enc)
        gpu.submit(enc)
        return (gpu.read(raster.geom_image, np.float32, shape=(c.height, c.width, 4)).astype(np.float64),
                gpu.read(raster.final_T, np.float32, shape=(c.height, c.width)).astype(np.float64))

    return view_map


def camera_of(ds, i):
    """(w2c, (fx, fy, cx, cy), width, height) of dataset camera i."""
    c = ds.cameras[i]
    return c.w2c, (c.fx, c.fy, c.cx, c.cy), c.width, c.height
