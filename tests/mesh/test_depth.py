"""The GPU depth/opacity render (ray / max-density depths of the splats) against a
per-pixel NumPy compositor on fresh random splats, and the colour image it shares with
the rasterizer."""

import numpy as np

from spirula.engine.mesh.depth import DepthRenderer
from spirula.engine.splat.camera_table import View, camera_row
from spirula.engine.splat.render import Rasterizer
from tests.splat import reference as ref
from tests.splat.scenes import random_camera, random_scene


def ray_depths(f, w2c, fx, fy, cx, cy, xs, ys):
    """([N, H, W] camera z of each Gaussian's maximum-density point on each pixel's ray,
    clamped to the mean depth +- 3 max scale; [N, H, W] lambda = d . Sigma^-1 . d), float64
    with direct 3x3 inverses."""
    R = w2c[:3, :3]
    rot = R @ ref.quat_to_rotmat(f["quats"])                       # [N, 3, 3] camera-space axes
    s = np.exp(f["log_scales"])
    sigma = np.einsum("nij,nj,nkj->nik", rot, s * s, rot)
    A = np.linalg.inv(sigma)
    m = f["means"] @ R.T + w2c[:3, 3]
    d = np.stack([(xs + 0.5 - cx) / fx, (ys + 0.5 - cy) / fy, np.ones(xs.shape)], -1)  # [H, W, 3]
    lam = np.einsum("hwi,nij,hwj->nhw", d, A, d)
    t = np.einsum("hwi,nij,nj->nhw", d, A, m) / lam
    r = 3 * s.max(1)[:, None, None]
    return np.clip(t, m[:, 2, None, None] - r, m[:, 2, None, None] + r), lam


def composite_depth(r, zray, lam, width, height):
    """(expected depth normalised by opacity, opacity, median depth) [H, W] in float64,
    with the rasterizer's rules: alpha = min(0.999, o exp(power)), skip < 1/255, stop
    before T < 1e-4, splats confined to the 16 px tiles of their rectangle; ``zray``,
    ``lam`` [N, H, W] per-splat depth and density precision along each pixel's ray. The
    median is where T (1 - a exp(-lam (t - t*)^2 / 2)) = 0.5 inside the crossing splat."""
    ys, xs = np.mgrid[0:height, 0:width]
    px, py = xs + 0.5, ys + 0.5
    T = np.ones((height, width))
    D = np.zeros((height, width))
    med = np.zeros((height, width))
    done = np.zeros((height, width), bool)
    vis = r["radii"][:, 0] > 0
    for g in np.argsort(r["depths"], kind="stable"):  # reference: a loop over splats is fine here
        if not vis[g]:
            continue
        dx, dy = r["means2d"][g, 0] - px, r["means2d"][g, 1] - py
        a, b, c = r["conics"][g]
        power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
        alpha = np.minimum(0.999, r["opacities"][g] * np.exp(power))
        x0, x1, y0, y1 = r["rects"][g]
        tx, ty = xs // 16, ys // 16
        use = (tx >= x0) & (tx < x1) & (ty >= y0) & (ty < y1) & (power <= 0) & (alpha >= 1 / 255) & ~done
        nxt = T * (1 - alpha)
        stop = use & (nxt < 1e-4)
        done |= stop
        use &= ~stop
        D += np.where(use, zray[g] * alpha * T, 0)
        need = 1 - 0.5 / T
        with np.errstate(divide="ignore", invalid="ignore"):  # only used where T crosses 0.5
            cross = zray[g] - np.sqrt(2 * np.log(alpha / np.maximum(need, 1e-12)) / lam[g])
        med = np.where(use & (T >= 0.5) & (nxt < 0.5), cross, med)
        T = np.where(use, nxt, T)
    A = 1 - T
    return np.where(A > 1e-6, D / np.maximum(A, 1e-12), 0), A, med


