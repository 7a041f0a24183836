"""UV atlas with xatlas (charts by normal deviation and seam cost, packed into one square
texture with a texel gutter between charts), on spatial chunks of the mesh.

Why chunks: xatlas's chart growing costs grow faster than linearly with the faces of one
mesh (marching-cubes meshes of ~5 faces per chart: 100k faces 13 s of CPU as one mesh,
6 s as 100 chunks of 1,000; 500k faces ~700 s as one mesh on 2 CPU cores), and xatlas
works on the meshes of an atlas in parallel (its own thread pool, all cores). So the mesh
is cut into cells of at most ``chunk_faces`` faces (recursive median bisection of the face
centroids along each cell's longest side, a k-d tree), each cell is one xatlas mesh, and
xatlas packs the charts of all cells into one atlas. Cost: the cell borders become chart
seams (+15-20% charts at 1,000 faces per cell). Measured on the 2-core CPU machine with
benchmarks/mesh_speed.py; the H200 numbers of the mesh stage are not measured yet.

UV convention (trimesh / OBJ): uv (0, 0) is the bottom-left corner of the texture.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..optional import need
CHUNK_FACES = 1000  # faces per xatlas mesh (see the module docstring)


@dataclass
class UvMesh:
    """vertices [V', 3] float64 (vertices split along chart seams), faces [F, 3] int64
    (same faces, same order as the input), uvs [V', 2] float32 in [0, 1], vmapping [V']
    int64 index of each vertex in the input mesh, charts: number of charts."""

    vertices: np.ndarray
    faces: np.ndarray
    uvs: np.ndarray
    vmapping: np.ndarray
    charts: int


def spatial_chunks(verts: np.ndarray, faces: np.ndarray, chunk_faces: int) -> np.ndarray:
    """[F] int64 cell label of each face, labels 0..K-1: every cell is halved at the median
    of its face centroids along its longest bounding-box side, all cells at once per level,
    until each holds at most ``chunk_faces`` faces (``chunk_faces`` <= 0: one cell)."""
    n = len(faces)
    labels = np.zeros(n, np.int64)
    if chunk_faces <= 0 or n <= chunk_faces:
        return labels
    cen = verts[faces].mean(axis=1)
    order = np.arange(n)   # the faces grouped by cell (the previous level's sort keeps them so)
    for _ in range(int(np.ceil(np.log2(n / chunk_faces)))):
        present = np.bincount(labels) > 0
        labels = (np.cumsum(present) - 1)[labels]   # dense labels (a cell of 1 face leaves an empty one)
        counts = np.bincount(labels)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sorted_c = cen[order]
        extent = np.maximum.reduceat(sorted_c, start) - np.minimum.reduceat(sorted_c, start)
        key = cen[np.arange(n), np.argmax(extent, axis=1)[labels]]
        order = np.lexsort((key, labels))
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n) - start[labels[order]]
        labels = 2 * labels + (rank >= counts[labels] // 2)
    return np.unique(labels, return_inverse=True)[1].reshape(-1)


def unwrap(verts: np.ndarray, faces: np.ndarray, texture_size: int, padding: int = 4,
           chunk_faces: int = CHUNK_FACES) -> UvMesh:
    """Parametrise and pack the mesh (verts [V, 3], faces [F, 3] int) for a
    ``texture_size`` square texture with ``padding`` texels between charts (room for the
    seam dilation), as spatial cells of at most ``chunk_faces`` faces (0: one mesh).
    RuntimeError when xatlas needs more than one atlas."""
    xatlas = need("xatlas")

    faces = np.asarray(faces, np.int64)
    verts32 = np.ascontiguousarray(verts, np.float32)
    labels = spatial_chunks(np.asarray(verts, np.float64), faces, chunk_faces)
    order = np.argsort(labels, kind="stable")
    cells = np.split(order, np.flatnonzero(np.diff(labels[order])) + 1) if len(order) else []
    atlas = xatlas.Atlas()
    used_of = []
    for cell in cells:  # one xatlas mesh per cell: its own compact vertex list
        used, local = np.unique(faces[cell], return_inverse=True)
        atlas.add_mesh(verts32[used], np.ascontiguousarray(local.reshape(-1, 3), np.uint32))
        used_of.append(used)
    pack = xatlas.PackOptions()
    pack.resolution = int(texture_size)
    pack.padding = int(padding)
    pack.bilinear = True
    pack.blockAlign = False
    charts = xatlas.ChartOptions()
    # one growing pass instead of xatlas's default refinement iteration: ~20x faster on
    # marching-cubes meshes (100k faces: 8 s instead of 230 s on 2 CPU cores) for a
    # few more charts and the same packing efficiency
    charts.max_iterations = 0
    atlas.generate(charts, pack)
    if atlas.atlas_count != 1:
        raise RuntimeError(f"xatlas packed the charts into {atlas.atlas_count} atlases; expected one")
    out_faces = np.empty_like(faces)
    vmaps, uvs, offset = [], [], 0
    for i, (cell, used) in enumerate(zip(cells, used_of)):
        vmap, idx, uv = atlas.get_mesh(i)  # xatlas keeps each mesh's face order
        out_faces[cell] = idx.astype(np.int64) + offset
        vmaps.append(used[vmap.astype(np.int64)])
        uvs.append(uv)
        offset += len(vmap)
    vmapping = np.concatenate(vmaps) if vmaps else np.zeros(0, np.int64)
    uv_all = np.concatenate(uvs).astype(np.float32) if uvs else np.zeros((0, 2), np.float32)
    return UvMesh(np.asarray(verts, np.float64)[vmapping], out_faces, uv_all, vmapping, int(atlas.chart_count))
