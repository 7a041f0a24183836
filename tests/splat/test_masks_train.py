"""Masks in training (spirula/engine/splat/mask_targets.py, spirula/engine/splat/trainer.py): the targets each mode
uploads, the kept-pixel PSNR, and training steps on a tiny scene: an image masked out
entirely changes nothing and rasterises no tile, a half-masked one trains; the mode's
setting and its flow."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.config import TrainConfig, added_later
from spirula.engine.settings import BY_NAME, MASK_MODES
from spirula.engine.splat.mask_targets import kept_psnr, mask_overlay, target_image, training_rgba
from spirula.engine.splat.trainer import Trainer
from tests.splat.scenes import tiny_dataset


def _unpack(packed):
    return packed.view(np.uint8).reshape(*packed.shape, 4)


def test_targets_of_each_mode():
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)
    mask = rng.integers(0, 256, (6, 7), dtype=np.uint8)
    bg = (0.2, 0.4, 1.0)
    off = _unpack(training_rgba(img, mask, "off"))
    np.testing.assert_array_equal(off[..., :3], img)
    assert (off[..., 3] == 255).all()
    ign = _unpack(training_rgba(img, mask, "ignore", bg))
    np.testing.assert_array_equal(ign[..., :3], img)
    np.testing.assert_array_equal(ign[..., 3], mask)
    cut = _unpack(training_rgba(img, mask, "cutout", bg))
    m = mask[..., None] / 255.0
    want = m * img / 255.0 + (1 - m) * np.array(bg)  # "over" the background, straight colour
    assert np.abs(cut[..., :3] / 255.0 - want).max() <= 0.5 / 255 + 1e-6
    assert (cut[..., 3] == 255).all()
    pre = (img * m + 0.5).astype(np.uint8)  # an alpha-channel image: colour already x alpha
    cut_pre = target_image(pre, mask, "cutout", bg, premultiplied=True)
    assert np.abs(cut_pre / 255.0 - (pre / 255.0 + (1 - m) * np.array(bg))).max() <= 0.5 / 255 + 1e-6
    np.testing.assert_array_equal(_unpack(training_rgba(img, None, "ignore"))[..., 3], 255)
    with pytest.raises(ValueError, match="masks mode"):
        training_rgba(img, mask, "auto")
    with pytest.raises(ValueError, match="mask is 3x2"):
        training_rgba(img, mask[:2, :3], "ignore")
    shown = mask_overlay(img, np.where(mask > 127, 255, 0).astype(np.uint8))
    np.testing.assert_array_equal(shown[mask > 127], img[mask > 127])
    assert (shown[mask <= 127] != img[mask <= 127]).any()


def test_kept_psnr():
    rng = np.random.default_rng(6)
    gt = rng.random((8, 9, 3))
    render = gt.copy()
    mask = np.full((8, 9), 255, np.uint8)
    mask[:, :4] = 0
    render[:, :4] += 0.5  # wrong only where masked out
    render[:, 4:] += 0.01
    assert kept_psnr(render, gt, mask) == pytest.approx(40.0, abs=1e-9)
    assert kept_psnr(render, gt, None) < 20
    assert np.isnan(kept_psnr(render, gt, np.zeros((8, 9), np.uint8)))


def _cfg(**kw):
    base = dict(steps=20, log_interval=100, sh_degree=0, densify_from=1000, seed=3, checkpoint_every=0,
                strategy="adc")
    base.update(kw)
    return TrainConfig(**base)


def _params(t):
    t.drain()
    t.gpu.wait_idle()
    return t.gpu.read(t.model.buf["params"], np.float32, t.model.n * t.model.stride).copy()


def test_ignore_mode_steps(gpu):
    """An image whose mask keeps nothing: the step's ranges are all empty and the splats do
    not move (Adam's first step from a zero gradient is zero); the same image half kept
    trains; with masks off it trains too."""
    ds = tiny_dataset(seed=4, n_cams=2)
    h, w = ds.cameras[0].image.shape[:2]
    ds.cameras[0].mask = np.zeros((h, w), np.uint8)
    ds.masks = "ignore"
    t = Trainer(gpu, ds, [0], _cfg())
    assert t.masks == "ignore" and t.loss.masked
    p0 = _params(t)
    t.train_step(0)
    np.testing.assert_array_equal(_params(t), p0)
    assert not t.raster.read("ranges", np.uint32).any()
    assert t.raster.skip_masked is None  # evaluation renders see every tile
    t.release()

    half = np.zeros((h, w), np.uint8)
    half[:, : w // 2] = 255
    ds.cameras[0].mask = half
    t = Trainer(gpu, ds, [0], _cfg())
    p0 = _params(t)
    t.train_step(0)
    assert np.abs(_params(t) - p0).max() > 0
    t.release()

    ds.masks = "off"
    ds.cameras[0].mask = np.zeros((h, w), np.uint8)
    t = Trainer(gpu, ds, [0], _cfg())
    assert t.masks == "off" and not t.loss.masked
    p0 = _params(t)
    t.train_step(0)
    assert np.abs(_params(t) - p0).max() > 0
    t.release()


def test_the_setting():
    s = BY_NAME["masks"]
    assert s.section == "dataset" and s.default == "auto" and s.choices == MASK_MODES
    assert added_later("dataset")["masks"] == "auto"  # what runs saved before masks did without a masks folder
    with pytest.raises(ValueError):
        s.check("transparent")


def test_the_review_shows_masks(gpu):
    """The studio's review (spirula/engine/studio/review.py): a masked camera's image, seen through
    it, has its masked-out pixels darkened and tinted (the kept ones as they are), and the
    notes say which masks are in force."""
    from spirula.engine.studio.review import ReviewScene

    ds = tiny_dataset(seed=5, n_cams=3)
    cam = ds.cameras[1]
    h, w = cam.image.shape[:2]
    cam.mask = np.full((h, w), 255, np.uint8)
    cam.mask[:, : w // 3] = 0
    ds.masks, ds.masks_note = "ignore", "masks: 1 of 3 images masked from the masks in x, used as ignore"
    scene = ReviewScene(gpu, ds, "d", 8)
    assert ds.masks_note in scene.notes
    shown = gpu.read(scene.gt(1), np.uint8, h * w * 4).reshape(h, w, 4)[..., :3]
    np.testing.assert_array_equal(shown, mask_overlay(cam.image, cam.mask))
    np.testing.assert_array_equal(shown[:, w // 3:], cam.image[:, w // 3:])
    assert (shown[:, : w // 3] != cam.image[:, : w // 3]).any()
    np.testing.assert_array_equal(gpu.read(scene.gt(0), np.uint8, h * w * 4).reshape(h, w, 4)[..., :3],
                                  ds.cameras[0].image)


def test_coarse_levels_downscale_the_mask_with_the_image(gpu):
    from spirula.engine.splat.res_schedule import level_image

    ds = tiny_dataset(seed=6, n_cams=2)
    h, w = ds.cameras[0].image.shape[:2]
    ds.cameras[0].mask = np.full((h, w), 255, np.uint8)
    ds.cameras[0].mask[: h // 2] = 0
    ds.masks = "ignore"
    t = Trainer(gpu, ds, [0, 1], _cfg(res_levels=2))
    lvl = _unpack(t._training_rgba(0, 1))
    np.testing.assert_array_equal(lvl[..., 3], level_image(ds.cameras[0].mask, 1))
    np.testing.assert_array_equal(lvl[..., :3], level_image(ds.cameras[0].image, 1))
    assert (_unpack(t._training_rgba(1, 1))[..., 3] == 255).all()  # no mask: every pixel kept
    t.release()


def test_cutout_evaluation_saves_the_target_it_scored(tmp_path):
    """With cut-out masks, a held-out view's eval/<name>.gt.png is the background-filled
    target its PSNR was scored against (it was the raw photo), and the PSNR is that target's."""
    from types import SimpleNamespace

    from PIL import Image

    from spirula.engine.splat.evaluate import evaluate
    from spirula.engine.splat.metrics import psnr

    rng = np.random.default_rng(17)
    image = rng.integers(40, 255, (12, 16, 3), dtype=np.uint8)
    mask = np.full((12, 16), 255, np.uint8)
    mask[:, :5] = 0
    cam = SimpleNamespace(name="v.png", image=image, mask=mask)
    render = rng.uniform(0, 1, (12, 16, 3)).astype(np.float32)
    trainer = SimpleNamespace(recentre_appearance=lambda: None, render=lambda i: render, masks="cutout",
                              cfg=SimpleNamespace(background=(0.2, 0.4, 0.6)),
                              dataset=SimpleNamespace(cameras=[cam], masks_source="folder"))
    out = evaluate(trainer, [0], tmp_path)
    saved = np.asarray(Image.open(tmp_path / "v.gt.png"))
    want = image.copy()
    want[:, :5] = np.round(np.array([0.2, 0.4, 0.6]) * 255).astype(np.uint8)   # the filled background
    assert np.abs(saved.astype(int) - want.astype(int)).max() <= 1
    assert out["views"][0]["psnr"] == pytest.approx(psnr(render, saved.astype(np.float32) / 255.0), abs=1e-4)
