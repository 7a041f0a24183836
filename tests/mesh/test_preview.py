"""The CPU preview renderer: z-buffer order, vertex colours, texture lookup, background."""

import numpy as np

from spirula.engine.mesh.preview import look_at, orbit_views, render


def test_nearer_triangle_wins_and_background_stays():
    # two overlapping squares facing the camera: red at z = 1 (near), green at z = 2
    sq = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], float)
    verts = np.concatenate([sq * 0.5 + [0, 0, 2.0], sq * 0.3 + [0.1, 0, 1.0]])
    faces = np.array([[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7]])
    cols = np.array([[0, 255, 0]] * 4 + [[255, 0, 0]] * 4)
    w2c = np.eye(4)
    img = render(verts, faces, w2c, 64.0, 64, 64, vertex_colors=cols)
    centre = img[32, 32].astype(int)
    assert centre[0] > 150 and centre[1] < 30          # red in front
    assert img[32, 16, 1] > 150 and img[32, 16, 0] < 30  # green where only it is
    assert (img[0, 0] == 255).all()                     # background corner


def test_texture_lookup_uses_obj_convention():
    # one quad covering the view, uv (0,0) bottom-left; texture: top half blue, bottom half yellow
    verts = np.array([[-2, -2, 1], [2, -2, 1], [2, 2, 1], [-2, 2, 1]], float)  # y down in the image
    faces = np.array([[0, 1, 2], [0, 2, 3]])
    uvs = np.array([[0, 1], [1, 1], [1, 0], [0, 0]], float)  # image top (y = -2) gets v = 1
    tex = np.zeros((8, 8, 3), np.uint8)
    tex[:4] = (0, 0, 255)
    tex[4:] = (255, 255, 0)
    img = render(verts, faces, np.eye(4), 16.0, 32, 32, uvs=uvs, texture=tex)
    assert img[4, 16, 2] > 150 and img[4, 16, 0] < 30    # top: blue
    assert img[28, 16, 0] > 150 and img[28, 16, 2] < 30  # bottom: yellow


def test_orbit_views_frame_the_mesh():
    rng = np.random.default_rng(0)
    verts = rng.normal(size=(50, 3)) + [3, 1, 0]
    views, focal = orbit_views(verts, 4)
    assert len(views) == 4
    for w2c in views:
        pc = verts @ w2c[:3, :3].T + w2c[:3, 3]
        uv = focal * pc[:, :2] / pc[:, 2:]
        assert (pc[:, 2] > 0).all() and (np.abs(uv) < 0.5).all()
    assert np.allclose(look_at([0, 0, -5], [0, 0, 0], (0, -1, 0))[:3, :3], np.eye(3))
