"""Small CPU renderer for mesh previews (screenshots, thumbnails): z-buffer rasterisation of
triangles in NumPy (vectorised over triangle x candidate-pixel pairs, in chunks), colours
from a UV texture (nearest texel, perspective-correct UVs) or vertex colours, headlight
Lambert shading. Conventions: OpenCV camera axes, w2c world-to-camera, pixel centres at
+0.5, uv (0, 0) at the texture's bottom-left.
"""

from __future__ import annotations

import numpy as np

from ..pose import look_at  # noqa: F401  (part of this module's API: orbit_views, scripts)


def perpendicular_basis(normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors e1, e2 [3] with (e1, e2, normal) an orthonormal right-handed frame
    (``normal`` [3] unit): azimuths about an axis."""
    n = np.asarray(normal, np.float64)
    e1 = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(n, e1)


def render(verts, faces, w2c, focal: float, width: int, height: int, uvs=None, texture=None,
           vertex_colors=None, background=(255, 255, 255), chunk: int = 50_000) -> np.ndarray:
    """[H, W, 3] uint8 image of the mesh (verts [V, 3], faces [F, 3]) seen by a pinhole
    camera with focal length ``focal`` px and the principal point at the image centre."""
    verts = np.asarray(verts, np.float64)
    faces = np.asarray(faces, np.int64)
    pc = verts @ w2c[:3, :3].T + w2c[:3, 3]
    z = pc[:, 2]
    zs = np.where(z > 1e-6, z, 1e-6)
    xy = np.stack([focal * pc[:, 0] / zs + width / 2, focal * pc[:, 1] / zs + height / 2], 1)
    fn = np.cross(pc[faces[:, 1]] - pc[faces[:, 0]], pc[faces[:, 2]] - pc[faces[:, 0]])
    fn /= np.maximum(np.linalg.norm(fn, axis=1, keepdims=True), 1e-30)
    centre = pc[faces].mean(1)
    shade_f = np.abs((fn * centre).sum(1)) / np.maximum(np.linalg.norm(centre, axis=1), 1e-30)
    zbuf = np.full(width * height, np.inf)
    fbuf = np.full(width * height, -1, np.int64)
    bary = np.zeros((width * height, 3))
    for s in range(0, len(faces), chunk):
        ids = np.arange(s, min(s + chunk, len(faces)))
        ids = ids[(z[faces[ids]] > 1e-3).all(1)]
        t = xy[faces[ids]]
        lo = np.floor(t.min(1) - 0.5).astype(np.int64)
        hi = np.ceil(t.max(1) - 0.5).astype(np.int64)
        keep = (hi[:, 0] >= 0) & (hi[:, 1] >= 0) & (lo[:, 0] < width) & (lo[:, 1] < height)
        ids, t, lo, hi = ids[keep], t[keep], np.maximum(lo[keep], 0), np.minimum(hi[keep], [width - 1, height - 1])
        nx, ny = hi[:, 0] - lo[:, 0] + 1, hi[:, 1] - lo[:, 1] + 1
        cnt = np.maximum(nx, 0) * np.maximum(ny, 0)
        k = np.repeat(np.arange(len(ids)), cnt)
        off = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        px, py = lo[k, 0] + off % nx[k], lo[k, 1] + off // nx[k]
        a, e0, e1 = t[k, 0], t[k, 1] - t[k, 0], t[k, 2] - t[k, 0]
        d = np.stack([px + 0.5, py + 0.5], 1) - a
        area = e0[:, 0] * e1[:, 1] - e0[:, 1] * e1[:, 0]
        area = np.where(np.abs(area) > 1e-12, area, np.nan)
        l1 = (d[:, 0] * e1[:, 1] - d[:, 1] * e1[:, 0]) / area
        l2 = (e0[:, 0] * d[:, 1] - e0[:, 1] * d[:, 0]) / area
        lam = np.stack([1 - l1 - l2, l1, l2], 1)
        inside = (lam >= 0).all(1)
        k, px, py, lam = k[inside], px[inside], py[inside], lam[inside]
        w = lam / z[faces[ids[k]]]
        zi = 1.0 / w.sum(1)
        pix = py * width + px
        order = np.lexsort((zi, pix))
        pix, zi, k, w = pix[order], zi[order], k[order], w[order]
        first = np.r_[True, pix[1:] != pix[:-1]]
        pix, zi, k, w = pix[first], zi[first], k[first], w[first]
        closer = zi < zbuf[pix]
        pix = pix[closer]
        zbuf[pix] = zi[closer]
        fbuf[pix] = ids[k[closer]]
        bary[pix] = w[closer] * zi[closer, None]  # perspective-correct barycentrics
    hit = fbuf >= 0
    img = np.tile(np.asarray(background, np.float64), (width * height, 1))
    f = fbuf[hit]
    if uvs is not None and texture is not None:
        uv = (bary[hit, :, None] * np.asarray(uvs)[faces[f]]).sum(1)
        th, tw = texture.shape[:2]
        tx = np.clip((uv[:, 0] * tw).astype(np.int64), 0, tw - 1)
        ty = np.clip(((1 - uv[:, 1]) * th).astype(np.int64), 0, th - 1)
        col = texture[ty, tx, :3].astype(np.float64)
    elif vertex_colors is not None:
        col = (bary[hit, :, None] * np.asarray(vertex_colors, np.float64)[faces[f], :3]).sum(1)
    else:
        col = np.full((len(f), 3), 200.0)
    img[hit] = col * (0.35 + 0.65 * shade_f[f, None])
    return np.clip(img, 0, 255).astype(np.uint8).reshape(height, width, 3)


def orbit_views(verts, count: int = 4, elevation_deg: float = 25.0, up=(0.0, 0.0, 1.0)):
    """``count`` (w2c, focal-for-unit-width) looking at the bounding-box centre from evenly
    spaced azimuths, far enough for the bounding sphere to fit the view."""
    v = np.asarray(verts, np.float64)
    centre = (v.min(0) + v.max(0)) / 2
    radius = max(float(np.linalg.norm(v - centre, axis=1).max()), 1e-9)
    up = np.asarray(up, np.float64)
    up /= np.linalg.norm(up)
    a, b = perpendicular_basis(up)
    el = np.radians(elevation_deg)
    out = []
    for k in range(count):
        az = 2 * np.pi * k / count
        d = np.cos(el) * (np.cos(az) * a + np.sin(az) * b) + np.sin(el) * up
        out.append(look_at(centre + 2.6 * radius * d, centre, up))
    return out, 1.0 / (2 * np.tan(np.arcsin(1 / 2.6)) * 1.05)
