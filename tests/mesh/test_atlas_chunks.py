"""The UV atlas on spatial cells (spirula/engine/mesh/atlas.py): the cells' sizes and compactness,
and an unwrap over many cells keeping every face, its order and its vertex positions, with
uvs inside the texture and no triangle folded to nothing."""

import numpy as np
import trimesh

from spirula.engine.mesh.atlas import spatial_chunks, unwrap


def _noisy_sphere(rng):
    s = trimesh.creation.icosphere(subdivisions=5)  # 20,480 faces
    v = np.asarray(s.vertices) * (1 + 0.01 * rng.normal(size=(len(s.vertices), 1)))
    return v, np.asarray(s.faces, np.int64)


def test_cells_hold_at_most_the_budget_and_are_compact(rng):
    v, f = _noisy_sphere(rng)
    budget = int(rng.integers(300, 2000))
    labels = spatial_chunks(v, f, budget)
    counts = np.bincount(labels)
    assert labels.shape == (len(f),) and counts.min() > 0
    assert counts.max() <= budget and len(counts) <= 4 * len(f) / budget
    # a median split along the longest side: each cell's extent is far below the sphere's
    cen = v[f].mean(1)
    for k in rng.choice(len(counts), 5, replace=False):
        ext = np.ptp(cen[labels == k], axis=0).max()
        assert ext < 0.5 * np.ptp(cen, axis=0).max()
    assert (spatial_chunks(v, f, 0) == 0).all() and (spatial_chunks(v, f, len(f)) == 0).all()


def test_unwrap_over_cells_keeps_the_mesh(rng):
    v, f = _noisy_sphere(rng)
    uv = unwrap(v, f, 1024, chunk_faces=1000)
    assert uv.faces.shape == f.shape
    np.testing.assert_array_equal(uv.vmapping[uv.faces], f)          # same faces, same order
    np.testing.assert_allclose(uv.vertices, v[uv.vmapping])
    assert uv.uvs.min() >= 0.0 and uv.uvs.max() <= 1.0
    t = uv.uvs[uv.faces].astype(np.float64)
    area = 0.5 * np.abs(np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]))
    assert (area > 0).mean() > 0.999
    assert uv.charts >= len(np.unique(spatial_chunks(v, f, 1000)))  # a chart never spans two cells
