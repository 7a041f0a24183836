"""The viewport's triangle rasteriser (shaders/view/mesh.slang, spirula/engine/studio/mesh_raster.py)
against an independent NumPy ray caster (tests/mesh/raycast.py). Random poses, a
checker-textured cube (its back faces hidden behind its front: the depth test) and a quad
in front of another."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.splat.camera_table import camera_row
from spirula.engine.studio.mesh_raster import MeshGpu, MeshRasterizer
from spirula.engine.studio.mesh_view import TexturedMesh, read_textured_mesh

from .raycast import checker, cube, look_at, reference

W, H = 96, 72


def _render(gpu, mesh, w2c, f, shading):
    cams = gpu.upload(camera_row(w2c, f, f, W / 2, H / 2, W, H), "test.cams")
    r = MeshRasterizer(gpu)
    enc = gpu.encoder()
    r.record(enc, MeshGpu(gpu, mesh), cams, 0, W, H, shading)
    gpu.submit(enc)
    img = gpu.read(r.image, np.float32, count=3 * W * H).reshape(H, W, 3)
    final_t = gpu.read(r.final_t, np.float32, count=W * H).reshape(H, W)
    return img, final_t


def _compare(img, final_t, ref, covered):
    assert set(np.unique(final_t)) <= {0.0, 1.0}
    gpu_cov = final_t == 0
    assert 0.1 < covered.mean() < 0.9, "the scene should fill part of the image"
    # coverage differs at most on pixel centres within float32 of an edge
    assert (gpu_cov != covered).mean() < 0.01, (gpu_cov != covered).sum()
    both = gpu_cov & covered
    err = np.abs(img[both] - ref[both]).max(axis=1)
    assert np.mean(err < 2 / 255) > 0.98, np.sort(err)[-20:]
    assert np.median(err) < 1e-3
    assert np.all(img[~gpu_cov] == 0)


@pytest.mark.parametrize("seed,shading", [(1, "texture"), (2, "shaded"), (3, "texture")])
def test_a_textured_cube_matches_a_ray_caster(gpu, seed, shading):
    rng = np.random.default_rng(seed)
    mesh = cube(rng, checker())
    eye = rng.normal(size=3)
    eye *= rng.uniform(3.5, 5.0) / np.linalg.norm(eye)
    w2c = look_at(eye, rng.normal(scale=0.2, size=3))
    f = rng.uniform(70, 100)
    img, final_t = _render(gpu, mesh, w2c, f, shading)
    ref, covered = reference(mesh, w2c, f, W, H, shading)
    _compare(img, final_t, ref, covered)


def test_the_nearer_of_two_overlapping_quads_is_seen(gpu):
    """Two quads, the far one listed last (and a larger id): the near one must win."""
    quad = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], float)
    near = quad * 0.6 + [0.3, 0.1, 3.0]
    far = quad * 1.0 + [0.0, 0.0, 4.0]
    tex = np.zeros((2, 2, 3), np.uint8)
    tex[0], tex[1] = (250, 10, 10), (10, 10, 250)  # top row red (v = 1), bottom row blue
    uv = np.array([[0.25, 0.75]] * 4 + [[0.25, 0.25]] * 4, np.float32)  # near: red texel; far: blue
    mesh = TexturedMesh(np.vstack([near, far]).astype(np.float32), np.array([[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7]],
                        np.uint32), uv, tex, np.full((8, 3), 255, np.uint8))
    w2c = np.eye(4)
    img, final_t = _render(gpu, mesh, w2c, 100.0, "texture")
    ref, covered = reference(mesh, w2c, 100.0, W, H, "texture")
    _compare(img, final_t, ref, covered)
    red, blue = img[..., 0] > 0.9, img[..., 2] > 0.9
    # near quad: x in [-0.3, 0.9] / 3 * 100 + 48 -> px 38..78, y in [-0.5, 0.7] / 3 * 100 + 36 -> 19..59;
    # far quad: px 23..73 by 11..61, seen only outside the near one
    assert red[21:57, 40:76].all() and not blue[21:57, 40:76].any()
    assert blue[12:18, 24:72].all() and blue[25:55, 24:36].all() and not red[:, :37].any()


def test_a_glb_reads_back_with_its_texture_uv_and_faces(tmp_path):
    import trimesh
    from PIL import Image

    rng = np.random.default_rng(5)
    mesh = cube(rng, checker())
    mat = trimesh.visual.material.PBRMaterial(baseColorTexture=Image.fromarray(mesh.texture))
    tm = trimesh.Trimesh(mesh.vertices, mesh.faces, visual=trimesh.visual.TextureVisuals(uv=mesh.uv, material=mat),
                         process=False)
    path = tmp_path / "cube.glb"
    path.write_bytes(tm.export(file_type="glb"))
    back = read_textured_mesh(path)
    assert back.n == 12 and np.array_equal(back.texture, mesh.texture)
    tri = lambda m: np.sort(m.vertices[m.faces].reshape(12, -1), axis=0)  # noqa: E731
    assert np.allclose(tri(back), tri(mesh), atol=1e-6)
    # each vertex keeps its uv (the glTF v flip undone by the reader)
    order = np.lexsort(back.vertices.T), np.lexsort(mesh.vertices.T)
    key = lambda m, o: np.hstack([m.vertices[o], m.uv[o]])  # noqa: E731
    assert np.allclose(np.unique(key(back, order[0]), axis=0), np.unique(key(mesh, order[1]), axis=0), atol=1e-6)


def test_a_mesh_without_triangles_is_refused_by_name(tmp_path):
    from spirula.engine.errors import SpirulaError

    path = tmp_path / "empty.obj"
    path.write_text("v 0 0 0\nv 1 0 0\n")
    with pytest.raises(SpirulaError, match="empty.obj"):
        read_textured_mesh(path)
