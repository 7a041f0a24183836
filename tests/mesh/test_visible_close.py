"""Hidden-face removal (engine/mesh/visible.py on the GPU) and closing a mesh
(engine/mesh/repair.close_mesh), on shapes made here whose answer is known by construction:
a sphere inside a larger one (no camera outside can see the inner one), a sphere with a
large hole, holes meeting at a vertex and repeated faces."""

from __future__ import annotations

import numpy as np
import trimesh

from engine.mesh.repair import boundary_edges, close_mesh, fill_holes, is_watertight
from engine.mesh.visible import visible_faces
from engine.splat.camera_table import camera_row
from tests.mesh.analytic import orbit_cameras


def test_a_sphere_inside_a_sphere_is_hidden_and_the_outer_one_seen(gpu, rng):
    outer = trimesh.creation.icosphere(5, radius=1.0)
    inner = trimesh.creation.icosphere(4, radius=rng.uniform(0.75, 0.9))
    shift = rng.uniform(-0.05, 0.05, 3)
    v = np.concatenate([outer.vertices, inner.vertices]) + shift
    f = np.concatenate([outer.faces, inner.faces + len(outer.vertices)])
    views = orbit_cameras(24, 3.5, 128, 150.0, seed_offset=rng.uniform(0.2, 0.8))
    cams = gpu.upload(np.concatenate([camera_row(*c) for c in views]), "test.cams")
    # tolerance: 2 voxels of a 256-voxel grid over the sphere, as the mesh job sets it
    seen = visible_faces(gpu, v, f, cams, [(c[5], c[6]) for c in views], 2 * 2.0 / 256)
    n_out = len(outer.faces)
    assert not seen[n_out:].any(), f"{seen[n_out:].sum()} faces of the inner sphere marked seen"
    assert seen[:n_out].mean() > 0.99, seen[:n_out].mean()


def test_close_mesh_closes_a_large_hole_pinched_holes_and_folds(rng):
    s = trimesh.creation.icosphere(5, radius=1.0)   # edges ~0.03: the hole below has ~190
    v, f = np.asarray(s.vertices), np.asarray(s.faces)
    d = rng.normal(size=3)
    d /= np.linalg.norm(d)
    c = v[f].mean(1) @ d
    f = f[c < 0.3]                                   # a hole of far more than 100 edges
    # two faces meeting at one vertex only: their holes pinch there (a fan would be non-manifold)
    far = np.flatnonzero(v[f].mean(1) @ d < -0.5)
    a = far[0]
    share = np.isin(f[far], f[a]).sum(1)
    b = far[np.flatnonzero(share == 1)[0]]
    f = np.delete(f, [a, b], axis=0)
    f = np.concatenate([f, f[:3], f[:2, ::-1]])      # repeated faces, both windings: folds
    assert len(boundary_edges(f)) > 100 and not is_watertight(v, f)
    _, f_fan, _ = fill_holes(v, f, max_edges=10 ** 6)  # every hole fanned, nothing made manifold
    assert not is_watertight(v, f_fan)
    v2, f2, dropped, filled = close_mesh(v, f)
    assert is_watertight(v2, f2) and trimesh.Trimesh(v2, f2, process=False).is_winding_consistent
    assert filled >= 2 and dropped >= 5
    assert len(f2) > 0.5 * len(s.faces)
