"""The engine thread's warm-up: every kernel of a training step (and of a step in the
geometry phase), densification, the opacity reset, a render and the viewer's modes
compiled on a tiny random scene before the window shows, so no real step waits for the
compiler. Its phases go to the splash screen as StageProgress("warmup", ...).

Measured on software Vulkan (lavapipe, 2 shared cores, 2026-12-02): with Mesa's shader
cache disabled (MESA_SHADER_CACHE_DISABLE=true, a first launch) the warm-up took 21 s and the
window was ready in 23 s; with the cache warm (any later launch) 1.9 s and 3.5 s."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import TrainConfig


PHASES = ("a training step", "densification", "a render", "the viewer", "done")


def warmup(gpu, viewer, progress=None) -> None:
    """Compile every kernel of training and the viewer on a tiny scene (before the window
    shows). ``progress(done, total, text)`` hears of each phase (the splash screen shows it)."""
    def phase(k: int) -> None:
        if progress is not None:
            compiled = len(getattr(gpu, "_kernels", ()))
            progress(k, len(PHASES), f"compiling {PHASES[k]} ({compiled} kernels so far)" if k < len(PHASES) - 1
                     else f"{compiled} kernels ready")

    from ..ingest.dataset import Camera, Dataset
    from ..splat.trainer import Trainer
    from .polling import wait_polling
    from .viewer import ViewSource

    rng = np.random.default_rng(0)
    cams = []
    for k, x in enumerate((-0.3, 0.3)):
        w2c = np.eye(4)
        w2c[:3, 3] = (-x, 0.0, 3.0)
        img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
        cams.append(Camera(f"w{k}", Path(f"w{k}.png"), 32, 32, 30.0, 30.0, 16.0, 16.0, w2c, img))
    pts = rng.normal(0, 0.3, (256, 3)).astype(np.float32)
    ds = Dataset(Path("."), cams, pts, rng.integers(0, 256, (256, 3), dtype=np.uint8))
    phase(0)
    # steps 2-3 in the geometry phase: the training panel trains with it by default, and its
    # kernels would otherwise compile when it starts, 60% into a run (a frozen view meanwhile)
    tr = Trainer(gpu, ds, [0, 1], TrainConfig(steps=4, log_interval=2, geometry=True, geometry_from=0.5))
    for step in range(4):
        tr.train_step(step)
    tr.drain()
    tr.collect_losses()
    phase(1)
    tr.model.densify(1e-9, 0.01, 0.005, 3.0e38, 10_000, seed=1)
    tr.model.reset_opacity(0.01)
    phase(2)
    tr.render(0)
    phase(3)
    if viewer is not None:
        from .overlays import frustum_segments

        v = viewer
        v.resize(64, 48)
        v.set_segments(*frustum_segments(cams, 0.2))
        src = ViewSource(tr.model.buf["params"], tr.model.n, 3, 3, tr.cams, cams,
                         lambda i: tr.gt.get(i))
        v.state.camera = 0
        for mode in ("splats", "error"):
            v.state.mode = mode
            v.render(src, readback=True)
        v.state = type(v.state)()
        v.set_segments(np.zeros((0, 6), np.float32), np.zeros(0, np.uint32))
    wait_polling(gpu)
    phase(4)
    del tr
