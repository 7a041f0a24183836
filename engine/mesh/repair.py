"""Mesh repair after marching cubes: cut at the support plane, keep what lies in the bounds,
drop floaters, fill small holes and close the cut, so that an object the cameras saw all
around comes out watertight.

Library: trimesh (already a dependency for export). Its ``intersections.slice_faces_plane``
clips triangles exactly at a plane (vectorised NumPy, new vertices on the plane) and
``Trimesh.is_watertight`` is the check; its own ``repair.fill_holes`` closes only holes of
3 or 4 edges, and its capped slice needs a polygon triangulation engine (manifold3d,
mapbox-earcut / shapely) that is not installed. pymeshlab (GPL, 100+ MB) and manifold3d
(booleans we do not need) were not worth a new dependency: the hole filling here is a
fan from each loop's centroid, built from the boundary edges without walking the loops
(scipy connected components label the loops), which is exact for the planar, star-shaped
loops of a cut and topologically closed for any loop.

Meshes: vertices [V, 3] float64 world, faces [F, 3] int64, counter-clockwise seen from
outside (as engine/mesh/extract.py makes them).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .clean import compact, face_components, remove_small_components
from .extract import weld
from .subject import Plane
from ..optional import need


def _edge_keys(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(directed edges [3F, 2] as the faces wind them: all first edges, then second, then
    third; [3F] int64 key of each undirected edge): a 1-D key to sort instead of rows."""
    e = np.stack([faces.T.reshape(-1), faces[:, [1, 2, 0]].T.reshape(-1)], 1)
    lo, hi = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
    return e, lo * (int(faces.max()) + 1 if len(faces) else 1) + hi


