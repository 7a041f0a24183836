"""Projection backward against float64 central finite differences of the NumPy reference.

L = sum over visible Gaussians of <w2, means2d> + <wc, conics> + wo * opacity + <wr, rgb>
with fresh random weights; the GPU backward gets the weights as the screen-space
gradients and must return dL/d(packed parameters)."""

import numpy as np
import pytest

from spirula.engine.splat.camera_table import camera_row
from spirula.engine.splat.param_layout import row_stride
from spirula.engine.splat.render import pack_screen_grads
from tests.splat import reference as ref
from tests.splat.scenes import random_camera, random_scene


@pytest.mark.parametrize("degree,colour_only", [(0, False), (3, False), (3, True)], ids=["sh0", "sh3", "sh3-colour-only"])
def test_project_backward_matches_finite_differences(gpu, degree, colour_only):
    """colour_only: only the colour has an upstream gradient, so the means' gradient is the
    view-direction term of the SH colour alone (otherwise the projection's term hides it)."""
    rng = np.random.default_rng(300 + degree)
    n, width, height = 40, 120, 90
    f, rows = random_scene(rng, n, degree=degree, max_degree=3, spread=0.6)
    w2c, fx, fy, cx, cy = random_camera(rng, width, height, dist=3.0)
    args = (w2c, fx, fy, cx, cy, width, height, degree)
    r0 = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], *args)
    vis = r0["radii"][:, 0] > 0
    assert vis.sum() > n // 2
    w2 = rng.normal(0, 1, (n, 2))
    wc = rng.normal(0, 1, (n, 3)) * 100  # conics are small (1/px^2)
    wo = rng.normal(0, 1, n)
    wr = rng.normal(0, 1, (n, 3))
    if colour_only:
        w2, wc, wo = 0 * w2, 0 * wc, 0 * wo
    # rgb = max(raw, 0): finite differences are only meaningful away from the kink
    assert not np.any((r0["rgb"][vis] > 0) & (r0["rgb"][vis] < 1e-4))

    def loss(ff):
        r = ref.project(ff["means"], ff["log_scales"], ff["quats"], ff["logits"], ff["sh"], *args, footprint=False)
        return float(np.sum(vis[:, None] * (w2 * r["means2d"])) + np.sum(vis[:, None] * wc * r["conics"])
                     + np.sum(vis * wo * r["opacities"]) + np.sum(vis[:, None] * wr * r["rgb"]))

    cams = gpu.upload(camera_row(w2c, fx, fy, cx, cy, width, height)[None])
    params = gpu.upload(rows)
    b = {k: gpu.buffer(16 * n) for k in ["means2d", "conic_opac", "rgb", "depths", "radii", "tiles", "keys", "ids"]}
    gpu.kernel("project/project", "project_forward", MAX_SH_DEGREE=3).dispatch(
        thread_count=[n, 1, 1], params=params, cams=cams, means2d=b["means2d"], conic_opac=b["conic_opac"],
        rgb=b["rgb"], depths=b["depths"], radii=b["radii"], tiles_touched=b["tiles"], depth_keys=b["keys"],
        depth_ids=b["ids"], n=n, cam_index=0, sh_degree=degree, tiles_x=8, tiles_y=6)
    assert (gpu.read(b["radii"], np.int32, shape=(n, 2))[:, 0] > 0).tolist() == vis.tolist()
    D = row_stride(3)
    grads = gpu.buffer(4 * n * D)
    stats = gpu.zeros(4 * n), gpu.zeros(4 * n)
    up = lambda a: a * (vis[:, None] if a.ndim > 1 else vis)
    gpu.kernel("project/project_backward", "project_backward", MAX_SH_DEGREE=3).dispatch(
        thread_count=[n, 1, 1], params=params, cams=cams, radii=b["radii"], conic_opac=b["conic_opac"],
        g_screen=gpu.upload(pack_screen_grads(g_rgb=up(wr), g_means2d=up(w2), g_conic=up(wc), g_opacity=up(wo))),
        grads=grads,
        grad2d_sum=stats[0], vis_count=stats[1], n=n, cam_index=0, sh_degree=degree, accumulate_stats=1)
    g = gpu.read(grads, np.float32, shape=(n, D))
    assert np.all(g[~vis] == 0)
    # the densification statistic: |dL/dmeans2d| in NDC units, once per visible Gaussian
    want = np.linalg.norm(w2 * [width / 2, height / 2], axis=1) * vis
    np.testing.assert_allclose(gpu.read(stats[0], np.float32, n), want, rtol=1e-5)

    groups = {"means": (0, 3), "log_scales": (3, 6), "quats": (6, 10), "logits": (10, 11),
              "sh": (11, 11 + 3 * (degree + 1) ** 2)}
    if colour_only:
        groups = {k: groups[k] for k in ("means", "sh")}
    picked = np.flatnonzero(vis)[:10]
    for key, (c0, c1) in groups.items():
        num, ana = [], []
        arr = f[key].reshape(n, -1) if key == "sh" else f[key].reshape(n, -1)
        for i in picked:
            for c in range(c1 - c0):
                old = arr[i, c]
                e = 1e-6
                arr[i, c] = old + e
                lp = loss(f)
                arr[i, c] = old - e
                lm = loss(f)
                arr[i, c] = old
                num.append((lp - lm) / (2 * e))
                ana.append(g[i, c0 + c])
        num, ana = np.array(num), np.array(ana)
        scale = np.abs(num).max()
        assert scale > 1e-6, f"{key}: vanishing gradients make the check vacuous"
        # float32 GPU vs float64 differences: within 1% of the group's largest gradient
        np.testing.assert_allclose(ana, num, atol=1e-2 * scale, rtol=1e-2, err_msg=key)
