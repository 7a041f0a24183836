"""Independent float64 NumPy reference of 3DGS rendering (test-only; loops are fine here).

Math: Kerbl et al. 2023 (eq. 3, 5, 6), EWA splatting with a 0.3 px^2 low-pass, the same
clamping of x/z, y/z to the frustum plus a 30% margin, opacity-aware axis-aligned screen
extents (at most 3.33 sigma, to where alpha reaches 1/255) of which a splat is binned to the
16 px tiles its alpha >= 1/255 ellipse reaches, alpha = min(0.999, o * G), skip alpha < 1/255, stop when T would fall below 1e-4.

Anti-aliasing (Yu et al. 2024, "Mip-Splatting"): the 3D smoothing filter of eq. 7-9
(:func:`smoothing_filter`: f = 0.2 / nu^2, nu the maximal focal / depth over the cameras that
see the centre) makes the covariance R (S^2 + f I) R^T and scales the opacity by
sqrt(det S^2 / det(S^2 + f I)); the 2D Mip filter of eq. 12 scales it by
sqrt(det(cov2d) / det(cov2d + 0.3 I)).
"""

from __future__ import annotations

import numpy as np

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199


def quat_to_rotmat(q):
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def sh_basis(d, degree):
    x, y, z = d[:, 0], d[:, 1], d[:, 2]
    b = [np.full_like(x, SH_C0)]
    if degree >= 1:
        b += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        b += [1.0925484305920792 * x * y, -1.0925484305920792 * y * z,
              0.31539156525252005 * (2 * zz - xx - yy), -1.0925484305920792 * x * z,
              0.5462742152960396 * (xx - yy)]
    if degree >= 3:
        b += [-0.5900435899266435 * y * (3 * xx - yy), 2.890611442640554 * x * y * z,
              -0.4570457994644658 * y * (4 * zz - xx - yy),
              0.3731763325901154 * z * (2 * zz - 3 * xx - 3 * yy),
              -0.4570457994644658 * x * (4 * zz - xx - yy), 1.445305721320277 * z * (xx - yy),
              -0.5900435899266435 * x * (xx - 3 * yy)]
    return np.stack(b, -1)


