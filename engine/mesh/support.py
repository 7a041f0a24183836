"""The support plane's layer in the mesh: a scene's support (the table or floor of a capture
that is no orbit) re-meshed as one flat sheet (:func:`remesh_support`), and an orbit
subject's skirt of support cut off at its footprint (:func:`drop_skirt`).

After :func:`engine.mesh.repair.flatten` the support's layer lies on its plane, but it is
still torn: with few views (book: 7 photos) each view's depth puts the textureless table a
little elsewhere, and the fusion keeps the pieces where they agree, so the table is a field
of sheets with ragged gaps. What the user expects is the table itself: one flat surface
over the region the views covered. So the faces lying on the plane are replaced by a regular
grid of the region they cover on it, with the gaps between them closed (a morphological
closing at a few percent of the region's size, then every enclosed hole filled) and only
the largest connected region kept. The texture bake colours it from the photos as before.
"""

from __future__ import annotations

import numpy as np

from .plane import Plane, perpendicular_basis

LAYER_CELLS = 3.0    # the skirt's layer: this many coarse voxels over the cut ...
LAYER_SHARE = 0.15   # ... at most this share of the subject's height over it
BAND_SHARE = 0.25    # what stands over the layer: its part within this share of the subject's height
CLOSE_SHARE = 0.03   # the closing's radius: this share of the region's larger side (cells)
MAX_CELLS = 600      # the grid's cells along the region's larger side at most


