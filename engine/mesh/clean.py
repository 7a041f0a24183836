"""Mesh clean-up: drop small connected components (floaters), quadric decimation to a face
budget (fast-simplification: Garland & Heckbert 1997 quadric error metrics), normals.

Meshes are (vertices [V, 3] float64 world, faces [F, 3] int64, counter-clockwise seen from
outside)."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from ..optional import need


def face_components(faces: np.ndarray, num_vertices: int) -> np.ndarray:
    """[F] int label of the vertex-connected component of each face."""
    if len(faces) == 0:
        return np.zeros(0, np.int64)
    a = np.concatenate([faces[:, 0], faces[:, 1], faces[:, 2]])
    b = np.concatenate([faces[:, 1], faces[:, 2], faces[:, 0]])
    graph = coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(num_vertices, num_vertices))
    _, labels = connected_components(graph, directed=False)
    return labels[faces[:, 0]]


def remove_small_components(verts: np.ndarray, faces: np.ndarray, min_fraction: float = 0.02,
                            min_faces: int = 64) -> tuple[np.ndarray, np.ndarray, int]:
    """Keep components with at least max(min_faces, min_fraction x the largest one's) faces
    (the largest always stays). Returns (verts, faces, components removed)."""
    if len(faces) == 0:
        return verts, faces, 0
    labels = face_components(faces, len(verts))
    counts = np.bincount(labels)
    present = counts > 0
    keep_label = counts >= max(min_faces, min_fraction * counts.max())
    keep_label[np.argmax(counts)] = True
    removed = int((present & ~keep_label).sum())
    return (*compact(verts, faces[keep_label[labels]]), removed)


def is_watertight(faces: np.ndarray) -> bool:
    """Whether every edge is shared by exactly two faces (closed, edge-manifold); False for
    no faces."""
    if len(faces) == 0:
        return False
    e = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    return bool((counts == 2).all())


def compact(verts: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop vertices no face uses; renumber faces."""
    used = np.zeros(len(verts), bool)
    used[faces.reshape(-1)] = True
    remap = np.cumsum(used) - 1
    return verts[used], remap[faces].astype(np.int64)


def decimate(verts: np.ndarray, faces: np.ndarray, target_faces: int) -> tuple[np.ndarray, np.ndarray]:
    """Quadric edge-collapse decimation to about ``target_faces`` faces (no-op when the mesh
    already has fewer)."""
    if target_faces <= 0 or len(faces) <= target_faces:
        return verts, faces
    fast_simplification = need("fast_simplification")

    v, f = fast_simplification.simplify(np.ascontiguousarray(verts, np.float32),
                                        np.ascontiguousarray(faces, np.int32), target_count=int(target_faces))
    f = np.asarray(f, np.int64)
    good = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])
    return compact(np.asarray(v, np.float64), f[good])


def vertex_normals(verts: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """[V, 3] unit area-weighted vertex normals (zero vector -> +z)."""
    fn = np.cross(verts[faces[:, 1]] - verts[faces[:, 0]], verts[faces[:, 2]] - verts[faces[:, 0]])
    n = np.zeros_like(verts)
    for k in range(3):
        np.add.at(n, faces[:, k], fn)
    length = np.linalg.norm(n, axis=1, keepdims=True)
    return np.where(length > 0, n / np.maximum(length, 1e-30), np.array([0.0, 0.0, 1.0]))
