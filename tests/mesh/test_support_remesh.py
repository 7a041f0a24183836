"""A scene's flattened support re-meshed as one flat sheet (engine/mesh/support.py): torn
table patches with gaps between them, and a box standing on the table, made here with NumPy."""

import numpy as np
import trimesh

from engine.mesh.plane import Plane
from engine.mesh.repair import largest_component_share
from engine.mesh.support import remesh_support


def _torn_table(rng, normal, offset):
    """Patches of a grid on the plane (about 60% of a 4 x 3 rectangle kept in ragged
    squares), world coordinates; and a 0.5-high box on it (trimesh), offset off the plane."""
    n = np.asarray(normal, float) / np.linalg.norm(normal)
    a = np.array([1.0, 0, 0]) if abs(n[0]) < 0.9 else np.array([0, 1.0, 0])
    u = np.cross(a, n); u /= np.linalg.norm(u); w = np.cross(n, u)
    step = 0.05
    xs, ys = np.arange(0, 4, step), np.arange(0, 3, step)
    keep = rng.random((len(xs), len(ys))) < 0.6          # ragged: 40% of the cells torn out
    keep[:, :2] = keep[:2, :] = True                       # a rim, so the region is one piece
    keep[:, -2:] = keep[-2:, :] = True
    verts, faces = [], []
    for i, j in zip(*np.nonzero(keep)):
        p = [(xs[i], ys[j]), (xs[i] + step, ys[j]), (xs[i] + step, ys[j] + step), (xs[i], ys[j] + step)]
        base = len(verts)
        verts += [-n * offset + x * u + y * w for x, y in p]
        faces += [[base, base + 1, base + 2], [base, base + 2, base + 3]]
    box = trimesh.creation.box((0.8, 0.6, 0.5))
    box_v = box.vertices + [0, 0, 0.25]                    # standing on z = 0 in its own frame
    R = np.stack([u, w, n], 1)
    box_v = (R @ box_v.T).T - n * offset + 2.0 * u + 1.5 * w
    return np.array(verts), np.array(faces), box_v, np.asarray(box.faces), u, w, n


def test_the_torn_support_becomes_one_flat_sheet_and_the_box_stays(rng):
    normal = rng.normal(size=3)
    normal /= np.linalg.norm(normal)
    offset = float(rng.uniform(-2, 2))
    tv, tf, bv, bf, u, w, n = _torn_table(rng, normal, offset)
    verts = np.concatenate([tv, bv])
    faces = np.concatenate([tf, bf + len(tv)])
    plane = Plane(normal=n, offset=offset, source="scene")
    out_v, out_f, rep = remesh_support(verts, faces, plane, 1e-6)
    bottom = (np.abs(plane.distance(bv))[bf] <= 1e-6).all(1)   # the box's underside lies on the table
    assert bottom.sum() == 2
    assert rep["support_faces_replaced"] == len(tf) + 2
    assert rep["support_cells"] > 0
    # the box's other faces are all there
    d = plane.distance(out_v)
    box_faces = out_f[(d[out_f] > 1e-6).any(1)]
    assert len(box_faces) == len(bf) - 2
    sheet = out_f[(np.abs(d[out_f]) <= 1e-6).all(1)]
    sv = out_v[np.unique(sheet)]
    assert np.abs(plane.distance(sv)).max() < 1e-9
    # one connected sheet without the torn gaps: its area is the rectangle's (4 x 3) within
    # a cell's margin, not the 60-70% the patches covered
    tri = out_v[sheet]
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    area = 0.5 * np.linalg.norm(normals, axis=1).sum()
    patches = 0.5 * np.linalg.norm(np.cross(tv[tf[:, 1]] - tv[tf[:, 0]], tv[tf[:, 2]] - tv[tf[:, 0]]), axis=1).sum()
    assert patches < 0.8 * 12.0 and 0.95 * 12.0 <= area <= 1.25 * 12.0, (patches, area)
    assert largest_component_share(out_v, sheet) == 1.0
    # wound towards the plane's normal (the cameras' side)
    assert (normals @ n > 0).all()


def test_a_support_of_few_faces_is_left_alone():
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)
    f = np.array([[0, 1, 2]])
    plane = Plane(normal=np.array([0, 0, 1.0]), offset=0.0, source="scene")
    out_v, out_f, rep = remesh_support(v, f, plane, 1e-6)
    assert rep["support_faces_replaced"] == 0 and np.array_equal(out_f, f)
