"""A synthetic capture with a known object, made without any of our splat code: a textured
box standing on a textureless table top inside a textured room, seen by cameras orbiting
the box at two heights, rendered by an analytic NumPy ray caster (float64, vectorised over
pixels) into a COLMAP text dataset.

Conventions: world z up, metres; the table top is the plane z = 0 (|x|, |y| <= TABLE_HALF,
seen from above only), the box stands on it (BOX_LO..BOX_HI), the room is the inside of
the box ROOM_LO..ROOM_HI. OpenCV camera axes, w2c world-to-camera, pixel centres at +0.5;
depth is camera z. Colours are unlit albedo (the same from every view, as the Lambertian
limit of a real capture) averaged over SUPERSAMPLE^2 sub-pixel rays, which anti-aliases
the textures. The "SfM" points are surface samples of the textured surfaces with noise
and outliers (a textureless table gives COLMAP no points, so it has none here).

Reference: slab ray-box intersection (Kay & Kajiya 1986); the exact box SDF (its unsigned
value is the distance to the box surface inside and outside).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from tests.mesh.analytic import pixel_rays
from tests.robustness.fixtures import colmap_text, write_files
from tests.splat.scenes import look_at_w2c

BOX_LO, BOX_HI = np.array([-0.35, -0.25, 0.0]), np.array([0.35, 0.25, 0.6])
TABLE_HALF = 0.9
TABLE_RGB = np.array([0.82, 0.80, 0.76])
ROOM_LO, ROOM_HI = np.array([-2.6, -2.4, -0.9]), np.array([2.6, 2.4, 1.7])
SUPERSAMPLE = 2
BOX_FACE_SHADE = np.array([0.80, 0.95, 0.70, 1.00, 0.60, 1.00])  # by face -x +x -y +y -z +z


def box_diagonal() -> float:
    return float(np.linalg.norm(BOX_HI - BOX_LO))


def orbit(count: int, radius: float, heights, size: int, focal: float) -> list[tuple]:
    """``count`` cameras per height (w2c [4,4], fx, fy, cx, cy, W, H) on circles of
    ``radius`` around the box's vertical axis, looking at the box centre, image up = +z;
    each ring is turned half a step from the one below it."""
    target = (BOX_LO + BOX_HI) / 2
    cams = []
    for k, z in enumerate(heights):
        for i in range(count):
            a = 2 * np.pi * (i + 0.5 * k) / count
            eye = (radius * np.cos(a), radius * np.sin(a), z)
            cams.append((look_at_w2c(eye, target, (0.0, 0.0, -1.0)), focal, focal, size / 2, size / 2, size, size))
    return cams


def _slab(o, d, lo, hi):
    """Entry and exit ray parameters [N] of the box lo..hi, and the axis [N] of each (the
    last slab entered / first left)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / d
        t0, t1 = (lo - o) * inv, (hi - o) * inv
    near, far = np.minimum(t0, t1), np.maximum(t0, t1)
    near, far = np.nan_to_num(near, nan=-np.inf), np.nan_to_num(far, nan=np.inf)
    return near.max(1), far.min(1), near.argmax(1), far.argmin(1)


def _checker(u, v, cell):
    return (np.floor(u / cell) + np.floor(v / cell)) % 2


def box_albedo(p: np.ndarray, face: np.ndarray) -> np.ndarray:
    """[N, 3] albedo on the box at points ``p`` [N, 3] of ``face`` [N] (0..5 as
    BOX_FACE_SHADE): a 3D checker of 6 cm in orange and blue with fine stripes, so every
    face has texture at the scale of a few pixels."""
    k = (np.floor(p[:, 0] / 0.06) + np.floor(p[:, 1] / 0.06) + np.floor(p[:, 2] / 0.06)) % 2
    a, b = np.array([0.95, 0.55, 0.15]), np.array([0.15, 0.40, 0.90])
    stripes = 0.85 + 0.15 * np.sin(2 * np.pi * (p[:, 0] + 2 * p[:, 1] + 3 * p[:, 2]) / 0.045)
    return np.where(k[:, None] > 0, a, b) * (stripes * BOX_FACE_SHADE[face])[:, None]


