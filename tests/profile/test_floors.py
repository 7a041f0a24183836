"""Memory-traffic floors of `spirula bench raster` (spirula/engine/cli/bench/floors.py) on a tiny workload.

The byte model is checked against counts made here from the buffers themselves: the bytes
of the rows and output buffers a kernel touches, and, for the writes, the words a kernel
really changed in sentinel-filled outputs. The bench report must give a floor to every
operation it timed, from a positive measured bandwidth, and its list of operations must
match the profiler's trace exactly.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from spirula.engine import profile
from spirula.engine.cli.bench import floor_report, floors
from spirula.engine.cli.bench.commands import bench_raster, synthetic_scene
from spirula.engine.splat.camera_table import View, camera_row
from spirula.engine.splat.param_layout import OFF_SH, row_stride, sh_coeffs

SENTINEL = np.uint32(0x7FC0_0DEF)  # a NaN payload no kernel writes


def _changed_words(gpu, buf, count: int) -> int:
    return int(np.count_nonzero(gpu.read(buf, np.uint32, count) != SENTINEL))


def _sentinel_buffer(gpu, words: int):
    return gpu.upload(np.full(words, SENTINEL, np.uint32), "test.sentinel")


def test_bandwidth_probe_measures_and_really_copies(gpu):
    bw = floor_report.measure_bandwidth(gpu, 1 << 20, repeats=2)
    assert bw["bytes"] == 1 << 20 and bw["copy_gb_per_s"] > 0 and bw["kernel_gb_per_s"] > 0
    assert bw["gb_per_s"] == max(bw["copy_gb_per_s"], bw["kernel_gb_per_s"])
    # the probe kernel copies every element, also when each thread loops (stride < n)
    src = np.random.default_rng(1).integers(0, 2**32, 4 * 1000, dtype=np.uint64).astype(np.uint32)
    a, b = gpu.upload(src), _sentinel_buffer(gpu, src.size)
    gpu.kernel("profile/bandwidth", "copy_vec4").raw.dispatch(thread_count=[256, 1, 1], src=a, dst=b, n=1000,
                                                             stride=256)
    np.testing.assert_array_equal(gpu.read(b, np.uint32, src.size), src)


def test_adam_bytes_against_its_buffers(gpu):
    from spirula.engine.splat.model import GaussianModel

    rng = np.random.default_rng(2)
    n, deg = 700, 1
    d = row_stride(deg)
    rows = rng.normal(0, 1, (n, d)).astype(np.float32)
    model = GaussianModel(gpu, rows, deg)
    model.set_learning_rates(1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3)  # every column updated
    grads = gpu.upload(rng.normal(0, 1, (n, d)).astype(np.float32))
    bufs = {**{k: model.buf[k] for k in ("params", "exp_avg", "exp_avg_sq")}, "grads": grads}
    before = {k: gpu.read(b, np.uint32, n * d) for k, b in bufs.items()}
    enc = gpu.encoder()
    model.record_adam(enc, grads)
    gpu.submit(enc)
    changed = {k: int(np.count_nonzero(gpu.read(bufs[k], np.uint32, n * d) != v)) for k, v in before.items()}
    # written: params and both moments, every float; grads only read
    assert changed == {"params": n * d, "exp_avg": n * d, "exp_avg_sq": n * d, "grads": 0}
    row_bytes = rows.nbytes  # one [N, D] float32 buffer
    written = 4 * sum(changed.values())
    w = floors.Workload(n=n, max_sh_degree=deg, sh_degree=deg, visible=0, intersections=0, width=16, height=16)
    t = floors.adam_step(w)
    assert (t.read, t.write) == (4 * row_bytes, written) == (4 * row_bytes, 3 * row_bytes)
    assert t.total == 7 * 4 * n * d


def test_project_forward_bytes_against_its_buffers(gpu):
    from spirula.engine.splat.render import Rasterizer

    deg, n, width, height = 3, 2500, 80, 56
    sc = synthetic_scene(n, width, height, deg, seed=4)
    rows = sc["rows"]
    view = View(0, width, height)
    raster = Rasterizer(gpu, deg)
    cams = gpu.upload(camera_row(sc["w2c"], sc["fx"], sc["fy"], sc["cx"], sc["cy"], width, height)[None])
    outs = {"means2d": 2, "conic_opac": 4, "rgb": 3, "depths": 1, "radii": 2, "tiles_touched": 1,
            "depth_keys": 1, "depth_ids": 1}  # words per Gaussian (Rasterizer's documented buffers)
    bufs = {k: _sentinel_buffer(gpu, c * n) for k, c in outs.items()}
    enc = gpu.encoder()
    raster.k_project.dispatch(thread_count=[n, 1, 1], command_encoder=enc, params=gpu.upload(rows), cams=cams,
                              n=n, cam_index=0, sh_degree=deg, tiles_x=view.tiles_x, tiles_y=view.tiles_y, **bufs)
    gpu.submit(enc)
    visible = gpu.read(bufs["tiles_touched"], np.uint32, n) > 0
    v = int(visible.sum())
    assert 0.5 * n < v < n  # the scene has 10% of its centres outside the view
    # reads: the geometry and opacity columns of every row, the SH of the visible rows
    read = rows[:, :OFF_SH].nbytes + rows[visible, OFF_SH:OFF_SH + 3 * sh_coeffs(deg)].nbytes
    # writes: the words the kernel really changed
    written = 4 * sum(_changed_words(gpu, bufs[k], c * n) for k, c in outs.items())
    # ... which are: all of radii, tiles_touched, depth key and id; the rest for the visible only
    per_all = 4 * (2 + 1 + 1 + 1)
    per_visible = 4 * (2 + 4 + 3 + 1)
    assert written == per_all * n + per_visible * v
    w = floors.Workload(n=n, max_sh_degree=deg, sh_degree=deg, visible=v, intersections=0, width=width,
                        height=height)
    t = floors.project_forward(w)
    assert (t.read, t.write) == (read, written)


def test_sort_and_scan_calls_match_the_sorter(gpu):
    from spirula.engine.splat.sort import RadixSort, Scan

    sorter, scan = RadixSort(gpu), Scan(gpu)
    for n in (1, 2, 4096, 4097, 70_000, 2_000_000, 30_000_000):
        assert len(floors.scan_calls(n, "s", scan.tile)) == scan.dispatches(n), n
        for bits in (5, 12, 32):
            calls = floors.sort_calls(n, bits, "s", sorter.tile)
            kernels = [c for c in calls if c.name != "copy"]
            assert len(kernels) == sorter.dispatches(n, bits), (n, bits)
            copies = len(calls) - len(kernels)
            assert copies == (2 if n > 1 and RadixSort.passes(bits) % 2 else 0)
    # a 2M-Gaussian iteration: a two-dispatch scan of the tile counts, a three-pass depth sort
    # (24-bit keys: its result is copied back) and a two-pass tile sort on 78 x 52 tiles
    w = floors.Workload(n=2_000_000, max_sh_degree=3, sh_degree=3, visible=1_800_000, intersections=9_000_000,
                        width=1237, height=822)
    names = [c.name for c in floors.iteration_calls(w)]
    assert w.tile_sort_bits == 12 and names.count("copy") == 2 and names.count("scan_reduce") == 1
    assert names.count("radix_scatter") == names.count("radix_offsets") == 3 + 2
    assert set(floors.kernel_bytes(w)) == set(names)
    assert all(c.traffic.total > 0 for c in floors.iteration_calls(w))


def test_bench_reports_a_floor_for_every_timed_kernel(gpu):
    was_on = profile.enabled()
    # 5000 Gaussians: the tile-count scan takes its multi-level path (scan_reduce)
    res = bench_raster(gpu, gaussians=5000, width=64, height=48, iters=2, warmup=1, bandwidth_bytes=4 << 20)
    assert profile.enabled() == was_on
    json.dumps(res, allow_nan=False)
    bw, rep = res["bandwidth"], res["floors"]
    assert bw["gb_per_s"] > 0 and bw["copy_gb_per_s"] > 0 and bw["kernel_gb_per_s"] > 0
    assert rep["bandwidth_gb_per_s"] == bw["gb_per_s"]
    assert rep["model_matches_trace"], rep["mismatch"]
    rows = {r["name"]: r for r in rep["kernels"]}
    timed = set(res["kernels_ms_per_iteration"]) | {"copy", "clear"}  # 1 tile-sort pass: copies back
    assert "scan_reduce" in timed and set(rows) == timed
    for name, r in rows.items():
        assert r["calls"] == r["model_calls"] > 0, r
        assert r["ms"] > 0 and r["bytes"] > 0 and r["floor_ms"] > 0, r
        assert r["floor_ms"] == pytest.approx(r["bytes"] / (bw["gb_per_s"] * 1e9) * 1e3)
        assert r["ratio"] == pytest.approx(r["ms"] / r["floor_ms"])
        # below 1 only where a tiny kernel's data stays in the CPU's caches; never absurdly so
        assert r["ratio"] >= 0.1, r
    for name in ("copy", "clear"):  # the profiler's own byte counts: at least the compulsory bytes
        assert rows[name]["issued_bytes"] >= rows[name]["bytes"], rows[name]
    assert rows["copy"]["issued_bytes"] == rows["copy"]["bytes"]
    work = rep["workload"]
    assert work["n"] == 5000 and 0 < work["visible"] < 5000
    assert 0 < work["replayed"] <= work["intersections"] and work["tile_sort_passes"] == 1
    assert abs(work["intersections"] - res["intersections"]) <= 0.01 * res["intersections"]
    assert len(rep["slowest"]) == 3
    ms = sorted((r["ms"] for r in rows.values()), reverse=True)
    assert [s["ms"] for s in rep["slowest"]] == ms[:3]
    assert all(s["within"] == (s["ratio"] <= 3.0) for s in rep["slowest"])
    assert len(rep["calls"]) == sum(r["calls"] for r in rows.values())
    lines = floor_report.format_floors(rep, bw)
    assert any("slowest three" in ln for ln in lines) and any("project_backward_adam" in ln for ln in lines)
