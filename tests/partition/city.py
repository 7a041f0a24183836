"""A synthetic city for the partition tests, made by an independent NumPy ray caster:
textured blocks on a ground plane, cameras walking the streets.

World: z up, ground plane z = 0 textured with a 1-unit checker inside the city square
(black outside it, and black sky). A grid of ``blocks`` x ``blocks`` boxes of side
``block`` with ``street``-wide streets between them; each block has its own colour,
facades with window stripes (period 0.5 in height) and a lighter roof. Cameras (pinhole,
OpenCV axes) stand at ``eye`` height on the street centre lines every ``spacing`` units
and look across the street at the facades (60 degrees off the street direction, both
sides), pitched down 20 degrees. SfM points: surface samples of the ground and the blocks,
uniform by area, coloured by the texture, with a little position noise.

The ray caster intersects every pixel's ray with the ground plane and every box (slab
method), keeps the nearest hit, shades it by the texture; it returns the hit points too
(the tests tell the pixels near a cell border by them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image



@dataclass
class City:
    boxes: np.ndarray         # [B, 6] x0, x1, y0, y1, 0, height
    colors: np.ndarray        # [B, 3] float base colour in [0, 1]
    square: tuple[float, float]  # ground texture extent [lo, hi] on x and y
    w2c: np.ndarray           # [C, 4, 4]
    names: list[str]
    width: int
    height: int
    focal: float


def make_city(blocks: int = 4, block: float = 2.0, street: float = 1.0, eye: float = 0.5, spacing: float = 1.5,
              width: int = 80, height: int = 60, fov_deg: float = 70.0, seed: int = 0) -> City:
    rng = np.random.default_rng(seed)
    pitch = block + street
    boxes, colors = [], []
    for i in range(blocks):
        for j in range(blocks):
            x0, y0 = street + i * pitch, street + j * pitch
            boxes.append([x0, x0 + block, y0, y0 + block, 0.0, rng.uniform(0.8, 2.2)])
            colors.append(rng.uniform(0.25, 0.95, 3))
    size = blocks * pitch + street
    lines = [street / 2 + k * pitch for k in range(blocks + 1)]
    poses = []
    for c in lines:
        for t in np.arange(spacing / 2, size, spacing):
            for along, pos in (((1.0, 0.0), (t, c)), ((0.0, 1.0), (c, t))):
                base = np.arctan2(along[1], along[0])
                for side in (-1.0, 1.0):
                    yaw = base + side * np.radians(60) + rng.uniform(-0.1, 0.1)
                    poses.append(_look(np.array([pos[0], pos[1], eye]), yaw, np.radians(-20)))
    focal = 0.5 * width / np.tan(np.radians(fov_deg) / 2)
    # names in a random order: the every-8th held-out views are a random sample of the walk
    names = [f"v{k:04d}.png" for k in rng.permutation(len(poses))]
    return City(np.array(boxes), np.array(colors), (0.0, size), np.stack(poses), names, width, height, focal)


def _look(center: np.ndarray, yaw: float, pitch: float) -> np.ndarray:
    """World-to-camera of a camera at ``center`` looking along yaw (from +x, about +z) and
    pitch (up positive), OpenCV axes, no roll."""
    fwd = np.array([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), np.sin(pitch)])
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(fwd, right)
    r = np.stack([right, down, fwd])  # rows: camera axes in world
    m = np.eye(4)
    m[:3, :3] = r
    m[:3, 3] = -r @ center
    return m


def rotation_to_qvec(r: np.ndarray) -> np.ndarray:
    """[3, 3] rotation -> unit quaternion (w, x, y, z), w >= 0 (Shepperd: the largest of
    the four diagonal combinations as the pivot, so any rotation converts)."""
    tr = np.trace(r)
    cands = [1 + tr, 1 + r[0, 0] - r[1, 1] - r[2, 2], 1 - r[0, 0] + r[1, 1] - r[2, 2], 1 - r[0, 0] - r[1, 1] + r[2, 2]]
    i = int(np.argmax(cands))
    s = 2.0 * np.sqrt(cands[i])
    if i == 0:
        q = [s / 4, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    elif i == 1:
        q = [(r[2, 1] - r[1, 2]) / s, s / 4, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s]
    elif i == 2:
        q = [(r[0, 2] - r[2, 0]) / s, (r[0, 1] + r[1, 0]) / s, s / 4, (r[1, 2] + r[2, 1]) / s]
    else:
        q = [(r[1, 0] - r[0, 1]) / s, (r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, s / 4]
    q = np.array(q)
    return q * (1 if q[0] >= 0 else -1) / np.linalg.norm(q)


def texture(city: City, p: np.ndarray, box: np.ndarray, normal_z: np.ndarray) -> np.ndarray:
    """[N, 3] colour of hit points p [N, 3]; box [N] index of the box hit (-1: ground)."""
    out = np.zeros((len(p), 3))
    ground = box < 0
    lo, hi = city.square
    in_sq = ground & (p[:, 0] >= lo) & (p[:, 0] <= hi) & (p[:, 1] >= lo) & (p[:, 1] <= hi)
    check = (np.floor(p[:, 0]) + np.floor(p[:, 1])) % 2
    out[in_sq] = (0.35 + 0.3 * check[in_sq])[:, None] * np.array([1.0, 0.95, 0.85])
    b = ~ground
    base = city.colors[np.maximum(box, 0)]
    stripes = 0.55 + 0.45 * ((p[:, 2] % 0.5) < 0.3)
    roof = normal_z > 0.5
    out[b & ~roof] = (base * stripes[:, None])[b & ~roof]
    out[b & roof] = np.minimum(base * 1.25, 1.0)[b & roof]
    return out


def cast(city: City, w2c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image [H, W, 3] float in [0, 1], hit points [H, W, 3] (nan: none), hit [H, W] bool)."""
    h, w, f = city.height, city.width, city.focal
    u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    d_cam = np.stack([(u - w / 2) / f, (v - h / 2) / f, np.ones_like(u)], -1).reshape(-1, 3)
    r, t = w2c[:3, :3], w2c[:3, 3]
    origin = -r.T @ t
    d = d_cam @ r                      # world directions (R^T d_cam per row)
    best = np.full(len(d), np.inf)
    which = np.full(len(d), -2)
    nz = np.zeros(len(d))
    with np.errstate(divide="ignore", invalid="ignore"):
        tg = -origin[2] / d[:, 2]
    ok = (tg > 1e-6) & np.isfinite(tg)
    best[ok], which[ok], nz[ok] = tg[ok], -1, 1.0
    inv = np.where(np.abs(d) < 1e-12, 1e-12, d)
    for k, bx in enumerate(city.boxes):  # a handful of boxes, every ray at once
        lo, hi = bx[[0, 2, 4]], bx[[1, 3, 5]]
        t0, t1 = (lo - origin) / inv, (hi - origin) / inv
        tmin, tmax = np.minimum(t0, t1), np.maximum(t0, t1)
        near, far = tmin.max(axis=1), tmax.min(axis=1)
        hit = (near <= far) & (near > 1e-6) & (near < best)
        best[hit], which[hit] = near[hit], k
        nz[hit] = (np.argmax(tmin, axis=1)[hit] == 2).astype(float)
    found = which > -2
    p = origin + d * np.where(found, best, 0.0)[:, None]
    col = np.zeros((len(d), 3))
    col[found] = texture(city, p[found], which[found], nz[found])
    p[~found] = np.nan
    return col.reshape(h, w, 3), p.reshape(h, w, 3), found.reshape(h, w)


