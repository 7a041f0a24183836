"""The Profiler panel from ProfilerSnapshot messages (no engine): GPU ms per training step
by kernel from the difference of two snapshots, the table sorted by share with training
and viewer apart, VRAM with the device budget, and axes that say so when there is no data."""

from __future__ import annotations

import math

from spirula.engine.studio import protocol as M


def _snapshot(train_ms: dict, viewer_ms: dict, vram_mib: float = 10.0, budget: float | None = 40.0):
    kernels = [{"name": n, "module": "m", "calls": 10, "total_ms": ms, "us_per_call": 100.0 * ms, "scope": ""}
               for n, ms in train_ms.items()]
    kernels += [{"name": n, "module": "m", "calls": 3, "total_ms": ms, "us_per_call": 10.0, "scope": "viewer"}
                for n, ms in viewer_ms.items()]
    heaps = [] if budget is None else [{"device_local": True, "budget_mib": budget}]
    vram = {"categories": {"splats": {"current_mib": vram_mib}, "scratch": {"current_mib": 2.0}},
            "total": {"current_mib": vram_mib + 2, "high_water_mib": vram_mib + 2},
            "driver": {"vk_budget": {"heaps": heaps}}}
    return M.ProfilerSnapshot({"device": "test", "kernels": kernels, "vram": vram})


def test_ms_per_step_share_and_scopes(qapp):
    from spirula.app.plots import pg  # noqa: F401 (pyqtgraph's binding first)
    from spirula.app.profiler_panel import ProfilerPanel

    p = ProfilerPanel()
    p.resize(500, 900)
    p.show()
    assert "no per-kernel timing yet" in p.step_plot.plotItem.titleLabel.text
    p.set_step(100)
    p.on_snapshot(_snapshot({"raster": 100.0, "sort": 50.0}, {"raster": 30.0}))
    p.set_step(150)  # 50 steps: raster +40 ms, sort +10 ms
    p.on_snapshot(_snapshot({"raster": 140.0, "sort": 60.0}, {"raster": 90.0}))
    assert p.per_step[-1] == (150, {"raster": 0.8, "sort": 0.2})  # viewer time is not the step's
    p.refresh()
    rows = [[p.table.item(r, c).text() for c in range(6)] for r in range(p.table.rowCount())]
    assert [r[:3] for r in rows] == [["raster", "training", "70.0 %"], ["sort", "training", "30.0 %"],
                                     ["raster", "viewer", "100.0 %"]]
    assert rows[0][3] == "0.800" and rows[2][3] == "–"
    assert "1.0 ms per step at step 150" in p.step_legend.text()
    assert p.step_plot.plotItem.titleLabel.text.endswith("by kernel")  # no longer empty
    assert p.budget_line is not None and p.budget_line.value() == 40.0
    assert "budget</span> 40 MiB" in p.vram_legend.text()
    # a budget far above the data is said, not drawn (the data would be a line at the bottom)
    p.on_snapshot(_snapshot({"raster": 150.0, "sort": 61.0}, {}, budget=100_000.0))
    p.refresh()
    assert p.budget_line is None and "off the chart" in p.vram_legend.text()
    # a new run (the step goes back) starts a new timeline
    p.set_step(10)
    p.on_snapshot(_snapshot({"raster": 151.0, "sort": 61.0}, {}))
    assert p.per_step == []


def test_flat_curves_get_a_sensible_range(qapp):
    from spirula.app.plots import fit_y, plot

    w = plot("Gaussians", "count")
    fit_y(w, [5000, 5000, 5000], include_zero=True)
    lo, hi = w.getViewBox().viewRange()[1]
    assert lo <= 0 < 5000 < hi < 7000  # not -5,000 .. 5,000, not 0 .. 1
    fit_y(w, [18.2, 18.2])
    lo, hi = w.getViewBox().viewRange()[1]
    assert 15 < lo < 18.2 < hi < 21


def test_a_short_plot_keeps_its_value_labels_apart(qapp):
    from spirula.app.plots import LABEL_PX, plot

    axis = plot("Held-out PSNR", "dB").getAxis("left")
    for lo, hi, px in ((13.6, 16.2, 34), (0.14, 0.29, 35), (0, 14_000, 30), (0, 14_000, 400)):
        spacing = axis.tickSpacing(lo, hi, px)[0][0]
        assert spacing * px / (hi - lo) >= LABEL_PX, (lo, hi, px, spacing)
        assert spacing / 10 ** math.floor(math.log10(spacing)) in (1, 2, 2.5, 5)   # a round step
    assert len(axis.tickSpacing(0, 14_000, 400)) > 1   # a tall one keeps pyqtgraph's levels