def project(means, log_scales, quats, opacity_logits, sh, w2c, fx, fy, cx, cy, width, height, degree,
            footprint=True, filter3d=None):
    """Per-Gaussian screen-space quantities. sh: [N, K, 3] (sh0 first). ``filter3d`` [N]
    (world units^2): the anti-aliased projection with that 3D filter (None: classic).
    Returns dict of means2d [N,2], conics [N,3], opacities [N], rgb [N,3], depths [N],
    radii [N, 2] (x, y half-extents in px; 0 = culled), tiles_touched [N] (the tiles the
    ellipse reaches; with footprint=False, a faster stand-in: the rectangle's tiles),
    rects [N, 4], rect_tiles [N]."""
    R, t = w2c[:3, :3], w2c[:3, 3]
    p = means @ R.T + t
    z = p[:, 2]
    Rq = quat_to_rotmat(quats)
    var = np.exp(2 * log_scales)
    if filter3d is not None:
        var = var + np.asarray(filter3d, np.float64)[:, None]
    Sigma = Rq @ (var[:, :, None] * np.swapaxes(Rq, 1, 2))  # R diag(var) R^T
    tanx, tany = 0.5 * width / fx, 0.5 * height / fy
    u = np.clip(p[:, 0] / z, -(cx / fx + 0.3 * tanx), (width - cx) / fx + 0.3 * tanx)
    v = np.clip(p[:, 1] / z, -(cy / fy + 0.3 * tany), (height - cy) / fy + 0.3 * tany)
    n = len(means)
    J = np.zeros((n, 2, 3))
    J[:, 0, 0] = fx / z
    J[:, 0, 2] = -fx * u / z
    J[:, 1, 1] = fy / z
    J[:, 1, 2] = -fy * v / z
    T = J @ R
    cov = T @ Sigma @ np.swapaxes(T, 1, 2)
    a, b, c = cov[:, 0, 0] + 0.3, cov[:, 0, 1], cov[:, 1, 1] + 0.3
    det = a * c - b * b
    opac = 1 / (1 + np.exp(-opacity_logits))
    if filter3d is not None:
        det_raw = cov[:, 0, 0] * cov[:, 1, 1] - cov[:, 0, 1] * cov[:, 1, 0]
        rho3 = np.sqrt(np.prod(np.exp(2 * log_scales), axis=1) / np.prod(var, axis=1))
        opac = opac * rho3 * np.sqrt(np.maximum(det_raw, 0) / det)
    with np.errstate(invalid="ignore", divide="ignore"):
        extend = np.minimum(3.33, np.sqrt(2 * np.maximum(np.log(np.maximum(opac * 255, 1e-30)), 0)))  # 0: culled
        rx = np.ceil(extend * np.sqrt(np.maximum(a, 0)))
        ry = np.ceil(extend * np.sqrt(np.maximum(c, 0)))
    m2 = np.stack([fx * p[:, 0] / z + cx, fy * p[:, 1] / z + cy], -1)
    tx, ty = -(-width // 16), -(-height // 16)
    x0 = np.clip(np.floor((m2[:, 0] - rx) / 16), 0, tx)
    x1 = np.clip(np.ceil((m2[:, 0] + rx) / 16), 0, tx)
    y0 = np.clip(np.floor((m2[:, 1] - ry) / 16), 0, ty)
    y1 = np.clip(np.ceil((m2[:, 1] + ry) / 16), 0, ty)
    rects = np.stack([x0, x1, y0, y1], -1).astype(np.int64)
    conics = np.stack([c / det, -b / det, a / det], -1)
    front = (z > 0.01) & (det > 0) & (opac >= 1 / 255)
    rect_tiles = np.maximum(x1 - x0, 0) * np.maximum(y1 - y0, 0)
    tiles = footprint_tiles(m2, conics, opac, np.where(front[:, None], rects, 0)) if footprint else rect_tiles
    visible = front & (tiles > 0)
    cam_center = -R.T @ t
    d = means - cam_center
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    basis = sh_basis(d, degree)
    k = basis.shape[1]
    rgb = np.maximum(np.einsum("nk,nkc->nc", basis, sh[:, :k]) + 0.5, 0)
    return {
        "means2d": m2, "conics": conics,
        "opacities": opac, "rgb": rgb, "depths": z,
        "radii": np.where(visible[:, None], np.stack([rx, ry], -1), 0).astype(np.int64),
        "tiles_touched": np.where(visible, tiles, 0).astype(np.int64),
        "rects": rects,
        "rect_tiles": np.where(visible, rect_tiles, 0).astype(np.int64),
    }


def smoothing_filter(means, cameras, near=0.01, margin=0.15, s2=0.2, return_seen=False):
    """Mip-Splatting's 3D filter variance per Gaussian [N] float64: s2 / nu^2, nu = the
    largest max(fx, fy) / depth over ``cameras`` [(w2c, fx, fy, cx, cy, width, height)]
    whose image, widened by ``margin`` of its size on each side, holds the centre's
    projection at depth > ``near``; centres no camera sees get the largest value of the
    seen ones (0 when none is seen). ``return_seen``: also the [N] bool mask of the seen."""
    nu = np.zeros(len(means))
    for w2c, fx, fy, cx, cy, width, height in cameras:
        p = means @ np.asarray(w2c)[:3, :3].T + np.asarray(w2c)[:3, 3]
        z = p[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            x, y = fx * p[:, 0] / z + cx, fy * p[:, 1] / z + cy
            seen = ((z > near) & (x >= -margin * width) & (x <= (1 + margin) * width)
                    & (y >= -margin * height) & (y <= (1 + margin) * height))
            nu = np.where(seen, np.maximum(nu, max(fx, fy) / z), nu)
    with np.errstate(divide="ignore"):
        f = np.where(nu > 0, s2 / nu ** 2, np.nan)
    f = np.where(nu > 0, f, np.nanmax(f) if (nu > 0).any() else 0.0)
    return (f, nu > 0) if return_seen else f


def composite(means2d, conics, opacities, rgb, depths, visible, rects, width, height, background=(0, 0, 0)):
    """Front-to-back per-pixel compositing of the visible splats in depth order; a splat
    reaches only the pixels of the 16 px tiles its rectangle rects[g] = (x0, x1, y0, y1)
    (tile units, end exclusive) covers. ``rgb`` may hold any K channels per splat (e.g. the
    geometry phase's surfels, K = 4, with a zero background of K values). Returns image [H, W, K]."""
    ys, xs = np.mgrid[0:height, 0:width]
    tile_x, tile_y = xs // 16, ys // 16
    px, py = xs + 0.5, ys + 0.5
    T = np.ones((height, width))
    C = np.zeros((height, width, np.shape(rgb)[1]))
    done = np.zeros((height, width), bool)
    for g in np.argsort(depths, kind="stable"):
        if not visible[g]:
            continue
        dx, dy = means2d[g, 0] - px, means2d[g, 1] - py
        a, b, c = conics[g]
        power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
        alpha = np.minimum(0.999, opacities[g] * np.exp(power))
        x0, x1, y0, y1 = rects[g]
        in_rect = (tile_x >= x0) & (tile_x < x1) & (tile_y >= y0) & (tile_y < y1)
        use = in_rect & (power <= 0) & (alpha >= 1 / 255) & ~done
        nextT = T * (1 - alpha)
        stop = use & (nextT < 1e-4)
        done |= stop
        use &= ~stop
        C += np.where(use[..., None], rgb[g] * (alpha * T)[..., None], 0)
        T = np.where(use, nextT, T)
    return C + T[..., None] * np.asarray(background, np.float64)


def footprint_tiles(means2d, conics, opacities, rects):
    """Per splat, the tiles of its rectangle rects[g] = (x0, x1, y0, y1) (tile units, end
    exclusive) where some pixel centre of the 16x16 tile (inside the image or not) has
    alpha = o exp(-q / 2) >= 1/255, q = d^T K d: brute force over every pixel centre."""
    counts = np.zeros(len(means2d), np.int64)
    for g, y0, per_row in _reached_tiles(means2d, conics, opacities, rects):
        counts[g] = per_row.sum()
    return counts


def footprint_rows(means2d, conics, opacities, rects, tiles_y):
    """As footprint_tiles, summed per tile row over the splats: [tiles_y] int64."""
    rows = np.zeros(tiles_y, np.int64)
    for g, y0, per_row in _reached_tiles(means2d, conics, opacities, rects):
        rows[y0:y0 + len(per_row)] += per_row
    return rows


def _reached_tiles(means2d, conics, opacities, rects):
    """(g, y0, reached tiles per row of the rectangle from row y0) for each splat g with a
    non-empty rectangle."""
    with np.errstate(divide="ignore", invalid="ignore"):  # culled splats' values are unused
        tau = 2 * np.log(255 * np.asarray(opacities, np.float64))
    for g, (x0, x1, y0, y1) in enumerate(rects):
        if x1 <= x0 or y1 <= y0:
            continue
        ys, xs = np.mgrid[16 * y0:16 * y1, 16 * x0:16 * x1] + 0.5
        dx, dy = xs - means2d[g, 0], ys - means2d[g, 1]
        a, b, c = np.asarray(conics[g], np.float64)
        reach = a * dx * dx + 2 * b * dx * dy + c * dy * dy <= tau[g]
        yield g, y0, reach.reshape(y1 - y0, 16, x1 - x0, 16).any(axis=(1, 3)).sum(1)
