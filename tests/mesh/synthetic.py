"""A synthetic scene with known geometry for the mesh quality check, made without any of
our splat code: a solid-textured torus rendered by a small NumPy z-buffer rasteriser into
a COLMAP text dataset (PINHOLE cameras on a sphere around it, black background).

Conventions: OpenCV camera axes, w2c world-to-camera, pixel centres at +0.5; depth is
camera z; perspective-correct interpolation (barycentrics divided by z, Heckbert &
Moreton 1991).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from scipy.spatial.transform import Rotation

TORUS_R, TORUS_r = 0.75, 0.3
TILT = Rotation.from_euler("xy", [35.0, 20.0], degrees=True).as_matrix()  # object -> world


def torus_mesh(nu: int = 160, nv: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(vertices [nu*nv, 3] world, faces [2*nu*nv, 3] int64, outward normals by winding)."""
    u, v = np.meshgrid(np.arange(nu) * 2 * np.pi / nu, np.arange(nv) * 2 * np.pi / nv, indexing="ij")
    ring = TORUS_R + TORUS_r * np.cos(v)
    p = np.stack([ring * np.cos(u), ring * np.sin(u), TORUS_r * np.sin(v)], -1).reshape(-1, 3)
    i, j = np.meshgrid(np.arange(nu), np.arange(nv), indexing="ij")
    a = (i * nv + j).ravel()
    b = (((i + 1) % nu) * nv + j).ravel()
    c = (((i + 1) % nu) * nv + (j + 1) % nv).ravel()
    d = (i * nv + (j + 1) % nv).ravel()
    faces = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    return p @ TILT.T, faces


def torus_distance(points: np.ndarray) -> np.ndarray:
    """Exact unsigned distance [N] from world points to the torus surface."""
    q = points @ TILT  # world -> object frame
    ring = np.hypot(q[:, 0], q[:, 1]) - TORUS_R
    return np.abs(np.hypot(ring, q[:, 2]) - TORUS_r)


def torus_samples(count: int, rng) -> np.ndarray:
    """[count, 3] area-uniform points on the torus (rejection on the ring factor)."""
    out = []
    while sum(len(o) for o in out) < count:
        u, v = rng.uniform(0, 2 * np.pi, (2, 2 * count))
        keep = rng.uniform(0, TORUS_R + TORUS_r, 2 * count) < TORUS_R + TORUS_r * np.cos(v)
        u, v = u[keep], v[keep]
        ring = TORUS_R + TORUS_r * np.cos(v)
        out.append(np.stack([ring * np.cos(u), ring * np.sin(u), TORUS_r * np.sin(v)], -1))
    return np.concatenate(out)[:count] @ TILT.T


def solid_texture(p: np.ndarray) -> np.ndarray:
    """[..., 3] float RGB in [0, 1] at world points: a 3D checker of 0.25 units in two
    colours, brightened along world z."""
    k = (np.floor(p[..., 0] * 4) + np.floor(p[..., 1] * 4) + np.floor(p[..., 2] * 4)) % 2
    a, b = np.array([0.95, 0.55, 0.15]), np.array([0.15, 0.45, 0.9])
    shade = 0.65 + 0.35 * np.clip((p[..., 2] + 1) / 2, 0, 1)
    return np.where(k[..., None] > 0, a, b) * shade[..., None]


def rasterize(verts, faces, w2c, fx, fy, cx, cy, width, height, chunk: int = 20000):
    """Z-buffer render: (depth [H, W] camera z, inf where empty; position [H, W, 3] world
    point seen, perspective-correct). Vectorised over (face, candidate pixel) pairs."""
    pc = verts @ w2c[:3, :3].T + w2c[:3, 3]
    z = pc[:, 2]
    uv = np.stack([fx * pc[:, 0] / z + cx, fy * pc[:, 1] / z + cy], 1)
    best = np.full(width * height, np.inf)
    pos = np.zeros((width * height, 3))
    for s in range(0, len(faces), chunk):
        f = faces[s:s + chunk]
        f = f[(z[f] > 0.05).all(1)]
        t = uv[f]                                          # [n, 3, 2]
        lo = np.clip(np.floor(t.min(1) - 0.5).astype(int), 0, [width - 1, height - 1])
        hi = np.clip(np.ceil(t.max(1) - 0.5).astype(int), 0, [width - 1, height - 1])
        nx, ny = hi[:, 0] - lo[:, 0] + 1, hi[:, 1] - lo[:, 1] + 1
        cnt = nx * ny
        fid = np.repeat(np.arange(len(f)), cnt)
        k = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        px = lo[fid, 0] + k % nx[fid]
        py = lo[fid, 1] + k // nx[fid]
        a, b, c = t[fid, 0], t[fid, 1], t[fid, 2]
        e0, e1 = b - a, c - a
        d = np.stack([px + 0.5, py + 0.5], 1) - a
        area = e0[:, 0] * e1[:, 1] - e0[:, 1] * e1[:, 0]
        ok = np.abs(area) > 1e-12
        area = np.where(ok, area, 1.0)
        l1 = (d[:, 0] * e1[:, 1] - d[:, 1] * e1[:, 0]) / area
        l2 = (e0[:, 0] * d[:, 1] - e0[:, 1] * d[:, 0]) / area
        l0 = 1 - l1 - l2
        inside = ok & (l0 >= 0) & (l1 >= 0) & (l2 >= 0)
        fid, px, py = fid[inside], px[inside], py[inside]
        lam = np.stack([l0, l1, l2], 1)[inside] / z[f[fid]]  # perspective-correct weights
        zi = 1.0 / lam.sum(1)
        p = (lam[:, :, None] * verts[f[fid]]).sum(1) * zi[:, None]
        pix = py * width + px
        order = np.lexsort((zi, pix))
        pix, zi, p = pix[order], zi[order], p[order]
        first = np.r_[True, pix[1:] != pix[:-1]]
        pix, zi, p = pix[first], zi[first], p[first]
        closer = zi < best[pix]
        best[pix[closer]] = zi[closer]
        pos[pix[closer]] = p[closer]
    return best.reshape(height, width), pos.reshape(height, width, 3)