def support_region(xy: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    """The region [H, W] bool of a grid of ``cell`` with origin [2] covering points ``xy``
    [N, 2] (plane coordinates; the support faces' centroids): cells holding a point, closed by a disc of CLOSE_SHARE of
    the larger side, enclosed holes filled, the largest 4-connected region only."""
    from scipy import ndimage

    origin = xy.min(0) - cell
    ij = np.floor((xy - origin) / cell).astype(np.int64)
    shape = tuple(ij.max(0) + 2)
    occ = np.zeros(shape, bool)
    occ[ij[:, 0], ij[:, 1]] = True
    r = max(2, int(round(CLOSE_SHARE * max(shape))))
    y, x = np.ogrid[-r:r + 1, -r:r + 1]
    disc = x * x + y * y <= r * r
    padded = np.pad(occ, r + 1)
    closed = ndimage.binary_closing(padded, structure=disc)[r + 1:-r - 1, r + 1:-r - 1]
    filled = ndimage.binary_fill_holes(closed | occ)
    labels, count = ndimage.label(filled)
    if count > 1:
        sizes = np.bincount(labels.reshape(-1))[1:]
        filled = labels == 1 + int(np.argmax(sizes))
    return filled, origin


def grid_mesh(region: np.ndarray, origin: np.ndarray, cell: float, plane: Plane) -> tuple[np.ndarray, np.ndarray]:
    """Two triangles per cell of ``region`` [H, W] on ``plane`` (vertices shared between
    cells), wound so their normals point along ``plane.normal``."""
    u, w = perpendicular_basis(plane.normal)
    ci, cj = np.nonzero(region)
    corners = np.stack([np.stack([ci, cj], 1), np.stack([ci + 1, cj], 1), np.stack([ci + 1, cj + 1], 1),
                        np.stack([ci, cj + 1], 1)], 1)                            # [C, 4, 2]
    keys = corners[..., 0] * (region.shape[1] + 2) + corners[..., 1]
    uniq, inv = np.unique(keys.reshape(-1), return_inverse=True)
    inv = inv.reshape(-1, 4)
    gi, gj = np.divmod(uniq, region.shape[1] + 2)
    xy = origin + cell * np.stack([gi, gj], 1).astype(np.float64)
    base = -plane.normal * plane.offset                                           # the plane's point nearest 0
    verts = base + xy[:, :1] * u + xy[:, 1:] * w
    # (u, w, n) right-handed: corners in order (i, j), (i+1, j), (i+1, j+1) turn about +n
    faces = np.concatenate([inv[:, [0, 1, 2]], inv[:, [0, 2, 3]]])
    return verts, faces.astype(np.int64)


def remesh_support(verts: np.ndarray, faces: np.ndarray, plane: Plane,
                   tol: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """Replace the faces with every vertex within ``tol`` of ``plane`` (the flattened support
    layer) by :func:`grid_mesh` of :func:`support_region` of them; the grid's cell is twice
    those faces' median edge, with at most MAX_CELLS along the larger side. Returns (verts,
    faces, report) with the faces replaced and the cells made; the mesh unchanged when fewer
    than 64 faces lie on the plane."""
    from .clean import compact

    verts, faces = np.asarray(verts, np.float64), np.asarray(faces, np.int64)
    on = np.abs(plane.distance(verts)) <= tol
    flat = on[faces].all(1)
    report = {"support_faces_replaced": 0, "support_cells": 0}
    if int(flat.sum()) < 64:
        return verts, faces, report
    u, w = perpendicular_basis(plane.normal)
    sf = faces[flat]
    edge = float(np.median(np.linalg.norm(verts[sf[:, 1]] - verts[sf[:, 0]], axis=1)))
    pts = verts[sf].mean(1)          # face centroids: the region ends where the faces do
    xy = np.stack([pts @ u, pts @ w], 1)
    extent = float(np.ptp(xy, axis=0).max())
    cell = max(2.0 * edge, extent / MAX_CELLS, 1e-9)
    region, origin = support_region(xy, cell)
    gv, gf = grid_mesh(region, origin, cell, plane)
    rest_v, rest_f = compact(verts, faces[~flat]) if (~flat).any() else (np.zeros((0, 3)), np.zeros((0, 3), np.int64))
    report.update(support_faces_replaced=int(flat.sum()), support_cells=int(region.sum()))
    return np.concatenate([rest_v, gv]), np.concatenate([rest_f, gf + len(rest_v)]), report


def drop_skirt(verts: np.ndarray, faces: np.ndarray, plane: Plane, cut: float,
               cell: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Drop an orbit subject's skirt: the faces lying in the support's layer (centroid under
    ``cut`` + min(LAYER_CELLS x ``cell``, LAYER_SHARE x the subject's height over the cut);
    ``cell``: the subject's coarse voxel) with nothing of the subject standing over them.
    On a grid of twice the faces' median edge on the plane, a column holds the highest face
    centroid of the subject's lower part (under the layer plus BAND_SHARE of its height)
    within one grid cell; a face in the layer stays when that is at least two grid cells over
    it and over the layer (a sheet over a sheet, or a sheet's own bumps, do not hold it).
    Returns (verts, faces, faces dropped).

    Why: the table or floor fuses into sheets a little over the cut beside the subject (its
    splats' depth blends with the subject's edge; a glossy floor's reflections), and they
    stay joined to it: the mouse on a sheet of table wider than itself, the office chair's
    legs with patches of floor 0.05-0.28 over the cut beside them. A sheet has nothing over
    it; what stands on the support does: a wall or a leg is over its own lower part (steeper
    than 63 degrees), a caster's sides have its top over them, the table under an object's
    rim has the object. Only the lower part counts: the chair's seat overhangs its whole
    base, and the floor under it is no chair. An object as flat as the layer keeps it (the
    layer is a share of its height)."""
    from scipy import ndimage

    from .clean import compact

    if len(faces) == 0:
        return verts, faces, 0
    c = verts[faces].mean(1)
    h = plane.distance(c)
    height = float(h.max()) - cut
    layer = min(LAYER_CELLS * cell, LAYER_SHARE * height)
    low = h < cut + layer
    lower = h < cut + layer + BAND_SHARE * height
    if not low.any() or low.all():
        return verts, faces, 0
    edge = float(np.median(np.linalg.norm(verts[faces[:, 1]] - verts[faces[:, 0]], axis=1)))
    grid = max(2.0 * edge, 1e-4 * height)
    u, w = perpendicular_basis(plane.normal)
    xy = np.stack([c[lower] @ u, c[lower] @ w], 1)
    origin = xy.min(0) - 2 * grid
    ij = np.floor((xy - origin) / grid).astype(np.int64)
    top = np.full(tuple(ij.max(0) + 3), -np.inf)
    np.maximum.at(top, tuple(ij.T), h[lower])
    top = ndimage.maximum_filter(top, size=3, mode="nearest")
    skirt = np.zeros(len(faces), bool)
    sel = low[lower]
    over = top[tuple(ij[sel].T)]
    skirt[np.flatnonzero(lower)[sel]] = (over < h[low] + 2.0 * grid) | (over < cut + layer)
    if not skirt.any():
        return verts, faces, 0
    return (*compact(verts, faces[~skirt]), int(skirt.sum()))
