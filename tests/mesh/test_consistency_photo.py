"""What the photos measure (spirula/engine/mesh/consistency.py): the photometric test of
shaders/mesh/consistency.slang against a NumPy reference, a colour that changes with the
view (a sheet a plain support grew, painted per view) going while one surface colour stays,
and a plain object keeping its depths."""

import numpy as np

from spirula.engine.mesh.bounds import image_contrast
from spirula.engine.mesh.consistency import choose_neighbours, consistent_depths, measured_depths
from tests.mesh.analytic import pixel_rays, table
from tests.mesh.test_consistency import reference_counts, scene


def albedo(points: np.ndarray) -> np.ndarray:
    """[..., 3] colour in 0..1 of a solid texture at world points [..., 3] (smooth, so a
    pixel's neighbours hold nearly its colour)."""
    return 0.5 + 0.35 * np.stack([np.sin(3.0 * points[..., 0] + 1.0), np.sin(2.5 * points[..., 1] - 0.5),
                                  np.sin(2.0 * points[..., 2] + 2.0)], -1)


def photos_of(cams, depths) -> list[np.ndarray]:
    """Each view's photo [H, W, 3] float32: the albedo of the point its depth holds (0 where none)."""
    out = []
    for c, d in zip(cams, depths):
        o, rays = pixel_rays(*c)
        out.append(np.where(d[..., None] > 0, albedo(o + d[..., None] * rays), 0.0).astype(np.float32))
    return out


