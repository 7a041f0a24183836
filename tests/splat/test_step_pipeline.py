"""The lean training step (spirula/engine/splat/step_pipeline.py, Rasterizer capacity mode):
renders sized by a capacity match the exactly counted ones, and a step whose intersections
outgrow its capacity changes nothing and is trained again."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.config import TrainConfig
from spirula.engine.splat.camera_table import View
from spirula.engine.splat.trainer import Trainer
from tests.splat.scenes import tiny_dataset


def _config(**kw) -> TrainConfig:
    base = dict(steps=50, log_interval=10, sh_degree=1, sh_degree_interval=4, densify_from=1000, seed=5)
    base.update(kw)
    return TrainConfig(**base)


def _render_capacity(tr: Trainer, index: int, capacity: int) -> tuple[np.ndarray, int]:
    """Forward render of camera ``index`` in capacity mode: one command buffer, no count read."""
    cam = tr.dataset.cameras[index]
    r, m = tr.raster, tr.model
    r.setup(m.buf["params"], m.n, tr.cams, View(index, cam.width, cam.height), 1, capacity=capacity)
    enc = tr.gpu.encoder()
    r.record_prepare(enc)
    r.record_forward(enc)
    tr.gpu.submit(enc)
    image = tr.gpu.read(r.image, np.float32, shape=(cam.height, cam.width, 3))
    return image, int(tr.gpu.read(r.overflow_guard()[0], np.uint32, 1)[0])


def test_capacity_mode_renders_exactly_like_a_counted_render(gpu):
    ds = tiny_dataset(seed=11, n_points=3000)
    tr = Trainer(gpu, ds, [0, 1, 2, 3], _config())
    for i in range(2):
        exact = tr.raster.render(tr.model.buf["params"], tr.model.n, tr.cams,
                                 View(i, ds.cameras[i].width, ds.cameras[i].height), 1)
        m = tr.raster.m
        assert m > 1000  # enough intersections to make a cut visible
        roomy, count = _render_capacity(tr, i, 3 * m + 17)
        assert count == m
        np.testing.assert_array_equal(roomy, exact)  # same sorts, same order: bit-identical
        cut, count = _render_capacity(tr, i, m // 2)
        assert count == m  # the true count, above the capacity: the step will be skipped
        assert np.abs(cut - exact).max() > 1e-3  # half the intersections are missing


def test_overflowed_step_changes_nothing_and_its_camera_is_trained_again(gpu, monkeypatch):
    ds = tiny_dataset(seed=12, n_points=3000)
    tr = Trainer(gpu, ds, [0, 1, 2, 3], _config())
    for s in range(3):
        tr.train_step(s)
    tr.drain()
    assert tr.pipeline.overflows == 0 and tr.pipeline.last_count > 1000
    before = {k: tr.gpu.read(tr.model.buf[k], np.float32, tr.model.n * tr.model.stride)
              for k in ("params", "exp_avg", "exp_avg_sq")}
    stats = tr.gpu.read(tr.model.buf["grad2d_sum"], np.float32, tr.model.n)
    next_cam = tr._order[-1] if tr._order else None
    monkeypatch.setattr(tr.pipeline, "capacity", lambda: 256)  # far below any view's count
    tr.train_step(3)
    tr.drain()
    assert tr.pipeline.overflows == 1
    for k, v in before.items():
        np.testing.assert_array_equal(tr.gpu.read(tr.model.buf[k], np.float32, v.size), v, err_msg=k)
    np.testing.assert_array_equal(tr.gpu.read(tr.model.buf["grad2d_sum"], np.float32, tr.model.n), stats)
    if next_cam is not None:
        assert tr._order[-1] == next_cam  # queued again: the next step trains on it
    monkeypatch.undo()
    tr.train_step(4)
    tr.drain()
    assert tr.pipeline.overflows == 1
    assert not np.array_equal(tr.gpu.read(tr.model.buf["params"], np.float32, before["params"].size), before["params"])


@pytest.mark.parametrize("depth", [2, 3])
def test_training_matches_with_any_number_of_steps_in_flight(gpu, depth):
    """Steps in flight change when the host reads, not what the GPU computes: the loss
    history of short runs agrees (float atomics allow tiny differences)."""
    ds = tiny_dataset(seed=13, n_points=2000)
    losses = {}
    for d in (1, depth):
        tr = Trainer(gpu, ds, [0, 1, 2, 3], _config(steps=20, log_interval=5, densify_from=4, densify_interval=5,
                                                   densify_until=16, grad_threshold=1e-6))
        tr.pipeline.depth = d
        tr.train()
        assert tr.pipeline.overflows == 0
        losses[d] = [h["loss"] for h in tr.state.history]
    # float atomics in the backward sum in a different order run to run (lavapipe uses
    # several threads): 1e-4 apart seen; a skipped or repeated step moves the loss further
    np.testing.assert_allclose(losses[depth], losses[1], rtol=2e-3)


def test_released_trainer_leaves_no_buffer_alive(gpu):
    """Kernels cache their call sites' last arguments (spirula.engine.device.Kernel.record); a
    released trainer's buffers must still be freed when it goes (VRAM pool back to where
    it was, by reference counts)."""
    import gc

    gc.collect()
    gpu.forget_bindings()
    gpu.pool.collect()
    base = gpu.pool.total
    ds = tiny_dataset(seed=14, n_points=1500)
    tr = Trainer(gpu, ds, [0, 1, 2, 3], _config())
    for s in range(3):
        tr.train_step(s)
    tr.drain()
    gpu.pool.collect()
    assert gpu.pool.total - base > 1 << 19  # the trainer's model, scratch and images
    tr.release()
    del tr
    gc.collect()
    gpu.pool.collect()
    assert gpu.pool.total == base


def test_outgrown_scratch_is_freed_by_the_next_step(gpu):
    """Scratch replaced by growth (at least Trainer.eager_trim_bytes of it; default: any)
    goes once the GPU is done with it (the step after), not at the next densify, where it
    would sit on top of densify's temporary: after every step no outgrown buffer is held,
    though buffers did grow (densify doubles the model); with a threshold above what grew,
    they stay."""
    ds = tiny_dataset(seed=15, n_points=1500)
    tr = Trainer(gpu, ds, [0, 1, 2, 3], _config(steps=40, densify_from=2, densify_interval=10, densify_until=35,
                                               grad_threshold=1e-7))
    assert tr.eager_trim_bytes == 0  # the default: any outgrown scratch
    sizes, n0 = [], tr.model.n
    for s in range(36):
        tr.train_step(s)
        assert tr.raster.outgrown_bytes() == 0 and tr.loss.scratch.outgrown_bytes() == 0, f"step {s}"
        sizes.append(tr.raster.bufs.nbytes())
    tr.drain()
    assert tr.model.n > 1.5 * n0  # densify grew the model ...
    assert sizes[-1] > sizes[0]   # ... and the rasterizer's scratch with it
    # the same run with a threshold of 256 MiB (far above this scene's scratch) holds
    # outgrown scratch at some step: the eager freeing above was the threshold's doing
    tr = Trainer(gpu, ds, [0, 1, 2, 3], _config(steps=40, densify_from=2, densify_interval=10, densify_until=35,
                                               grad_threshold=1e-7))
    tr.eager_trim_bytes = 256 << 20
    held = []
    for s in range(36):
        tr.train_step(s)
        held.append(tr.raster.outgrown_bytes())
    tr.drain()
    assert max(held) > 0


def test_logged_loss_is_the_mean_of_the_steps_since_the_last_log(gpu):
    """The loss comes back a step late through the read-back ring (Trainer.collect_losses):
    a log every 4 steps must be the mean of the per-step losses of a run that logs every
    step; each entry carries the Gaussian count after its step (densifications at steps 6
    and 12; the runs differ in their counts there, float atomics reach the decision)."""
    ds = tiny_dataset(seed=13, n_points=2000)
    runs, counts = {}, {}
    for every, densify_from in ((1, 1000), (4, 1000), (4, 2)):
        tr = Trainer(gpu, ds, [0, 1, 2, 3], _config(steps=12, log_interval=every, densify_from=densify_from,
                                                    densify_interval=6, densify_until=100))
        seen, n_after = [], []
        for s in range(12):
            tr.train_step(s)
            n_after.append(tr.model.n)
            seen += tr.collect_losses()
        tr.drain()
        seen += tr.collect_losses()
        assert tr.collect_losses() == []  # each entry is returned once
        assert seen == tr.state.history
        runs[every, densify_from], counts[every, densify_from] = seen, n_after
    per_step, logged = runs[1, 1000], runs[4, 1000]
    assert [h["step"] for h in per_step] == list(range(1, 13)) and [h["step"] for h in logged] == [4, 8, 12]
    for h in logged:
        window = per_step[h["step"] - 4:h["step"]]
        assert h["loss"] == pytest.approx(np.mean([w["loss"] for w in window]), rel=1e-4)
    grown, n_after = runs[4, 2], counts[4, 2]
    assert n_after[5] != n_after[4] and n_after[11] != n_after[10]  # both densifications changed the count
    assert [h["num_gaussians"] for h in grown] == [n_after[3], n_after[7], n_after[11]]