def test_depth_matches_numpy_compositor(gpu):
    rng = np.random.default_rng(1234)
    width, height = 70, 52
    f, rows = random_scene(rng, 300, degree=1, max_degree=1, scale=(-2.5, -1.2))
    w2c, fx, fy, cx, cy = random_camera(rng, width, height)
    r = ref.project(f["means"], f["log_scales"], f["quats"], f["logits"], f["sh"], w2c, fx, fy, cx, cy,
                    width, height, 1)
    raster = Rasterizer(gpu, 1)
    cams = gpu.upload(camera_row(w2c, fx, fy, cx, cy, width, height)[None])
    out = DepthRenderer(gpu, raster).render(gpu.upload(rows), len(rows), cams, View(0, width, height), 1,
                                            with_image=True)
    # use the GPU's own projection so the comparison isolates the compositing
    r["means2d"] = raster.read("means2d", shape=(len(rows), 2)).astype(np.float64)
    co = raster.read("conic_opac", shape=(len(rows), 4)).astype(np.float64)
    r["conics"], r["opacities"] = co[:, :3], co[:, 3]
    r["depths"] = raster.read("depths", shape=(len(rows),)).astype(np.float64)
    ys, xs = np.mgrid[0:height, 0:width]
    zray, lam = ray_depths(f, w2c, fx, fy, cx, cy, xs, ys)
    centre = (f["means"] @ w2c[2, :3] + w2c[2, 3])[:, None, None]
    assert np.abs(zray - centre).max() > 0.05, "ray depths should differ from the mean depths"
    D, A, M = composite_depth(r, zray, lam, width, height)
    assert A.max() > 0.9 and (A < 0.01).any(), "scene should have opaque and empty pixels"
    np.testing.assert_allclose(out.alpha, A, atol=2e-4)
    covered = A > 0.05
    np.testing.assert_allclose(out.depth[covered], D[covered], rtol=2e-4, atol=2e-4)
    agree = np.isclose(out.median, M, rtol=1e-4, atol=1e-4)
    assert agree.mean() > 0.99, agree.mean()  # ties at T = 0.5 may flip a few pixels
    np.testing.assert_allclose(out.image, raster.read("image", shape=(height, width, 3)))


def test_plane_depth_of_flat_splats_on_a_plane_is_the_plane(gpu):
    """Discs (shortest axis along the plane's normal) scattered on a tilted plane: the plane
    depth is the plane's own depth at every covered pixel (to float32 rounding), while the
    median depth steps from disc to disc; the normal is the plane's, facing the camera."""
    from scipy.spatial.transform import Rotation

    from spirula.engine.mesh.depth import plane_depth
    from spirula.engine.splat.param_layout import pack

    rng = np.random.default_rng(77)
    width, height = 64, 48
    normal = np.array([0.2, -0.3, 1.0]) / np.linalg.norm([0.2, -0.3, 1.0])
    rot = Rotation.align_vectors([normal], [[0.0, 0.0, 1.0]])[0]      # disc z axis -> normal
    u, v = np.linalg.svd(np.eye(3) - np.outer(normal, normal))[0][:, :2].T
    n = 600
    a, b = rng.uniform(-2.0, 2.0, (2, n))
    means = a[:, None] * u + b[:, None] * v
    spin = Rotation.from_rotvec(normal[None] * rng.uniform(0, np.pi, n)[:, None])
    q = (spin * rot).as_quat()                                           # xyzw
    quats = np.concatenate([q[:, 3:], q[:, :3]], 1)
    scales = np.log(np.stack([rng.uniform(0.15, 0.3, n), rng.uniform(0.15, 0.3, n), np.full(n, 1e-4)], 1))
    rows = pack(means, scales, quats, np.full(n, 3.0), rng.uniform(0, 1, (n, 3)), np.zeros((n, 0, 3)), 0)
    eye = 5.0 * normal + rng.normal(0, 0.3, 3)
    from tests.splat.scenes import look_at_w2c
    w2c = look_at_w2c(eye, rng.normal(0, 0.1, 3))
    fx = fy = 1.0 * width
    cx, cy = width / 2, height / 2
    cams = gpu.upload(camera_row(w2c, fx, fy, cx, cy, width, height)[None])
    out = DepthRenderer(gpu, Rasterizer(gpu, 0)).render(gpu.upload(rows), n, cams, View(0, width, height), 0,
                                                        plane=True, intrinsics=(fx, fy, cx, cy))
    # the plane's depth along each pixel's ray, camera space: n_c . (z r) = n_c . p0
    nc = w2c[:3, :3] @ normal
    c0 = nc @ w2c[:3, 3]     # the plane through the world origin: n_c . p_c = n_c . t
    ys, xs = np.mgrid[0:height, 0:width]
    r = np.stack([(xs + 0.5 - cx) / fx, (ys + 0.5 - cy) / fy, np.ones(xs.shape)], -1)
    truth = c0 / (r @ nc)
    covered = out.alpha > 0.5
    assert covered.mean() > 0.5
    np.testing.assert_allclose(out.plane[covered], truth[covered], rtol=2e-4)
    facing = -np.sign(nc @ np.array([0, 0, 1.0])) * nc
    assert (out.normal[covered] @ facing > 0.9999).all()
    assert np.abs(out.median[covered] - truth[covered]).max() > 10 * np.abs(out.plane[covered] - truth[covered]).max()
    # the host formula against a hand-made map: edge-on and behind-camera planes give none
    geom = np.zeros((1, 3, 4), np.float32)
    geom[0, 0] = (0, 0, -2, -6)       # facing the camera at z = 3
    geom[0, 1] = (1, 0, 0, -1)        # edge-on to the ray through that pixel
    geom[0, 2] = (0, 0, -1, 2)        # a plane behind the camera
    d, nrm = plane_depth(geom, 1.0, 1.0, 1.5, 0.5)
    np.testing.assert_allclose(d[0], [3.0, 0.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(nrm[0, 0], [0, 0, -1])