def reference_photo(cams, depths, photos, neighbours, tol_rel, tol):
    """(agree, contradict, ambiguous) per view [H, W]: float64 NumPy version of the kernel's
    photometric test (depth as reference_counts; colour: the two 3 x 3 ranges overlap within
    the tolerances); ambiguous also marks an overlap within 1e-4 of its edge."""
    _, amb_depth = reference_counts(cams, depths, neighbours, tol_rel)
    agree, contra, ambiguous = [], [], []
    for i, ((w2c, fx, fy, cx, cy, w, h), d) in enumerate(zip(cams, depths)):
        o, rays = pixel_rays(w2c, fx, fy, cx, cy, w, h)
        X = o + d[..., None].astype(np.float64) * rays
        has = d > 0.01
        yy, xx = np.mgrid[0:h, 0:w]
        ag, co = np.zeros((h, w), int), np.zeros((h, w), int)
        amb = amb_depth[i].copy()
        for j in neighbours[i]:
            if j < 0:
                break
            # the depth test, as the kernel (reference_counts's, one neighbour)
            c1, _ = reference_counts([cams[i], cams[j]], [depths[i], depths[j]], np.array([[1], [-1]]), tol_rel)
            sees = c1[0] > 0
            wj, fxj, fyj, cxj, cyj, ww, hh = cams[j]
            pc = X @ wj[:3, :3].T + wj[:3, 3]
            z = np.where(pc[..., 2] > 0.01, pc[..., 2], 1.0)
            ix = np.clip(np.floor(fxj * pc[..., 0] / z + cxj).astype(int), 0, ww - 1)
            iy = np.clip(np.floor(fyj * pc[..., 1] / z + cyj).astype(int), 0, hh - 1)
            taps = np.stack([photos[j][np.clip(iy + dy, 0, hh - 1), np.clip(ix + dx, 0, ww - 1)]
                             for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
            lo, hi = taps.min(0) - tol[i] - tol[j], taps.max(0) + tol[i] + tol[j]
            own = np.stack([photos[i][np.clip(yy + dy, 0, h - 1), np.clip(xx + dx, 0, w - 1)]
                            for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
            lo_i, hi_i = own.min(0), own.max(0)
            ok = ((hi_i >= lo) & (lo_i <= hi)).all(-1)   # the two ranges overlap within the tolerances
            ag += has & sees & ok
            co += has & sees & ~ok
            amb |= has & sees & (np.minimum(np.abs(hi_i - lo), np.abs(lo_i - hi)) < 1e-4).any(-1)
        agree.append(ag)
        contra.append(co)
        ambiguous.append(amb)
    return agree, contra, ambiguous


def test_photometric_kernel_matches_numpy(gpu):
    rng = np.random.default_rng(21)
    cams, depths = scene(rng, count=16, size=40)
    photos = photos_of(cams, depths)
    for p in photos:   # colours no other view sees: patches of a random colour
        for y, x in rng.integers(4, 30, (5, 2)):
            p[y:y + 6, x:x + 6] = rng.random(3).astype(np.float32)
    nb = choose_neighbours(np.stack([c[0] for c in cams]), np.array([c[1:] for c in cams], float), depths, count=5)
    tol = rng.uniform(0.005, 0.02, len(cams)).astype(np.float32)
    kept, counts = consistent_depths(gpu, gpu.upload(table(cams)), depths, nb, tol_rel=0.01, min_agree=2,
                                     photos=photos, photo_tol=tol)
    agree, contra, amb = reference_photo(cams, depths, photos, nb, 0.01, tol)
    compared = 0
    for d, k, c, a, x, m in zip(depths, kept, counts, agree, contra, amb):
        np.testing.assert_array_equal(c[~m], a[~m])
        np.testing.assert_array_equal(k[~m], np.where((a[~m] >= 2) & (x[~m] == 0), d[~m], 0.0))
        compared += (~m & (d > 0)).sum()
    assert compared > 0.7 * sum((d > 0).sum() for d in depths)
    kept_ref = sum(((a >= 2) & (x == 0) & ~m).sum() for a, x, m in zip(agree, contra, amb))
    contradicted = sum(((x > 0) & ~m).sum() for x, m in zip(contra, amb))
    assert kept_ref > 0.3 * compared and contradicted > 0.05 * compared   # both outcomes are tested


def test_a_colour_that_changes_with_the_view_goes_and_one_surface_colour_stays(gpu):
    rng = np.random.default_rng(8)
    cams, depths = scene(rng, count=24)
    photos = photos_of(cams, depths)
    # a cap of the sphere that views 0..5 see in another colour (a sheet painted per view):
    # one surface cannot have both
    painted = []
    for i in range(6):
        o, rays = pixel_rays(*cams[i])
        x = o + depths[i][..., None] * rays
        m = (depths[i] > 0) & (x[..., 2] > 0.3)
        photos[i][m] = np.clip(photos[i][m][:, ::-1] + 0.3, 0, 1)
        painted.append(m)
    nb = choose_neighbours(np.stack([c[0] for c in cams]), np.array([c[1:] for c in cams], float), depths)
    tol = np.full(len(cams), 2.0 / 255.0, np.float32)
    args = dict(tol_rel=0.01, min_agree=2)
    kept, _ = consistent_depths(gpu, gpu.upload(table(cams)), depths, nb, photos=photos, photo_tol=tol, **args)
    plain, _ = consistent_depths(gpu, gpu.upload(table(cams)), depths, nb, **args)
    # the painted views' cap: contradicted by the views that see its one colour
    others = [j for i in range(6) for j in nb[i] if j >= 6]
    assert others, "the painted views have unpainted neighbours"
    gone = [(kept[i][painted[i]] == 0).mean() for i in range(6) if painted[i].sum() > 20]
    assert gone and min(gone) > 0.5, gone
    assert all((plain[i][painted[i]] > 0).mean() > 0.85 for i in range(6) if painted[i].sum() > 20)
    # the rest of the sphere (one colour from every view) stays
    far = [(kept[i] > 0).sum() / max((plain[i] > 0).sum(), 1) for i in range(6, len(cams))
           if not set(nb[i][nb[i] >= 0]) & set(range(6))]
    assert far and min(far) > 0.85, far


def test_a_plain_object_keeps_its_depths(gpu):
    """A black, textureless object (an office chair's back) is measured by its silhouettes, not
    by texture: the photometric test keeps its consistent depths (one colour from every view);
    a texture rule would have left the fusion none of them."""
    rng = np.random.default_rng(9)
    cams, depths = scene(rng, count=24)
    photos = []
    for d in depths:   # one dark grey, the camera's noise on it, 8 bits
        grey = np.where(d > 0, 20.0, 200.0) + rng.normal(0.0, 0.6, d.shape)
        photos.append(np.clip(np.round(np.repeat(grey[..., None], 3, -1)), 0, 255).astype(np.uint8))
    contrast, threshold = image_contrast(photos[0], 5)
    assert (contrast[depths[0] > 0] <= threshold).mean() > 0.6   # plain in its photos, but near its outline
    nb = choose_neighbours(np.stack([c[0] for c in cams]), np.array([c[1:] for c in cams], float), depths)
    table_ = gpu.upload(table(cams))
    geometric, _ = consistent_depths(gpu, table_, depths, nb, tol_rel=0.01, min_agree=2)
    measured = measured_depths(gpu, table_, depths, nb, photos, 0.01, 2)
    kept = sum(int((m > 0).sum()) for m in measured) / max(sum(int((g > 0).sum()) for g in geometric), 1)
    assert kept > 0.9, kept