def room_albedo(p: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """[N, 3] albedo of the room's inside at points ``p`` [N, 3] on the wall across
    ``axis`` [N] (0, 1: walls; 2: floor or ceiling): bricks on the walls, tiles on the floor
    and the ceiling, each with a slow colour gradient."""
    x, y, z = p[:, 0], p[:, 1], p[:, 2]
    along = np.where(axis == 0, y, x)
    row = np.floor(z / 0.12)
    brick = _checker(along + 0.1 * (row % 2), z, 0.2)
    wall = np.where(brick[:, None] > 0, [0.70, 0.35, 0.25], [0.90, 0.85, 0.70]) * (0.8 + 0.2 * np.cos(along))[:, None]
    tile = _checker(x, y, 0.3)
    floor = np.where(tile[:, None] > 0, [0.30, 0.55, 0.35], [0.85, 0.85, 0.90]) * (0.8 + 0.2 * np.sin(x + y))[:, None]
    return np.where((axis == 2)[:, None], floor, wall)


def cast(o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First hits of rays from ``o`` [3] along ``d`` [N, 3]: (t [N] along d, rgb [N, 3]).
    The nearest of box, table top (from above) and room walls wins."""
    on = np.broadcast_to(o, d.shape)
    n0, n1, axis, _ = _slab(on, d, BOX_LO, BOX_HI)
    t_box = np.where((n0 <= n1) & (n0 > 0), n0, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_tab = -o[2] / d[:, 2]
    q = o + t_tab[:, None] * d
    on_tab = (d[:, 2] < 0) & (np.abs(q[:, 0]) <= TABLE_HALF) & (np.abs(q[:, 1]) <= TABLE_HALF) & (t_tab > 0)
    t_tab = np.where(on_tab, t_tab, np.inf)
    _, t_room, _, wall = _slab(on, d, ROOM_LO, ROOM_HI)  # inside the room: its exit is the wall seen
    t = np.minimum(np.minimum(t_box, t_tab), t_room)
    p = o + t[:, None] * d
    sign = d[np.arange(len(d)), axis] < 0  # entered through the +side of that axis
    face = 2 * axis + sign
    rgb = room_albedo(p, wall)
    rgb = np.where((t == t_tab)[:, None], TABLE_RGB, rgb)
    hit_box = t == t_box
    rgb[hit_box] = box_albedo(p[hit_box], face[hit_box])
    return t, rgb


def render(cam, ss: int = SUPERSAMPLE) -> tuple[np.ndarray, np.ndarray]:
    """(image [H, W, 3] float64 in [0, 1], depth [H, W] camera z of the centre rays)."""
    w2c, fx, fy, cx, cy, w, h = cam
    o, rays = pixel_rays(w2c, fx * ss, fy * ss, cx * ss, cy * ss, w * ss, h * ss)
    t, rgb = cast(o, rays.reshape(-1, 3))
    img = rgb.reshape(h, ss, w, ss, 3).mean((1, 3))
    # sub-pixel rays have camera z = 1, so t is depth; the one nearest the centre stands for it
    depth = t.reshape(h, ss, w, ss)[:, ss // 2, :, ss // 2]
    return img, depth


def box_samples(count: int, rng, bottom: bool = True) -> np.ndarray:
    """[count, 3] area-uniform points on the box surface (without its bottom face, which
    stands on the table, when ``bottom`` is False)."""
    ext = BOX_HI - BOX_LO
    faces = [(ax, side) for ax in range(3) for side in (0, 1) if bottom or (ax, side) != (2, 0)]
    area = np.array([np.prod(np.delete(ext, ax)) for ax, _ in faces])
    pick = rng.choice(len(faces), count, p=area / area.sum())
    p = BOX_LO + rng.uniform(size=(count, 3)) * ext
    ax = np.array([faces[k][0] for k in pick])
    side = np.array([faces[k][1] for k in pick])
    p[np.arange(count), ax] = np.where(side == 1, BOX_HI[ax], BOX_LO[ax])
    return p


def box_distance(points: np.ndarray) -> np.ndarray:
    """Exact unsigned distance [N] from points [N, 3] to the box surface."""
    c, half = (BOX_LO + BOX_HI) / 2, (BOX_HI - BOX_LO) / 2
    q = np.abs(points - c) - half
    outside = np.linalg.norm(np.maximum(q, 0), axis=1)
    return np.abs(outside + np.minimum(q.max(1), 0))


def sfm_like_points(rng, box: int = 3000, room: int = 3000, noise: float = 0.004,
                    outliers: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(points [P, 3], colours [P, 3] uint8): the textured surfaces as COLMAP would
    triangulate them: the box's visible faces and the room's walls, floor and ceiling,
    with Gaussian noise and a share of uniform outliers in the room; none on the table."""
    pb = box_samples(box, rng, bottom=False)
    ext = ROOM_HI - ROOM_LO
    area = np.array([ext[1] * ext[2], ext[0] * ext[2], ext[0] * ext[1]])
    ax = rng.choice(3, room, p=area / area.sum())
    pr = ROOM_LO + rng.uniform(size=(room, 3)) * ext
    pr[np.arange(room), ax] = np.where(rng.uniform(size=room) < 0.5, ROOM_LO[ax], ROOM_HI[ax])
    face = np.argmin(np.abs(pb - BOX_LO) * 1e6, axis=1)  # only for the colour: any face index is fine
    cols = np.concatenate([box_albedo(pb, face), room_albedo(pr, ax)])
    pts = np.concatenate([pb, pr]) + rng.normal(0, noise, (box + room, 3))
    n_out = int(len(pts) * outliers)
    idx = rng.choice(len(pts), n_out, replace=False)
    pts[idx] = ROOM_LO + rng.uniform(size=(n_out, 3)) * ext
    return pts, (np.clip(cols, 0, 1) * 255 + 0.5).astype(np.uint8)


def write_room_dataset(root: Path, cams, rng) -> list[np.ndarray]:
    """PNG images/ + a COLMAP text model in sparse/0 (PINHOLE cameras, the SfM-like
    points); returns the images [H, W, 3] uint8."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    cameras, images, out = [], [], []
    for i, cam in enumerate(cams):
        img, _ = render(cam)
        img = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
        name = f"view_{i:03d}.png"
        Image.fromarray(img).save(root / "images" / name)
        out.append(img)
        w2c, fx, fy, cx, cy, w, h = cam
        cameras.append((i + 1, "PINHOLE", w, h, (fx, fy, cx, cy)))
        images.append((i + 1, w2c, i + 1, name, 0))
    pts, cols = sfm_like_points(rng)
    write_files(root / "sparse" / "0", colmap_text(cameras, images, pts, cols))  # any rotation converts
    return out
