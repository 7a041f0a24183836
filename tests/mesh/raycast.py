"""A NumPy reference for the viewport's triangle rasteriser: a ray through every pixel
centre, Moller-Trumbore intersection with every triangle in float64, the nearest hit's
barycentrics (exactly the perspective-correct ones) interpolate uv, a bilinear (repeat)
texture lookup, the headlight term; and small textured test meshes."""

from __future__ import annotations

import numpy as np

from spirula.engine.studio.mesh_raster import AMBIENT
from spirula.engine.studio.mesh_view import TexturedMesh


def rotation(rng):
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def cube(rng, texture):
    """24 vertices (4 per face, each face's uv the whole [0, 1] square), 12 triangles."""
    verts, uv, faces = [], [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            a, b = [k for k in range(3) if k != axis]
            corners = []
            for u, v in ((0, 0), (1, 0), (1, 1), (0, 1)):
                p = np.zeros(3)
                p[axis], p[a], p[b] = sign, 2 * u - 1, 2 * v - 1
                corners.append(p)
                uv.append((u, v))
            base = len(verts)
            verts += corners
            faces += [(base, base + 1, base + 2), (base, base + 2, base + 3)]
    r = rotation(rng)
    v = np.asarray(verts) @ r.T * rng.uniform(0.6, 1.0) + rng.normal(scale=0.2, size=3)
    return TexturedMesh(v.astype(np.float32), np.asarray(faces, np.uint32), np.asarray(uv, np.float32), texture,
                        np.full((len(verts), 3), 255, np.uint8))


def checker(n=8, cell=4):
    i, j = np.indices((n * cell, n * cell)) // cell
    tex = np.where(((i + j) % 2)[..., None] == 0, (230, 210, 40), (30, 60, 200)).astype(np.uint8)
    tex[: cell, : cell] = (220, 20, 20)  # one odd cell: a flipped or mirrored lookup shows
    return tex


def look_at(eye, target):
    fwd = target - eye
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    down = np.cross(fwd, right)
    r = np.stack([right, down, fwd])  # rows: camera x (right), y (down), z (forward) in world
    w2c = np.eye(4)
    w2c[:3, :3], w2c[:3, 3] = r, -r @ eye
    return w2c


def reference(mesh, w2c, f, W, H, shading="texture"):
    """[H, W, 3] float64 and [H, W] coverage by ray casting (the same camera model)."""
    cx, cy = W / 2, H / 2
    x, y = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    d = np.stack([(x - cx) / f, (y - cy) / f, np.ones_like(x)], -1).reshape(-1, 3)  # camera-space rays
    v = mesh.vertices.astype(np.float64) @ w2c[:3, :3].T + w2c[:3, 3]
    tri = v[mesh.faces.astype(np.int64)]                                  # [F, 3, 3]
    e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    pv = np.cross(d[:, None, :], e2[None])                                 # [P, F, 3]
    det = np.einsum("pfk,fk->pf", pv, e1)
    inv = 1.0 / np.where(np.abs(det) < 1e-15, np.nan, det)
    tv = -tri[None, :, 0]                                                  # ray origin 0 - v0
    b1 = np.einsum("pfk,pfk->pf", np.broadcast_to(tv, pv.shape), pv) * inv
    qv = np.cross(np.broadcast_to(tv, pv.shape), e1[None])
    b2 = np.einsum("pk,pfk->pf", d, qv) * inv
    t = np.einsum("fk,pfk->pf", e2, qv) * inv
    hit = (b1 >= 0) & (b2 >= 0) & (b1 + b2 <= 1) & (t > 0)
    t = np.where(hit, t, np.inf)
    best = np.argmin(t, axis=1)
    covered = np.isfinite(t[np.arange(len(d)), best])
    b1, b2 = b1[np.arange(len(d)), best], b2[np.arange(len(d)), best]
    bary = np.stack([1 - b1 - b2, b1, b2], -1)
    idx = mesh.faces.astype(np.int64)[best]
    uv = np.einsum("pk,pkc->pc", bary, mesh.uv.astype(np.float64)[idx])
    tex = mesh.texture.astype(np.float64) / 255.0
    th, tw = tex.shape[:2]
    qx, qy = uv[:, 0] * tw - 0.5, (1 - uv[:, 1]) * th - 0.5
    x0, y0 = np.floor(qx).astype(np.int64), np.floor(qy).astype(np.int64)
    fx, fy = (qx - x0)[:, None], (qy - y0)[:, None]
    s = lambda yy, xx: tex[yy % th, xx % tw]  # noqa: E731
    col = ((1 - fx) * (1 - fy) * s(y0, x0) + fx * (1 - fy) * s(y0, x0 + 1)
           + (1 - fx) * fy * s(y0 + 1, x0) + fx * fy * s(y0 + 1, x0 + 1))
    if shading == "shaded":
        n = np.cross(e1, e2)[best]
        n /= np.linalg.norm(n, axis=1, keepdims=True)
        cos = np.abs(np.einsum("pk,pk->p", n, d / np.linalg.norm(d, axis=1, keepdims=True)))
        col *= (AMBIENT + (1 - AMBIENT) * cos)[:, None]
    col[~covered] = 0
    return col.reshape(H, W, 3), covered.reshape(H, W)