def surface_points(city: City, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` points on the ground square and the blocks (uniform by area) and their colours."""
    lo, hi = city.square
    faces = [("g", -1, (hi - lo) ** 2)]
    for k, (x0, x1, y0, y1, _, z) in enumerate(city.boxes):
        faces += [("top", k, (x1 - x0) * (y1 - y0)), ("x", k, 2 * (y1 - y0) * z), ("y", k, 2 * (x1 - x0) * z)]
    area = np.array([a for _, _, a in faces])
    pick = rng.choice(len(faces), count, p=area / area.sum())
    pts, box, nz = np.zeros((count, 3)), np.full(count, -1), np.zeros(count)
    s = rng.uniform(size=(count, 3))
    for fi in np.unique(pick):  # per face kind (a few dozen), its points at once
        m = pick == fi
        kind, k, _ = faces[fi]
        if kind == "g":
            pts[m] = np.c_[lo + (hi - lo) * s[m, :2], np.zeros(m.sum())]
            nz[m] = 1.0
            continue
        x0, x1, y0, y1, _, z = city.boxes[k]
        box[m] = k
        if kind == "top":
            pts[m] = np.c_[x0 + (x1 - x0) * s[m, 0], y0 + (y1 - y0) * s[m, 1], np.full(m.sum(), z)]
            nz[m] = 1.0
        elif kind == "x":
            pts[m] = np.c_[np.where(s[m, 0] < 0.5, x0, x1), y0 + (y1 - y0) * s[m, 1], z * s[m, 2]]
        else:
            pts[m] = np.c_[x0 + (x1 - x0) * s[m, 1], np.where(s[m, 0] < 0.5, y0, y1), z * s[m, 2]]
    return pts, texture(city, pts, box, nz)


def write_city(root: Path, city: City, points: int = 6000, seed: int = 0) -> dict:
    """Write the city as a COLMAP text dataset (PINHOLE camera, PNG images). Returns
    {name: hit points [H, W, 3]} for every image."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    sparse = root / "sparse" / "0"
    sparse.mkdir(parents=True, exist_ok=True)
    hits = {}
    lines = []
    for k, (name, m) in enumerate(zip(city.names, city.w2c)):
        img, p, _ = cast(city, m)
        Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)).save(root / "images" / name)
        hits[name] = p
        q = rotation_to_qvec(m[:3, :3])
        lines.append(" ".join([str(k + 1)] + [repr(float(x)) for x in (*q, *m[:3, 3])] + ["1", name]) + "\n")
    (sparse / "images.txt").write_text("".join(line + "\n" for line in lines))  # empty POINTS2D lines
    f, w, h = float(city.focal), city.width, city.height
    (sparse / "cameras.txt").write_text(f"1 PINHOLE {w} {h} {f!r} {f!r} {w / 2!r} {h / 2!r}\n")
    pts, cols = surface_points(city, points, rng)
    pts = pts + rng.normal(0, 0.01, pts.shape)
    rgb = (np.clip(cols, 0, 1) * 255 + 0.5).astype(int)
    (sparse / "points3D.txt").write_text("".join(
        f"{i + 1} {x:.9g} {y:.9g} {z:.9g} {r} {g} {b} 0.5\n" for i, ((x, y, z), (r, g, b)) in enumerate(zip(pts, rgb))))
    return hits
