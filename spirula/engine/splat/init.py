"""Initial Gaussians: from SfM points, or random where the cameras look.

A dataset without points (transforms.json, a synthetic set) needs a random start that
covers everything the training views see: the subject *and* the walls, floor and sky
behind it. A start confined to the subject leaves the background to densification,
which grows it from a few stray splats into blurred, off-colour blobs (fox: 5.7 dB of
held-out PSNR lost to gsplat's default, whose box is far larger; BENCHMARKS.md).

``box`` is gsplat's default (``simple_trainer.py``, ``init_type="random"``): a cube of
half size 3 x its scene scale around the cameras' look point. ``views`` (the default)
keeps that cube's density but only where some training camera looks (for an orbit most
of the cube is outside every view: fox 58%), and puts a fifth of the points on pixel rays
beyond the cube, out to 10 camera distances, for walls and sky the cube does not reach.
Measured on fox (software Vulkan, 128 px, 2,000 steps, seed 0, 7 held-out views, one
seed each): a cube of half the camera distance (the init before) 21.7 dB; rays only,
half of them near the look point, 21.7; gsplat's cube 24.9 / SSIM 0.873; ``views`` 26.1 /
0.890. On the GPU at the peers' own defaults: BENCHMARKS.md.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ..config import RANDOM_INITS
from ..ingest.dataset import Camera, Dataset, camera_extent
from .param_layout import SH_C0, pack

BOX = 3.0          # gsplat's init_extent: the cube's half size in units of its scene scale
FAR = 10.0         # ``views``' rays reach this many median camera distances past the cube
RAY_SHARE = 0.2    # of ``views``' points, drawn on pixel rays beyond the cube


def scene_bounds(dataset: Dataset) -> tuple[np.ndarray, float]:
    """(centre [3], half size) of the region the cameras look at: the least-squares point
    closest to all optical axes (when the axes are near parallel: the point ahead of the
    camera centroid along the mean axis by the cameras' spread) and half the median camera
    distance to it."""
    mid, dist = look_point(dataset.cameras)
    return mid, dist * 0.5


def look_point(cameras: list[Camera]) -> tuple[np.ndarray, float]:
    """(point [3], median camera distance to it): the least-squares point closest to all
    optical axes, or, when the axes are (nearly) parallel (a sideways sweep), the point
    ahead of the camera centroid along the mean axis by the cameras' spread."""
    centers = np.stack([c.center for c in cameras])
    dirs = np.stack([c.w2c[2, :3] for c in cameras])  # optical axis (camera +z) in world
    proj = np.eye(3)[None] - dirs[:, :, None] * dirs[:, None, :]  # [C, 3, 3]: off-axis part
    a = proj.sum(axis=0)
    b = np.einsum("cij,cj->i", proj, centers)
    if np.linalg.cond(a) < 1e6:
        mid = np.linalg.solve(a, b)
    else:
        spread = float(np.linalg.norm(centers - centers.mean(axis=0), axis=1).max())
        axis = dirs.mean(axis=0)
        norm = float(np.linalg.norm(axis))
        mid = centers.mean(axis=0) + (axis / norm * spread if norm > 1e-6 else 0.0)
    dist = float(np.median(np.linalg.norm(centers - mid, axis=1)))
    return mid, max(dist, 1e-6)


def initial_points(dataset: Dataset, count: int, rng: np.random.Generator, cameras: list[int] | None = None,
                   mode: str = "views") -> tuple[np.ndarray, np.ndarray]:
    """(points [P,3] float32, colors [P,3] uint8): the dataset's SfM points, or ``count``
    random points with random colours drawn by ``mode`` (see the module docstring) from
    the cameras ``cameras`` (indices, default all; the trainer passes its training views).
    ValueError for an unknown mode."""
    if dataset.points is not None and len(dataset.points) > 0:
        colors = dataset.colors if dataset.colors is not None else np.full((len(dataset.points), 3), 128, np.uint8)
        return dataset.points.astype(np.float32), colors.astype(np.uint8)
    cams = [dataset.cameras[i] for i in cameras] if cameras else dataset.cameras
    if mode == "views":
        pts = points_in_views(cams, count, rng)
    elif mode == "box":
        pts = points_in_box(cams, count, rng)
    else:
        raise ValueError(f"random init must be one of {', '.join(RANDOM_INITS)}, not {mode!r}")
    return pts.astype(np.float32), rng.integers(0, 256, (count, 3), dtype=np.uint8)


def points_in_views(cameras: list[Camera], count: int, rng: np.random.Generator) -> np.ndarray:
    """[count, 3] float64 points where the cameras look: 1 - RAY_SHARE of them uniform in
    gsplat's cube (:func:`points_in_box`) but only where some camera sees them (in front of
    it, inside its image), the rest on the rays of uniform random pixels of random cameras,
    log-uniform in depth from the cube's edge to FAR median camera distances beyond it (the
    walls and sky behind a scene the cube does not reach)."""
    n_ray = int(round(RAY_SHARE * count))
    mid, _ = look_point(cameras)
    half = box_half_size(cameras)
    kept, have, tries = [], 0, 0
    while have < count - n_ray and tries < 20:  # ~40% of the cube is in view for an orbit (fox)
        p = mid + rng.uniform(-half, half, (2 * (count - n_ray), 3))
        p = p[seen_by_any(cameras, p)]
        kept.append(p)
        have += len(p)
        tries += 1
    inside = np.concatenate(kept)[:count - n_ray] if have else np.empty((0, 3))
    return np.concatenate([inside, points_on_rays(cameras, count - len(inside), rng)])


def seen_by_any(cameras: list[Camera], points: np.ndarray) -> np.ndarray:
    """[P] bool: the point lies in front of at least one camera and projects into its image."""
    seen = np.zeros(len(points), bool)
    for c in cameras:  # per camera (a few hundred), vectorised over the points
        x = points @ c.w2c[:3, :3].T + c.w2c[:3, 3]
        z = np.maximum(x[:, 2], 1e-12)
        u, v = c.fx * x[:, 0] / z + c.cx, c.fy * x[:, 1] / z + c.cy
        seen |= (x[:, 2] > 1e-6) & (u >= 0) & (u < c.width) & (v >= 0) & (v < c.height)
    return seen


def points_on_rays(cameras: list[Camera], count: int, rng: np.random.Generator) -> np.ndarray:
    """[count, 3] points on the rays of uniform random pixels of uniform random cameras, at
    depths log-uniform between the cube's half size and that plus FAR median camera
    distances (equal numbers per octave of depth: a far wall gets splats in proportion to
    its depth range, not to its volume)."""
    _, dist = look_point(cameras)
    near = box_half_size(cameras)
    pick = rng.integers(0, len(cameras), count)
    w2c = np.stack([c.w2c for c in cameras])[pick]                      # [P, 4, 4]
    k = np.array([[c.fx, c.fy, c.cx, c.cy, c.width, c.height] for c in cameras])[pick]
    u = rng.uniform(0.0, 1.0, count) * k[:, 4]
    v = rng.uniform(0.0, 1.0, count) * k[:, 5]
    ray = np.stack([(u - k[:, 2]) / k[:, 0], (v - k[:, 3]) / k[:, 1], np.ones(count)], axis=1)  # z = 1
    z = np.exp(rng.uniform(np.log(near), np.log(near + FAR * dist), count))
    cam_pts = ray * z[:, None]
    r, t = w2c[:, :3, :3], w2c[:, :3, 3]
    return np.einsum("pji,pj->pi", r, cam_pts - t)  # world = R^T (x_cam - t)


def box_half_size(cameras: list[Camera]) -> float:
    """gsplat's random-init cube: BOX x its scene scale (1.1 x the largest camera distance
    from the cameras' centroid, far outlier cameras left out as in the training's scene
    scale; a single camera: its distance to the look point)."""
    if len(cameras) > 1:
        _, scale = camera_extent(np.stack([c.center for c in cameras]))
    else:
        scale = 0.0
    if scale <= 1e-6:
        scale = look_point(cameras)[1]
    return BOX * scale


def points_in_box(cameras: list[Camera], count: int, rng: np.random.Generator) -> np.ndarray:
    """[count, 3] float64 points uniform in gsplat's default random-init cube
    (:func:`box_half_size`), centred on the cameras' look point."""
    mid, _ = look_point(cameras)
    half = box_half_size(cameras)
    return mid + rng.uniform(-half, half, (count, 3))


def gaussians_from_points(points: np.ndarray, colors: np.ndarray, max_sh_degree: int,
                          init_opacity: float = 0.1, init_scale: float = 1.0) -> np.ndarray:
    """Packed rows [P, D]: isotropic Gaussians with scale = ``init_scale`` x the root mean
    square of the distances to the 3 nearest neighbours (3DGS's ``distCUDA2``, gsplat's
    ``knn``: sqrt of the mean squared distance), identity rotation, opacity
    ``init_opacity``, DC colour."""
    pts = np.asarray(points, np.float64)
    k = min(4, len(pts))
    dist, _ = cKDTree(pts).query(pts, k=k)
    d = np.sqrt((dist[:, 1:] ** 2).mean(axis=1)) if k > 1 else np.ones(len(pts))
    d = np.maximum(d * init_scale, 1e-7)
    n = len(pts)
    scales = np.repeat(np.log(d)[:, None], 3, axis=1)
    quats = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    logits = np.full(n, np.log(init_opacity / (1 - init_opacity)))
    sh0 = (colors.astype(np.float64) / 255.0 - 0.5) / SH_C0
    return pack(pts, scales, quats, logits, sh0, None, max_sh_degree)


def gaussians_from_file(path, max_sh_degree: int) -> tuple[np.ndarray, int, list[str]]:
    """(packed rows [N, D] float32, the file's SH degree kept (<= ``max_sh_degree``), notes)
    of the Gaussians in a splat file of any format spirula/engine/io/formats.py reads (PLY,
    compressed PLY, SPZ, SOG, .splat): the start of a fine-tuning run (`spirula train
    --init`). Quaternions are normalised; SH coefficients above ``max_sh_degree`` are
    dropped and missing ones are zero (a .splat or degree-0 file starts with flat colour).
    The notes name the file: its repairs on reading, an SH cut, and the PLY properties
    the training does not use (kept by `spirula export`, dropped here). SplatFileError /
    PlyError naming the file when it cannot be read; DatasetError-free (no dataset
    involved)."""
    from ..errors import SplatFileError
    from ..io.formats import detect, read_any

    g = read_any(path, warn=False)
    if len(g) == 0:
        raise SplatFileError(path, detect(path), "holds no Gaussians to start training from")
    notes = list(g.notes)
    if g.sh_degree > max_sh_degree:
        notes.append(f"{path}: SH degree {g.sh_degree} cut to the run's {max_sh_degree} (--sh-degree)")
    if g.extra:  # a PLY's own properties (a label, a confidence ...): the training has no place for them
        names = sorted(g.extra)
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        notes.append(f"{path}: {len(names)} unknown PLY propert{'y' if len(names) == 1 else 'ies'} ({shown}) not "
                     "used by the training and not in its output (spirula export keeps them)")
    q = np.asarray(g.quats, np.float64)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    rows = pack(g.means, g.scales, q, g.opacities, g.sh0, g.shN, max_sh_degree)
    return rows, min(g.sh_degree, max_sh_degree), notes
