"""Multi-view depth consistency of the rendered depth maps (kernel: shaders/mesh/consistency.slang).

Serves every capture class (orbits, partial orbits, walks, rooms seen from inside): the depth
a view renders of a real surface is where its neighbours render it too, while a floater in
front of one camera, or the depth a blob-shaped splat gives at one viewing angle only (one
sheet per view once fused), is not. So a pixel's depth goes to the fusion only when at least
``min_agree`` of its neighbouring views, reprojected, agree with it within a relative
tolerance (classic multi-view stereo fusion: COLMAP's stereo fusion, Gipuma); the math is in
the kernel's header.

Neighbours (:func:`choose_neighbours`): for each view, the views that see most of what it
sees (share of a grid of its depth samples that land inside their image, in front, not
hidden behind their own depth), each
weighted down when its viewing direction on those points differs by less than
``min_angle_deg`` from the view's: two frames a step apart see the same floater, a view from
elsewhere does not.

*What the photos measure* (serves an object on a plain support, and any capture with plain
regions: walls, tables, floors): a rendered depth is a measurement only where the photos hold
it. One test beside the geometric one, for the depths the fusion takes (:func:`measured_depths`; the bounds step keeps
the geometric test alone, spirula/engine/mesh/bounds.py, which handles texture its own way):

1. *Photometric* (``photos`` in :func:`consistent_depths`): the neighbours whose depth agrees
   see the point; a surface point has one colour in all of them (within twice each photo's
   noise, the 3 x 3 pixels around the pixel and around its reprojection: the reprojection's
   uncertainty and the pixels' different footprints on a slanted surface). A plain table's splats grow
   into sheets against an object, shaped so each view's photo is explained: seen from the
   front they carry the object's colour, from the side the table's; the neighbour that sees
   the table's colour where the view sees the object's contradicts the depth, which goes.
   Measured (mesh_gt d, a toy on a plain table, CI size): the sheets' depths are 1-2 cm in
   front of the toy's corners where the true surface's depth is within 0.5%.
Not a test: a plain patch of a photo (no texture) does not drop the depths there. An
object with plain faces (a black office chair's back: every 5 x 5 window under one grey level
in office_chair's frames) is measured by its silhouettes from many views, not by texture, and
the fusion needs those depths; a texture rule here cut mesh_gt d's sheets (F@1% 0.890 ->
0.902) but would leave such an object without its plain faces.

Conventions: depth maps [H, W] float32 camera z (OpenCV axes, world units), 0 where there
is none; cameras as w2c [V, 4, 4] float64 and intrinsics [V, 6] (fx, fy, cx, cy, W, H).
"""

from __future__ import annotations

import numpy as np


from ..device import Gpu
from .bounds import image_contrast


def _sample_points(w2c: np.ndarray, intr: np.ndarray, depth: np.ndarray, grid: int) -> np.ndarray:
    """World points [S, 3] of a ``grid`` x ``grid`` lattice of pixels of one depth map that
    hold a depth."""
    h, w = depth.shape
    xs = ((np.arange(grid) + 0.5) * w / grid).astype(int)
    ys = ((np.arange(grid) + 0.5) * h / grid).astype(int)
    u, v = np.meshgrid(xs, ys)
    d = depth[v, u].astype(np.float64)
    ok = d > 0.01
    fx, fy, cx, cy = intr[:4]
    rc = np.stack([(u[ok] + 0.5 - cx) / fx, (v[ok] + 0.5 - cy) / fy, np.ones(ok.sum())], 1) * d[ok, None]
    r, t = w2c[:3, :3], w2c[:3, 3]
    return (rc - t) @ r  # R^T (p_c - t)


def choose_neighbours(w2c: np.ndarray, intrinsics: np.ndarray, depths, count: int = 8, min_overlap: float = 0.2,
                      min_angle_deg: float = 5.0, grid: int = 16, occlusion_tol: float = 0.05) -> np.ndarray:
    """[V, count] int32: per view, the indices of up to ``count`` other views ranked by
    overlap x min(1, angle / ``min_angle_deg``), -1 after the last; a view is a neighbour only
    when at least ``min_overlap`` of the view's samples land in its image in front of it.
    ``depths``: a sequence of V depth maps [H, W]. overlap(i, j) is the share of a ``grid`` x
    ``grid`` lattice of i's pixels with depth whose points project inside j's image at
    positive depth and not behind j's own depth there by more than ``occlusion_tol`` of it;
    angle(i, j) the median angle (degrees) at those points between the rays
    from i's and j's centres. O(V^2 grid^2) NumPy, one vectorised pass per view."""
    w2c = np.asarray(w2c, np.float64)
    intr = np.asarray(intrinsics, np.float64)
    n = len(w2c)
    r, t = w2c[:, :3, :3], w2c[:, :3, 3]
    centres = -np.einsum("vji,vj->vi", r, t)
    shapes = np.array([np.asarray(d).shape for d in depths], np.int64)            # [V, 2] (H, W)
    flat = np.concatenate([np.asarray(d, np.float32).reshape(-1) for d in depths])
    offsets = np.concatenate([[0], np.cumsum(shapes[:, 0] * shapes[:, 1])[:-1]])
    out = np.full((n, count), -1, np.int32)
    for i in range(n):  # one vectorised pass per view (V passes), not per pixel
        pts = _sample_points(w2c[i], intr[i], np.asarray(depths[i]), grid)
        if len(pts) == 0:
            continue
        pc = np.einsum("vab,sb->vsa", r, pts) + t[:, None, :]            # [V, S, 3]
        z = pc[..., 2]
        zs = np.where(z > 0.01, z, 1.0)
        u = intr[:, 0, None] * pc[..., 0] / zs + intr[:, 2, None]
        v = intr[:, 1, None] * pc[..., 1] / zs + intr[:, 3, None]
        inside = (z > 0.01) & (u >= 0) & (v >= 0) & (u < intr[:, 4, None]) & (v < intr[:, 5, None])
        # not hidden behind what view j renders there (one gather over all views)
        iu = np.clip(np.where(inside, u, 0).astype(np.int64), 0, shapes[:, 1, None] - 1)
        iv = np.clip(np.where(inside, v, 0).astype(np.int64), 0, shapes[:, 0, None] - 1)
        dj = flat[offsets[:, None] + iv * shapes[:, 1, None] + iu]
        inside &= z <= (1.0 + occlusion_tol) * dj
        overlap = inside.mean(1)
        a = pts[None] - centres[:, None, :]
        a /= np.linalg.norm(a, axis=-1, keepdims=True)
        cos = np.clip((a * a[i][None]).sum(-1), -1.0, 1.0)
        angle = np.degrees(np.median(np.arccos(cos), axis=1))
        score = overlap * np.minimum(1.0, angle / max(min_angle_deg, 1e-9))
        score[i] = -1.0
        score[overlap < min_overlap] = -1.0
        order = np.argsort(-score, kind="stable")[:count]
        order = order[score[order] > 0]
        out[i, :len(order)] = order
    return out