def _edge_use(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(directed edges [3F, 2], [3F] number of faces using each one's undirected edge)."""
    e, key = _edge_keys(faces)
    _, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
    return e, counts[inv.reshape(-1)]


def boundary_edges(faces: np.ndarray) -> np.ndarray:
    """[B, 2] int64 directed edges (a, b) as their one face winds them, of the edges used by
    exactly one face (the boundary of the mesh's holes)."""
    e, use = _edge_use(faces)
    return e[use == 1]


def make_manifold(verts: np.ndarray, faces: np.ndarray, rounds: int = 8) -> tuple[np.ndarray, np.ndarray, int]:
    """Drop the faces around what a fan cannot close: edges of more than two faces, and
    boundary vertices where two holes meet (more than one outgoing boundary edge), repeated
    until none is left (at most ``rounds`` times; each round widens those holes by a ring).
    Returns (verts, faces, faces dropped). On the object-on-table scene 4 rounds took the
    490 non-manifold edges the fans had made to none."""
    dropped = 0
    for _ in range(rounds):
        if len(faces) == 0:
            break
        e, use = _edge_use(faces)
        bad = (use > 2).reshape(3, -1).any(0)
        out = np.bincount(e[use == 1, 0], minlength=len(verts))
        bad |= (out > 1)[faces].any(1)
        if not bad.any():
            break
        dropped += int(bad.sum())
        verts, faces = compact(verts, faces[~bad])
    return verts, faces, dropped


def is_watertight(verts: np.ndarray, faces: np.ndarray) -> bool:
    """trimesh's check (``is_watertight and is_winding_consistent``): every edge shared by
    exactly two faces, which wind it in opposite directions (no directed edge twice). On
    integer keys: a third of trimesh's time on the chair's 2.3M marching-cubes faces."""
    faces = np.asarray(faces, np.int64)
    if len(faces) == 0:
        return False
    e, key = _edge_keys(faces)
    key = np.sort(key)
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    if not (np.diff(np.r_[starts, len(key)]) == 2).all():
        return False
    directed = np.sort(e[:, 0] * (int(faces.max()) + 1) + e[:, 1])
    return bool((directed[1:] != directed[:-1]).all())


def largest_component_share(verts: np.ndarray, faces: np.ndarray) -> float:
    """Share of the faces in the largest vertex-connected component (0 for no faces)."""
    if len(faces) == 0:
        return 0.0
    return float(np.bincount(face_components(faces, len(verts))).max() / len(faces))


def fill_holes(verts: np.ndarray, faces: np.ndarray, max_edges: int = 100,
               always: np.ndarray | None = None, on_plane: np.ndarray | None = None,
               normal: np.ndarray | None = None, plane_share: float = 0.8,
               max_share: float = 0.0) -> tuple[np.ndarray, np.ndarray, int]:
    """Close boundary loops of at most ``max_edges`` edges (and every loop whose vertices
    are all flagged in ``always`` [V] bool, e.g. on the cut plane) by a fan of triangles
    from a new vertex at the loop's centroid, wound against the boundary edge so the
    winding stays consistent. Returns (verts, faces, loops filled). Loops are the connected
    components of the boundary edges; two loops touching at a vertex count as one.
    on_plane [V] bool with ``normal`` [3]: also every loop with at least ``plane_share`` of
    its edges between flagged vertices that is a hole, not the outer rim (its edges wind
    clockwise about ``normal``: negative signed area), whatever its size: the holes of a
    flattened support, which every camera saw from its front."""
    be = boundary_edges(faces)
    if len(be) == 0:
        return verts, faces, 0
    n = len(verts)
    graph = coo_matrix((np.ones(len(be), np.int8), (be[:, 0], be[:, 1])), shape=(n, n))
    _, vlabel = connected_components(graph, directed=False)
    loop = vlabel[be[:, 0]]
    _, loop = np.unique(loop, return_inverse=True)
    loops = int(loop.max()) + 1
    size = np.bincount(loop, minlength=loops)
    fill = size <= max_edges
    if always is not None:
        flagged = np.ones(loops, bool)
        np.logical_and.at(flagged, loop, always[be[:, 0]] & always[be[:, 1]])
        fill |= flagged
    if on_plane is not None and normal is not None:
        flat = np.bincount(loop, weights=on_plane[be[:, 0]] & on_plane[be[:, 1]], minlength=loops)
        area = np.bincount(loop, weights=np.cross(verts[be[:, 0]], verts[be[:, 1]]) @ np.asarray(normal, np.float64),
                           minlength=loops)
        fill |= (flat >= plane_share * size) & (area < 0)
    if max_share > 0:
        lab = face_components(faces, n)
        vlab = np.full(n, -1, np.int64)
        vlab[faces.reshape(-1)] = np.repeat(lab, 3)
        used = vlab >= 0
        cl, ch = np.full((lab.max() + 1, 3), np.inf), np.full((lab.max() + 1, 3), -np.inf)
        np.minimum.at(cl, vlab[used], verts[used])
        np.maximum.at(ch, vlab[used], verts[used])
        ll, lh = np.full((loops, 3), np.inf), np.full((loops, 3), -np.inf)
        np.minimum.at(ll, loop, verts[be[:, 0]])
        np.maximum.at(lh, loop, verts[be[:, 0]])
        comp = np.zeros(loops, np.int64)
        comp[loop] = vlab[be[:, 0]]
        fill |= np.linalg.norm(lh - ll, axis=1) <= max_share * np.linalg.norm(ch - cl, axis=1)[comp]
    fill &= size >= 3
    if not fill.any():
        return verts, faces, 0
    # centroid of each loop's vertices (each edge's start vertex once per edge)
    cent = np.zeros((loops, 3))
    np.add.at(cent, loop, verts[be[:, 0]])
    cent /= np.maximum(size, 1)[:, None]
    new_id = np.full(loops, -1, np.int64)
    new_id[fill] = n + np.arange(int(fill.sum()))
    pick = fill[loop]
    fan = np.stack([be[pick, 1], be[pick, 0], new_id[loop[pick]]], 1)
    return np.concatenate([verts, cent[fill]]), np.concatenate([faces, fan]), int(fill.sum())


def _single_faces(faces: np.ndarray) -> np.ndarray:
    """[F] bool: faces whose three vertices no other face has (in any order). One int64
    key per face when the vertex count allows (np.unique over rows is 5x slower)."""
    tri = np.sort(faces, axis=1)
    n = int(faces.max()) + 1
    if float(n) ** 3 >= 2.0 ** 62:
        _, inv, counts = np.unique(tri, axis=0, return_inverse=True, return_counts=True)
        return counts[inv.reshape(-1)] == 1
    key = (tri[:, 0] * n + tri[:, 1]) * n + tri[:, 2]
    order = np.argsort(key)
    k = key[order]
    dup = np.zeros(len(k), bool)
    same = k[1:] == k[:-1]
    dup[1:] |= same
    dup[:-1] |= same
    out = np.empty(len(k), bool)
    out[order] = ~dup
    return out


def precull(verts: np.ndarray, faces: np.ndarray, lo=None, hi=None, plane: Plane | None = None,
            cut: float = 0.0, pad: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Drop, before the costly steps, the faces that the cut and the bounds will drop anyway:
    those with all three vertices under ``plane`` at height ``cut`` - ``pad`` and those whose
    vertices all lie outside the box [lo - pad, hi + pad] on one side (world units). On the
    chair video's 3.3M marching-cubes faces, 45% lay under the floor (its reflection)."""
    if len(faces) == 0:
        return verts, faces
    keep = np.ones(len(faces), bool)
    if plane is not None:
        keep &= (plane.distance(verts) >= cut - pad)[faces].any(1)
    if lo is not None and hi is not None:
        out_lo = verts < np.asarray(lo, np.float64) - pad
        out_hi = verts > np.asarray(hi, np.float64) + pad
        keep &= ~(out_lo[faces].all(1).any(1) | out_hi[faces].all(1).any(1))
    return (verts, faces) if keep.all() else compact(verts, faces[keep])


def close_mesh(verts: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Make a mesh watertight: faces repeated on the same three vertices go (all copies: a
    fold that encloses nothing; quadric decimation leaves some -- 524 pairs in 30k faces
    on the object-on-table scene), then :func:`make_manifold`, then every hole is filled.
    Returns (verts, faces, faces dropped, holes filled)."""
    if len(faces) == 0:
        return verts, faces, 0, 0
    single = _single_faces(faces)
    dropped = int((~single).sum())
    if dropped:
        verts, faces = compact(verts, faces[single])
    verts, faces, more = make_manifold(verts, faces)
    verts, faces, filled = fill_holes(verts, faces, len(faces) + 1)
    return verts, faces, dropped + more, filled


def flatten(verts: np.ndarray, plane: Plane, band: float) -> tuple[np.ndarray, int]:
    """Project the vertices within ``band`` (world units) of the plane onto it: (verts [V, 3],
    how many moved). The layer of a support surface that the depth maps of few fuzzy views
    tore into sheets at several heights (a tabletop) becomes the one surface it is."""
    h = plane.distance(verts)
    near = np.abs(h) <= band
    out = np.array(verts, np.float64, copy=True)
    out[near] -= h[near, None] * plane.normal
    return out, int(near.sum())


def near_cells(points: np.ndarray, cells: np.ndarray, cell: float, dilation: int = 1) -> np.ndarray:
    """[P] bool: points [P, 3] within ``dilation`` voxels of an occupied voxel (centres
    ``cells`` [K, 3] of a grid of edge ``cell``, world units)."""
    cells = np.asarray(cells, np.float64)
    origin = cells.min(0) - (dilation + 1.5) * cell
    ijk = np.round((cells - origin) / cell - 0.5).astype(np.int64)
    dims = ijk.max(0) + dilation + 2
    occ = np.zeros(dims, bool)
    occ[tuple(ijk.T)] = True
    if dilation:
        from scipy import ndimage
        occ = ndimage.binary_dilation(occ, np.ones((3, 3, 3), bool), iterations=dilation)
    p = np.floor((np.asarray(points, np.float64) - origin) / cell).astype(np.int64)
    inside = ((p >= 0) & (p < dims)).all(1)
    out = np.zeros(len(p), bool)
    out[inside] = occ[tuple(p[inside].T)]
    return out


def drop_off_subject(verts: np.ndarray, faces: np.ndarray, cells: np.ndarray, cell: float,
                     min_share: float = 0.25, plane: Plane | None = None,
                     layer_share: float = 0.15) -> tuple[np.ndarray, np.ndarray, int]:
    """Drop the components (all but the largest) with under ``min_share`` of their faces
    within one voxel of the subject's occupied coarse voxels (``cells`` [K, 3] centres, edge
    ``cell``: engine/mesh/subject.py). Returns (verts, faces, components dropped). With the
    support ``plane``, first the faces within 30 degrees of level, in the layer over it
    (``layer_share`` of the subject's height, at least 2 voxels) and not within one voxel
    of the subject's: flakes of the floor that grew onto the subject's feet.

    Why: a glossy floor's reflections fuse into flakes of floor a few tenths over the cut
    (the office chair video at 1000 px: two flakes 1.3-1.5 units wide beside its base, as
    large as one of its legs, none of their faces near the splats of the chair; the legs
    cut off from the seat at 256 voxels had 55-75% of theirs there)."""
    if len(faces) == 0 or cells is None or len(cells) == 0:
        return verts, faces, 0
    near = near_cells(verts[faces].mean(1), cells, cell)
    if plane is not None:   # flat faces in the support's layer away from the subject: its flakes
        h = plane.distance(verts[faces].mean(1))
        n = np.cross(verts[faces[:, 1]] - verts[faces[:, 0]], verts[faces[:, 2]] - verts[faces[:, 0]])
        flat = np.abs(n @ plane.normal) > np.cos(np.radians(30.0)) * np.linalg.norm(n, axis=1)
        layer = max(2.0 * cell, layer_share * float(np.ptp(plane.distance(cells)) + cell))
        flake = flat & (h < layer) & ~near
        if flake.any():
            verts, faces = compact(verts, faces[~flake])
            near = near[~flake]
    labels = face_components(faces, len(verts))
    count = np.bincount(labels)
    share = np.bincount(labels, weights=near, minlength=len(count)) / np.maximum(count, 1)
    keep = share >= min_share
    keep[np.argmax(count)] = True
    dropped = int(((count > 0) & ~keep).sum())
    return (*compact(verts, faces[keep[labels]]), dropped) if dropped else (verts, faces, 0)


def repair_mesh(verts: np.ndarray, faces: np.ndarray, lo=None, hi=None, plane: Plane | None = None,
                cut: float = 0.0, max_hole_edges: int = 100, min_component: float = 0.02,
                min_component_faces: int = 64, close: bool = False,
                flat: float = 0.0, cells: np.ndarray | None = None,
                cell: float = 0.0, agree=None, max_hole_share: float = 0.2) -> tuple[np.ndarray, np.ndarray, dict]:
    """Clean a marching-cubes mesh; returns (verts, faces, report).

    plane / cut: keep only the part above the plane ``plane.distance(x) >= cut`` (world
    units; the table's own surface and the sheets lying on it go), triangles clipped
    exactly at that height, and close the cut with planar caps. lo, hi [3]: faces whose
    centroid lies outside this box are dropped (what the bounds leave out). Then the
    components under max(``min_component_faces``, ``min_component`` x the largest) go
    (engine/mesh/clean.py) and holes of at most ``max_hole_edges`` boundary edges are
    filled; ``close``: :func:`close_mesh` instead, every hole filled (an object the
    cameras went all around: watertight). report: face counts after each step, holes
    filled, caps, watertightness and the largest component's share before and after.
    flat: first flatten the layer within this distance of the plane onto it (:func:`flatten`;
    a scene's support, whose cut lies under that layer), then re-mesh that layer as one flat
    sheet over the region it covers (engine/mesh/support.py). cells [K, 3] / cell: the subject's
    occupied coarse voxels; components far from them go (:func:`drop_off_subject`), and first,
    with a support ``plane`` not flattened (an orbit's), the support's layer with nothing of the
    subject over it: its skirt of table or floor (engine/mesh/support.py ``drop_skirt``).
    agree(points [P, 3]) -> [P] int: how many views' depth puts a surface there; the
    components few views agree on go, the support sheet not judged
    (engine/mesh/consensus.py). max_hole_share: holes up to this share of their
    component's extent are filled too (:func:`fill_holes`)."""
    need("trimesh")
    import trimesh.intersections as ti

    verts, faces = np.asarray(verts, np.float64), np.asarray(faces, np.int64)
    report = {"faces_in": int(len(faces)), "watertight_before": is_watertight(verts, faces),
              "largest_share_before": largest_component_share(verts, faces)}
    scale = float(np.ptp(verts, axis=0).max()) if len(verts) else 1.0
    if plane is not None and flat > 0 and len(faces):
        verts, report["vertices_flattened"] = flatten(verts, plane, flat)
    verts, faces = precull(verts, faces, lo, hi, plane, cut, 1e-6 * scale)
    if plane is not None and len(faces):
        origin = -plane.normal * (plane.offset - cut)          # a point at height ``cut``
        verts, faces, _ = ti.slice_faces_plane(verts, faces, plane.normal, origin)
        verts, faces = weld(np.asarray(verts, np.float64), np.asarray(faces, np.int64), 1e-7 * scale)
    report["faces_above_plane"] = int(len(faces))
    if lo is not None and hi is not None and len(faces):
        c = verts[faces].mean(1)
        eps = 1e-9 * scale
        inside = ((c >= np.asarray(lo) - eps) & (c <= np.asarray(hi) + eps)).all(1)
        verts, faces = compact(verts, faces[inside]) if inside.any() else (np.zeros((0, 3)), np.zeros((0, 3), np.int64))
    report["faces_in_bounds"] = int(len(faces))
    if plane is not None and flat == 0 and cells is not None and len(faces):   # an orbit subject's skirt
        from .support import drop_skirt

        verts, faces, report["faces_skirt"] = drop_skirt(verts, faces, plane, cut, cell)
    if plane is not None and flat > 0 and len(faces):  # the flattened support as one flat sheet
        from .support import remesh_support

        verts, faces, sup = remesh_support(verts, faces, plane, 1e-6 * scale)
        report.update(sup)
    if cells is not None and len(faces):
        verts, faces, report["components_off_subject"] = drop_off_subject(verts, faces, cells, cell, plane=plane)
    removed = 0
    if len(faces):
        verts, faces, removed = remove_small_components(verts, faces, min_component, min_component_faces)
    report["components_removed"] = int(removed)
    if agree is not None and len(faces):   # after the small ones went: fewer components to judge
        from .consensus import drop_unsupported

        skip = (np.abs(plane.distance(verts)) <= 1e-6 * scale)[faces].all(1) if plane is not None and flat > 0 else None
        verts, faces, report["components_unsupported"] = drop_unsupported(verts, faces, agree, skip=skip)
    report["faces_after_components"] = int(len(faces))
    filled = dropped = 0
    if close:
        verts, faces, dropped, filled = close_mesh(verts, faces)
    elif len(faces):
        # the cut's loops lie on the plane at height ``cut``: closed whatever their size
        on_cut = np.abs(plane.distance(verts) - cut) <= 1e-6 * scale if plane is not None else None
        # a flattened support's holes (what the views' disagreement tore out of it) are closed
        on_plane = np.abs(plane.distance(verts)) <= 1e-6 * scale if plane is not None and flat > 0 else None
        verts, faces, filled = fill_holes(verts, faces, max_hole_edges, on_cut, on_plane,
                                          plane.normal if plane is not None else None, max_share=max_hole_share)
    report["faces_dropped_to_close"] = int(dropped)
    report["holes_filled"] = int(filled)
    report["faces_out"] = int(len(faces))
    report["watertight_after"] = is_watertight(verts, faces)
    report["largest_share_after"] = largest_component_share(verts, faces)
    return verts, faces, report
