"""Texture baking from images with a depth test, UV atlas, and export: a sphere with a
smooth solid texture seen by cameras whose images (and depth maps) also show a red
occluder that is not part of the mesh. The baked texture and vertex colours must match
the solid texture, never show the occluder, and the exported GLB / OBJ must reopen in
trimesh with the texture attached (PLY with vertex colours)."""

from dataclasses import dataclass

import numpy as np
import pytest
import trimesh

from spirula.engine.mesh.atlas import unwrap
from spirula.engine.mesh.bake import BakeOptions, bake
from spirula.engine.mesh.clean import vertex_normals
from spirula.engine.mesh.export import export_meshes
from tests.mesh.analytic import orbit_cameras, table
from tests.mesh.synthetic import rasterize

OCC_C, OCC_R = np.array([1.55, 0.35, 0.2]), 0.35


def smooth_texture(p):
    return np.clip(0.5 + 0.35 * np.stack([np.sin(2.1 * p[..., 0]) * 0.5, np.sin(1.7 * p[..., 1] + 1),
                                          np.cos(1.3 * p[..., 2])], -1), 0, 1)


@dataclass
class Cam:
    image: np.ndarray
    width: int
    height: int
    fx: float
    center: np.ndarray


@pytest.fixture(scope="module")
def scene():
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
    occ = trimesh.creation.icosphere(subdivisions=2, radius=OCC_R)
    v_all = np.concatenate([sphere.vertices, occ.vertices + OCC_C])
    f_all = np.concatenate([sphere.faces, occ.faces + len(sphere.vertices)])
    cams = orbit_cameras(16, 3.2, 96, 96.0)
    views, maps = [], []
    for c in cams:
        depth, pos = rasterize(v_all, f_all, *c)
        hit = np.isfinite(depth)
        on_occ = np.linalg.norm(pos - OCC_C, axis=-1) < OCC_R * 1.05
        col = np.where(on_occ[..., None], [1.0, 0.0, 0.0], smooth_texture(pos))
        img = (np.where(hit[..., None], col, 0) * 255 + 0.5).astype(np.uint8)
        w2c = c[0]
        views.append(Cam(img, c[5], c[6], c[1], -w2c[:3, :3].T @ w2c[:3, 3]))
        maps.append((np.where(hit, depth, 0).astype(np.float32), hit.astype(np.float32)))
    return sphere, cams, views, maps


def test_bake_matches_texture_and_respects_visibility(gpu, scene, tmp_path):
    sphere, cams, views, maps = scene
    v, f = np.asarray(sphere.vertices), np.asarray(sphere.faces)
    uv = unwrap(v, f, 256)
    assert np.array_equal(uv.faces.shape, f.shape) and np.allclose(uv.vertices, v[uv.vmapping])
    assert np.array_equal(uv.vmapping[uv.faces], f), "xatlas must keep the face order"
    n = vertex_normals(v, f)
    progress = []
    res = bake(gpu, gpu.upload(table(cams)), views, lambda i: maps[i], uv, n, 256,
               BakeOptions(tol_abs=0.03), on_progress=lambda d, t: progress.append(d))
    assert progress[-1] == len(views)
    assert res.texel_coverage > 0.95 and res.vertex_coverage > 0.95
    # vertex colours against the solid texture at the vertices (flat tessellation: the
    # sampled surface lies up to ~1% inside the sphere, the texture is smooth)
    want_v = smooth_texture(v) * 255
    err_v = np.abs(res.vertex_colors.astype(float) - want_v)
    print(f"vertex colour error: mean {err_v.mean():.2f}, max {err_v.max():.1f} (of 255)")
    assert err_v.mean() < 4 and err_v.max() < 40
    # texels: reconstruct each chart texel's surface point from the UV triangle it lies in
    tex = res.texture.astype(float)
    S = tex.shape[0]
    m = trimesh.Trimesh(uv.vertices, uv.faces, process=False)
    rng = np.random.default_rng(0)
    fi = rng.integers(0, len(f), 3000)
    b = rng.dirichlet([2, 2, 2], 3000)
    p_uv = (b[:, :, None] * uv.uvs[uv.faces[fi]]).sum(1)
    p_3d = (b[:, :, None] * m.vertices[uv.faces[fi]]).sum(1)
    tx = np.clip((p_uv[:, 0] * S).astype(int), 0, S - 1)
    ty = np.clip(((1 - p_uv[:, 1]) * S).astype(int), 0, S - 1)
    err_t = np.abs(tex[ty, tx] - smooth_texture(p_3d) * 255)
    print(f"texel colour error: mean {err_t.mean():.2f}, p99 {np.quantile(err_t, 0.99):.1f}")
    assert err_t.mean() < 5 and np.quantile(err_t, 0.99) < 30
    # the occluder is in the images, never in the texture: red = high R, low G and B
    red = (tex[..., 0] > 180) & (tex[..., 1] < 60) & (tex[..., 2] < 60)
    assert red.sum() == 0
    # with the depth test off (huge tolerance) the occluder bleeds in: the test has teeth
    leaky = bake(gpu, gpu.upload(table(cams)), views, lambda i: maps[i], uv, n, 256,
                 BakeOptions(tol_abs=10.0, power=0.0))
    lt = leaky.vertex_colors.astype(float)
    assert np.abs(lt - want_v).max() > 60

    paths = export_meshes(tmp_path / "out", uv, res.texture, v, f, res.vertex_colors)
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"mesh.glb", "mesh.obj", "mesh.mtl", "mesh.png", "mesh.ply"}
    glb = trimesh.load(paths["glb"], force="mesh")
    assert len(glb.faces) == len(f)
    img = glb.visual.material.baseColorTexture
    assert img is not None and img.size == (256, 256)
    # colours looked up through the reloaded UVs match the vertex colours
    uvr = glb.visual.uv
    look = np.asarray(img.convert("RGB"))[np.clip(((1 - uvr[:, 1]) * 256).astype(int), 0, 255),
                                          np.clip((uvr[:, 0] * 256).astype(int), 0, 255)]
    near = np.abs(look.astype(float) - smooth_texture(np.asarray(glb.vertices)) * 255)
    assert np.median(near) < 6
    obj = trimesh.load(paths["obj"], force="mesh")
    assert obj.visual.kind == "texture" and obj.visual.material.image is not None
    assert obj.visual.material.image.size == (256, 256) and len(obj.faces) == len(f)
    assert "map_Kd mesh.png" in paths["mtl"].read_text()
    ply = trimesh.load(paths["ply"], process=False)
    assert len(ply.faces) == len(f)
    np.testing.assert_array_equal(np.asarray(ply.visual.vertex_colors)[:, :3], res.vertex_colors)
    assert not list((tmp_path / "out").glob("*.tmp"))
