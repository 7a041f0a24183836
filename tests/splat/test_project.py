"""Projection kernel against the float64 NumPy reference on fresh random scenes."""

import numpy as np
import pytest

from spirula.engine.splat.camera_table import View, camera_row
from tests.splat import reference as ref
from tests.splat.scenes import random_camera, random_scene


@pytest.mark.parametrize("degree", [0, 1, 3])
def test_project_forward_matches_reference(gpu, degree):
    rng = np.random.default_rng(100 + degree)
    n, width, height = 3000, 97, 61
    f, rows = random_scene(rng, n, degree=degree, max_degree=3)
    w2c, fx, fy, cx, cy = random_camera(rng, width, height)
    k = gpu.kernel("project/project", "project_forward", MAX_SH_DEGREE=3)
    view = View(0, width, height)
    b = {name: gpu.buffer(n * 16) for name in
         ["means2d", "conic_opac", "rgb", "depths", "radii", "tiles", "keys", "ids"]}
    k.dispatch(thread_count=[n, 1, 1], params=gpu.upload(rows),
               cams=gpu.upload(camera_row(w2c, fx, fy, cx, cy, width, height)[None]),
               means2d=b["means2d"], conic_opac=b["conic_opac"], rgb=b["rgb"], depths=b["depths"],
               radii=b["radii"], tiles_touched=b["tiles"], depth_keys=b["keys"], depth_ids=b["ids"],
               n=n, cam_index=0, sh_degree=degree, tiles_x=view.tiles_x, tiles_y=view.tiles_y)
    r = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], w2c, fx, fy, cx, cy,
                    width, height, degree)
    radii = gpu.read(b["radii"], np.int32, shape=(n, 2))
    vis = r["radii"][:, 0] > 0
    # radii come from ceil(): a float32/float64 difference may flip one at an integer edge
    agree = (radii[:, 0] > 0) == vis
    assert agree.mean() > 0.995, f"visibility disagrees on {(~agree).sum()} of {n}"
    assert vis.sum() > n // 4, "scene too empty to test"
    both = vis & (radii[:, 0] > 0)
    assert np.mean(np.abs(radii[both] - r["radii"][both]) <= 1) == 1.0
    assert np.mean(radii[both] == r["radii"][both]) > 0.99
    m2 = gpu.read(b["means2d"], np.float32, shape=(n, 2))
    np.testing.assert_allclose(m2[both], r["means2d"][both], rtol=1e-5, atol=1e-3)
    co = gpu.read(b["conic_opac"], np.float32, shape=(n, 4))
    np.testing.assert_allclose(co[both, :3], r["conics"][both], rtol=2e-3, atol=1e-5 * np.abs(r["conics"][both]).max())
    np.testing.assert_allclose(co[both, 3], r["opacities"][both], rtol=1e-5, atol=1e-6)
    rgb = gpu.read(b["rgb"], np.float32, shape=(n, 3))
    np.testing.assert_allclose(rgb[both], r["rgb"][both], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gpu.read(b["depths"], np.float32, n)[both], r["depths"][both], rtol=1e-5)
    tiles = gpu.read(b["tiles"], np.uint32, n)  # the tiles the ellipse reaches (test_footprint.py: how exactly)
    assert np.mean(tiles[both] == r["tiles_touched"][both]) > 0.95
    # depth sort keys (24 bits): ordered like the float64 depths wherever those differ by
    # more than the keys' resolution (2^-16 relative); culled ones sort last
    keys = gpu.read(b["keys"], np.uint32, n)
    assert keys.max() < (1 << 24) and (keys[~(radii[:, 0] > 0)] == (1 << 24) - 1).all()
    d = r["depths"][both]
    kb = keys[both].astype(np.int64)
    i, j = rng.integers(0, d.size, (2, 20000))
    clear = d[i] < d[j] * (1 - 2.0 ** -15)
    assert clear.sum() > 5000 and (kb[i][clear] < kb[j][clear]).all()
