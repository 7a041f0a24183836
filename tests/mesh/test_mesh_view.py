"""Surfels of a textured mesh for the viewport (engine/studio/mesh_view.py): one flat
Gaussian per triangle, oriented with it, coloured by the texture at its centre."""

import numpy as np

from engine.studio.mesh_view import rotation_to_quaternion, surfels_from_mesh


def _quat_to_matrix(q):
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def test_quaternions_of_random_rotations():
    rng = np.random.default_rng(3)
    r, _ = np.linalg.qr(rng.normal(size=(200, 3, 3)))
    r[np.linalg.det(r) < 0, :, 0] *= -1
    q = rotation_to_quaternion(r)
    assert max(np.abs(_quat_to_matrix(qi) - ri).max() for qi, ri in zip(q, r)) < 1e-9


def test_a_textured_quad_becomes_two_flat_coloured_surfels(tmp_path):
    import trimesh
    from PIL import Image

    verts = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], float)
    faces = np.array([[0, 1, 2], [0, 2, 3]])
    uv = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], float)
    tex = np.zeros((8, 8, 3), np.uint8)
    tex[:, 4:] = (200, 30, 30)   # right half red: the first triangle's centre (u 2/3, v 1/3)
    tex[:, :4] = (30, 30, 200)   # left half blue: the second's (u 1/3, v 2/3)
    mat = trimesh.visual.material.PBRMaterial(baseColorTexture=Image.fromarray(tex))
    mesh = trimesh.Trimesh(verts, faces, visual=trimesh.visual.TextureVisuals(uv=uv, material=mat), process=False)
    path = tmp_path / "quad.glb"
    path.write_bytes(mesh.export(file_type="glb"))
    g = surfels_from_mesh(path)
    assert len(g.means) == 2 and np.allclose(g.means[:, 2], 0, atol=1e-6)
    rgb = g.sh0 * 0.28209479177387814 + 0.5
    assert rgb[0, 0] > 0.6 and rgb[0, 2] < 0.3 and rgb[1, 2] > 0.6 and rgb[1, 0] < 0.3, rgb
    sig = np.exp(g.scales)
    for q, s in zip(g.quats, sig):
        normal_axis = _quat_to_matrix(q)[:, np.argmin(s)]
        assert abs(abs(normal_axis[2]) - 1) < 1e-5  # thin along the quad's normal
        assert s.min() < 0.1 * np.sort(s)[1]


def test_the_bounds_box_has_twelve_edges_on_its_faces_and_six_face_handles():
    from engine.studio.viewer import COLOR_BOUNDS, box_segments

    allsegs, cols = box_segments((-1, -2, -3, 1, 2, 3))
    assert allsegs.shape == (30, 6) and len(cols) == 30 and len(set(cols[:12])) == 1 and cols[12] != cols[0]
    assert cols[0] & 0xFF == COLOR_BOUNDS[2]
    segs, handles = allsegs[:12], allsegs[12:].reshape(6, 3, 6)
    # each handle sits on its face's centre: x faces at x = -1 / +1, middle of the others
    for f in range(6):
        axis, value = f % 3, (-1, -2, -3, 1, 2, 3)[f]
        mids = (handles[f, :, :3] + handles[f, :, 3:]) / 2
        cross = [k for k in range(3) if k != axis]
        assert np.allclose(mids[cross, axis], value) and np.allclose(mids[cross][:, cross], 0)
        stub = handles[f, axis]
        assert np.isclose(stub[axis], value) and np.sign(stub[3 + axis] - stub[axis]) == np.sign(value)
    ends = segs.reshape(-1, 3)
    assert np.allclose(np.abs(ends), [1, 2, 3])  # every end is a corner
    lengths = sorted(np.linalg.norm(segs[:, 3:] - segs[:, :3], axis=1).round(6))
    assert lengths == [2.0] * 4 + [4.0] * 4 + [6.0] * 4
