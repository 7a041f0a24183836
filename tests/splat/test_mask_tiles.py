"""Masks' "ignore" mode in the rasterizer: tiles all of whose pixels are masked out are left
empty after binning (shaders/raster/mask.slang), the others render as without a mask, and
the backward of a masked loss gradient (zero on masked pixels) is the same with and without
the skipping (fresh random splats; the reference is the same rasterizer without the mask,
which the raster tests check against NumPy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spirula.engine.ingest.dataset import Camera
from spirula.engine.splat.camera_table import View, camera_table
from spirula.engine.splat.render import Rasterizer
from tests.splat.scenes import random_camera, random_scene

W, H = 83, 57  # 6 x 4 tiles, the last column and row partial
BG = (0.2, 0.5, 0.7)


def _mask(rng) -> np.ndarray:
    """[H, W] uint8 alpha: tiles (0, 0), (1, 2) and the partial corner tile (5, 3) fully out,
    tile (2, 0) out but for one pixel, random holes elsewhere."""
    a = np.where(rng.random((H, W)) < 0.2, 0, 255).astype(np.uint8)
    for tx, ty in ((0, 0), (2, 1), (5, 3)):
        a[ty * 16:(ty + 1) * 16, tx * 16:(tx + 1) * 16] = 0
    a[0:16, 32:48] = 0
    a[7, 40] = 255
    return a


@pytest.fixture(scope="module")
def scene(gpu):
    rng = np.random.default_rng(51)
    _, rows = random_scene(rng, 600, degree=1, max_degree=1, scale=(-2.5, -1.2))
    w2c, fx, fy, cx, cy = random_camera(rng, W, H)
    cam = Camera("c.png", Path("c.png"), W, H, fx, fy, cx, cy, w2c, np.zeros((H, W, 3), np.uint8))
    alpha = _mask(rng)
    rgba = np.zeros((H, W, 4), np.uint8)
    rgba[..., 3] = alpha
    g_image = rng.normal(0, 1, (H, W, 3)).astype(np.float32) * (alpha[..., None] > 0)  # a masked loss's
    return dict(params=gpu.upload(rows), n=len(rows), cams=gpu.upload(camera_table([cam])), alpha=alpha,
                gt=gpu.upload(np.ascontiguousarray(rgba).view(np.uint32)[..., 0]), g_image=g_image)


def _render(gpu, sc, skip: bool):
    r = Rasterizer(gpu, 1, BG)
    r.skip_masked = sc["gt"] if skip else None
    view = View(0, W, H)
    r.prepare(sc["params"], sc["n"], sc["cams"], view, 1)
    enc = gpu.encoder()
    r.record_forward(enc, backward=True)
    gpu.submit(enc)
    image = gpu.read(r.image, np.float32, shape=(H, W, 3))
    ranges = gpu.read(r.buffer("ranges"), np.uint32, shape=(view.tiles_y, view.tiles_x, 2))
    gpu.write(r.image_grad(), sc["g_image"])
    grads, g2d, vis = (gpu.zeros(4 * sc["n"] * r.stride), gpu.zeros(4 * sc["n"]), gpu.zeros(4 * sc["n"]))
    enc = gpu.encoder()
    r.record_backward(enc, grads, g2d, vis)
    gpu.submit(enc)
    return image, ranges, gpu.read(grads, np.float32, shape=(sc["n"], r.stride))


def test_fully_masked_tiles_are_skipped_and_the_rest_render_as_before(gpu, scene):
    img0, ranges0, g0 = _render(gpu, scene, skip=False)
    img1, ranges1, g1 = _render(gpu, scene, skip=True)
    a = scene["alpha"]
    tiles_out = np.array([[not a[ty * 16:(ty + 1) * 16, tx * 16:(tx + 1) * 16].any() for tx in range(6)]
                          for ty in range(4)])
    assert tiles_out.sum() == 3 and not tiles_out[0, 2]  # one kept pixel keeps its tile
    had = ranges0[..., 1] > ranges0[..., 0]
    assert had[tiles_out].all(), "the scene must put splats on the masked tiles"
    assert (ranges1[tiles_out] == 0).all()
    np.testing.assert_array_equal(ranges1[~tiles_out], ranges0[~tiles_out])
    ys, xs = np.mgrid[0:H, 0:W]
    out_px = tiles_out[ys // 16, xs // 16]
    np.testing.assert_array_equal(img1[out_px], np.broadcast_to(np.float32(BG), img1[out_px].shape))
    np.testing.assert_array_equal(img1[~out_px], img0[~out_px])
    assert np.abs(img0[out_px] - np.float32(BG)).max() > 0.05  # they did show splats unmasked
    # the backward of a gradient that is zero on masked pixels: the same with the tiles skipped
    assert np.abs(g0).max() > 0
    np.testing.assert_allclose(g1, g0, rtol=1e-4, atol=1e-6 * np.abs(g0).max())
