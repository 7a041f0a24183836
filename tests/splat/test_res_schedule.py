"""Coarse-to-fine training resolution (spirula/engine/splat/res_schedule.py, Trainer._enter_level):
the schedule's levels, the scaled intrinsics against a NumPy projection, a low-level render
against the box-filtered full-size render, and a short run that passes every level."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.config import TrainConfig
from spirula.engine.splat.camera_table import View
from spirula.engine.splat.res_schedule import ResolutionSchedule, level_camera_table, level_size
from spirula.engine.splat.trainer import Trainer
from tests.splat.scenes import tiny_dataset


def test_levels_fall_by_one_per_span_until_full_size():
    s = ResolutionSchedule(levels=3, until=0.5, steps=1000)
    got = [s.level_at(i) for i in range(1000)]
    # 2 levels above full size share the first 500 steps: 250 each
    assert got[:250] == [2] * 250 and got[250:500] == [1] * 250 and got[500:] == [0] * 500
    assert not ResolutionSchedule(1, 0.5, 1000).active and ResolutionSchedule(1, 0.5, 1000).level_at(0) == 0
    with pytest.raises(ValueError):
        ResolutionSchedule(2, 0.0, 100)
    with pytest.raises(ValueError):
        ResolutionSchedule(0, 0.5, 100)


def test_scaled_intrinsics_project_a_point_to_the_scaled_pixel():
    rng = np.random.default_rng(11)
    ds = tiny_dataset(seed=int(rng.integers(1000)), w=101, h=77)  # odd sizes: rounding matters
    for level in (1, 2):
        table = level_camera_table(ds.cameras, level)
        for cam, row in zip(ds.cameras, table):
            w, h = level_size(cam.width, cam.height, level)
            assert (row[16], row[17]) == (w, h)
            x = cam.w2c[:3, :3] @ rng.normal(0, 0.3, 3) + cam.w2c[:3, 3]
            u, v = cam.fx * x[0] / x[2] + cam.cx, cam.fy * x[1] / x[2] + cam.cy  # full-size pixel coords
            u2, v2 = row[12] * x[0] / x[2] + row[14], row[13] * x[1] / x[2] + row[15]
            # the same point on the image scaled to w x h: pixel edges scale, so coordinates do too
            np.testing.assert_allclose([u2, v2], [u * w / cam.width, v * h / cam.height], rtol=1e-5, atol=1e-4)


def test_a_level_renders_the_box_filtered_full_image(gpu):
    """Half-size render of the model vs the full render box-filtered 2x2 (NumPy): equal up to
    what a Gaussian changes inside one full-size pixel; a half-pixel error of the scaled
    principal point is 10x that."""
    ds = tiny_dataset(seed=5, w=96, h=64, n_points=300)
    t = Trainer(gpu, ds, list(range(len(ds.cameras))), TrainConfig(steps=10, res_levels=2, res_until=0.5,
                                                                     sh_degree=0, densify_from=1000,
                                                                     init_opacity=0.6, checkpoint_every=0))
    t._enter_level(1)

    for ci in range(len(ds.cameras)):
        full = t.render(ci).astype(np.float64)
        w, h = t._sizes[ci]
        half = t.raster.render(t.model.buf["params"], t.model.n, t._level_cams, View(ci, w, h), 0)
        boxed = full.reshape(h, 2, w, 2, 3).mean(axis=(1, 3))
        err = np.abs(half - boxed)
        assert half.shape == (32, 48, 3) and full.std() > 0.02  # something is drawn
        # measured: mean 3e-4, 99% 1.6e-3 (std 0.11); with cx off by half a pixel: 3.6e-3, 1.4e-2
        assert err.mean() < 0.01 * full.std() and np.quantile(err, 0.99) < 0.005, (err.mean(), full.std())
    t.release()


def test_a_run_through_every_level_trains_and_ends_at_full_size(gpu):
    ds = tiny_dataset(seed=2, w=64, h=48)
    cfg = TrainConfig(steps=60, res_levels=3, res_until=0.5, sh_degree=0, densify_from=1000, log_interval=10,
                      checkpoint_every=0)
    t = Trainer(gpu, ds, list(range(len(ds.cameras))), cfg)
    sizes = []
    for s in range(cfg.steps):
        t.train_step(s)
        sizes.append(t.raster.view.width)
    t.drain()
    losses = [e["loss"] for e in t.collect_losses()]
    assert sizes[0] == 16 and sizes[15] == 32 and sizes[-1] == 64  # 64 / 4, / 2, full
    assert np.all(np.isfinite(losses)) and len(losses) == 6
    t.release()