def consistent_depths(gpu: Gpu, cams, depths, neighbours: np.ndarray, tol_rel: float = 0.01,
                      min_agree: int = 2, photos=None, photo_tol=None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(kept, counts): per view, the depth map [H, W] float32 with the depths fewer than
    ``min_agree`` neighbours agree with set to 0, and the [H, W] uint32 count of agreeing
    neighbours. ``cams``: the uploaded camera table whose rows 0..V-1 are the views;
    ``depths``: V depth maps [H, W] float32 (0 = none); ``neighbours`` [V, K] int32 of
    :func:`choose_neighbours`. ``photos``: V photos [H, W, 3] (uint8, or float in 0..1) with
    ``photo_tol`` [V] their colour tolerances (0..1; twice their noise): the photometric test
    (module docstring; a neighbour agrees when it sees the point and its colour, and a depth
    any neighbour contradicts goes). All views run on the GPU in one submission."""
    shapes = [np.asarray(d).shape for d in depths]
    sizes = np.array([h * w for h, w in shapes], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint32)
    total = int(sizes.sum())
    flat = np.concatenate([np.ascontiguousarray(d, np.float32).reshape(-1) for d in depths])
    nb = np.ascontiguousarray(neighbours, np.int32)
    k = gpu.kernel("mesh/consistency", "consistent_depth")
    d_in = gpu.upload(flat, "consistency.depths")
    d_off = gpu.upload(offsets, "consistency.offsets")
    d_nb = gpu.upload(nb.reshape(-1) if nb.size else np.full(1, -1, np.int32), "consistency.neighbours")
    use_photos = photos is not None
    if use_photos:
        scale = lambda im: np.float32(1.0 / 255.0) if np.asarray(im).dtype == np.uint8 else np.float32(1.0)   # noqa: E731
        flat_p = np.concatenate([(np.asarray(im)[..., :3].astype(np.float32) * scale(im)).reshape(-1) for im in photos])
        tol = np.asarray(photo_tol, np.float32).reshape(-1)
        if flat_p.size != 3 * total or tol.size != len(shapes):
            raise ValueError("consistent_depths: one photo [H, W, 3] and one tolerance per depth map, of its size")
    else:
        flat_p, tol = np.zeros(3, np.float32), np.zeros(1, np.float32)
    d_ph = gpu.upload(flat_p, "consistency.photos")
    d_tol = gpu.upload(tol, "consistency.photo_tol")
    d_out = gpu.zeros(4 * max(total, 1), "consistency.kept")
    d_cnt = gpu.zeros(4 * max(total, 1), "consistency.counts")
    enc = gpu.encoder()
    for v, (h, w) in enumerate(shapes):
        k.dispatch(thread_count=[w, h, 1], command_encoder=enc, cams=cams, depths=d_in, offsets=d_off,
                   neighbours=d_nb, photos=d_ph, photo_tol=d_tol, out_depth=d_out, out_count=d_cnt, view=v,
                   max_neighbours=int(nb.shape[1]), tol_rel=float(tol_rel), min_agree=int(min_agree),
                   use_photos=int(use_photos))
    gpu.submit(enc)
    kept = gpu.read(d_out, np.float32, total)
    counts = gpu.read(d_cnt, np.uint32, total)
    split = lambda a: [a[o:o + s].reshape(shp) for o, s, shp in zip(offsets.astype(np.int64), sizes, shapes)]
    return split(kept), split(counts)


def measured_depths(gpu: Gpu, cams, depths, neighbours: np.ndarray, photos, tol_rel: float = 0.01,
                    min_agree: int = 2, size: int = 5) -> list[np.ndarray]:
    """The depth maps [H, W] float32 that pass the geometric and the photometric test
    (:func:`consistent_depths` with ``photos``, V photos [H, W, 3] uint8, each with its noise
    from :func:`~spirula.engine.mesh.bounds.image_contrast`; 0 elsewhere)."""
    photos = list(photos)
    tols = [image_contrast(im, size)[1] for im in photos]
    kept, _ = consistent_depths(gpu, cams, depths, neighbours, tol_rel, min_agree, photos=photos, photo_tol=tols)
    return kept
