"""Peak memory per mesh step (spirula/engine/mesh/memory.py): the GPU bytes the stage accounts and
the host high-water mark, each recorded for the step that held them."""

import numpy as np

from spirula.engine.mesh.memory import MemoryMeter, _status_kb


def test_each_step_keeps_its_own_peaks():
    m = MemoryMeter()
    m.start("a")
    m.gpu("tsdf", 10 << 20)
    m.start("b")                      # ends a
    m.gpu("tsdf", 0)
    m.gpu("texture", 30 << 20)
    rss = _status_kb("VmRSS") or 0
    block = np.ones(200 << 20, np.uint8)  # 200 MiB touched in step b
    m.finish()
    del block
    steps = m.report()["steps"]
    assert steps["a"]["gpu_peak_mb"] == 10.0 and steps["b"]["gpu_peak_mb"] == 30.0
    assert m.report()["gpu_peak_mb"] == 30.0
    assert steps["b"]["host_peak_mb"] >= rss / 1024 + 190
    if m.reset_ok:  # the high-water mark was reset when b began: a never saw b's block
        assert steps["a"]["host_peak_mb"] < steps["b"]["host_peak_mb"] - 150