def write_dataset(root: Path, cams, verts, faces, points: np.ndarray | None = None) -> list[np.ndarray]:
    """COLMAP text model (sparse/0, PINHOLE cameras, ``points`` [P, 3] as points3D coloured
    by the texture) + PNG images; returns the images."""
    (root / "sparse" / "0").mkdir(parents=True, exist_ok=True)
    (root / "images").mkdir(parents=True, exist_ok=True)
    cam_lines, img_lines, images = [], [], []
    for i, (w2c, fx, fy, cx, cy, w, h) in enumerate(cams):
        depth, pos = rasterize(verts, faces, w2c, fx, fy, cx, cy, w, h)
        hit = np.isfinite(depth)
        img = np.where(hit[..., None], solid_texture(pos), 0.0)
        img = (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)
        name = f"view_{i:03d}.png"
        Image.fromarray(img).save(root / "images" / name)
        images.append(img)
        qx, qy, qz, qw = Rotation.from_matrix(w2c[:3, :3]).as_quat()
        nums = lambda *vals: " ".join(repr(float(v)) for v in vals)
        cam_lines.append(f"{i + 1} PINHOLE {w} {h} {nums(fx, fy, cx, cy)}")
        img_lines += [f"{i + 1} {nums(qw, qx, qy, qz, *w2c[:3, 3])} {i + 1} {name}", ""]
    (root / "sparse" / "0" / "cameras.txt").write_text("\n".join(cam_lines) + "\n")
    (root / "sparse" / "0" / "images.txt").write_text("\n".join(img_lines) + "\n")
    if points is not None:
        rgb = (np.clip(solid_texture(points), 0, 1) * 255 + 0.5).astype(int)
        lines = [f"{k + 1} {p[0]!r} {p[1]!r} {p[2]!r} {c[0]} {c[1]} {c[2]} 0.5"
                 for k, (p, c) in enumerate(zip(points.tolist(), rgb.tolist()))]  # no tracks
        (root / "sparse" / "0" / "points3D.txt").write_text("\n".join(lines) + "\n")
    return images


def sfm_like_points(count: int, rng, noise: float = 0.01, outliers: float = 0.05) -> np.ndarray:
    """[count, 3] stand-in for a structure-from-motion point cloud: surface samples with
    Gaussian noise (``noise`` world units) plus a fraction of uniform outliers in the
    object's box, as COLMAP triangulates a textured object."""
    n_out = int(count * outliers)
    pts = torus_samples(count - n_out, rng) + rng.normal(0, noise, (count - n_out, 3))
    lo, hi = pts.min(0), pts.max(0)
    return np.concatenate([pts, rng.uniform(lo, hi, (n_out, 3))])


def mesh_samples(verts, faces, count: int, rng) -> np.ndarray:
    """[count, 3] area-uniform samples of a triangle mesh."""
    tri = verts[faces]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    f = rng.choice(len(faces), count, p=area / area.sum())
    r1, r2 = rng.uniform(size=(2, count))
    s = np.sqrt(r1)
    b = np.stack([1 - s, s * (1 - r2), s * r2], 1)
    return (b[:, :, None] * tri[f]).sum(1)


def surface_metrics(verts, faces, rng, count: int = 100_000, samples=torus_samples, distance=torus_distance) -> dict:
    """Chamfer distance (mean of the two mean nearest-surface distances) and F-score at
    0.5% and 1% of the bounding-box diagonal of the true surface (default the torus),
    from ``count`` area-uniform samples of each surface; mesh -> truth distances are
    exact (``distance`` [N, 3] -> [N]), truth -> mesh use a k-d tree on the mesh samples.
    ``samples(count, rng)`` [count, 3] samples the true surface."""
    from scipy.spatial import cKDTree

    gt = samples(count, rng)
    pred = mesh_samples(verts, faces, count, rng)
    diag = float(np.linalg.norm(gt.max(0) - gt.min(0)))
    d_pred = distance(pred)
    d_gt, _ = cKDTree(pred).query(gt)
    out = {"diag": diag, "chamfer": 0.5 * (d_pred.mean() + d_gt.mean())}
    out["chamfer_rel"] = out["chamfer"] / diag
    for pct in (0.5, 1.0):
        tau = pct / 100 * diag
        p, r = (d_pred < tau).mean(), (d_gt < tau).mean()
        out[f"precision@{pct}%"], out[f"recall@{pct}%"] = float(p), float(r)
        out[f"fscore@{pct}%"] = float(2 * p * r / max(p + r, 1e-12))
    return out
