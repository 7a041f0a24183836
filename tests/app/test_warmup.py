"""The engine thread's warm-up (spirula/engine/studio/warmup.py) compiles what a studio training
uses, so no kernel compiles mid-run: a compile there freezes the view (software Vulkan:
about 0.5 s when the geometry phase, on in the training panel by default, started)."""

import numpy as np

from spirula.engine.config import TrainConfig
from spirula.engine.device import Gpu
from spirula.engine.ingest.dataset import Camera, Dataset
from spirula.engine.splat.trainer import Trainer
from spirula.engine.studio.warmup import warmup


def test_a_run_into_the_geometry_phase_compiles_nothing_after_the_warmup():
    gpu = Gpu("vulkan")  # its own device: kernels other tests compiled do not count
    warmup(gpu, None)
    compiled = set(gpu._kernels)
    rng = np.random.default_rng(5)
    cams = []
    for k in range(3):
        w2c = np.eye(4)
        w2c[:3, 3] = (0.4 * (k - 1), 0.1 * k, 3.5)
        cams.append(Camera(f"c{k}", None, 48, 40, 40.0, 40.0, 24.0, 20.0, w2c,
                           rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)))
    pts = rng.normal(0, 0.4, (500, 3)).astype(np.float32)
    ds = Dataset(None, cams, pts, rng.integers(0, 256, (500, 3), dtype=np.uint8))
    # the training panel's defaults for what the warm-up covers: the geometry phase from 60%
    tr = Trainer(gpu, ds, [0, 1, 2], TrainConfig(steps=10, geometry=True))
    assert tr.geometry is not None and tr.geometry.start == 6
    for step in range(10):
        tr.train_step(step)
    tr.drain()
    assert set(gpu._kernels) - compiled == set(), "kernels compiled after the warm-up"
