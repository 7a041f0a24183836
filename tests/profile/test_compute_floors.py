"""Compute floors of the rasterizers (spirula/engine/cli/bench/compute_floors.py).

The pair count is checked against an independent float64 NumPy re-run of the forward's
front-to-back compositing over the GPU's own tile lists and projected splats; the FLOP
probe against the FMA chain it claims to compute, evaluated here step by step; the floor
arithmetic on given numbers; the bench's report for consistency with its byte floors.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from spirula.engine.cli.bench import compute_floors as cf
from spirula.engine.cli.bench.commands import _raster_counts, bench_raster, synthetic_scene
from spirula.engine.splat.camera_table import TILE, View, camera_row

SENTINEL = np.uint32(0x7FC0_0DEF)  # a NaN payload the probe never writes


def _last_contributors(means2d, conic_opac, ranges, isect_ids, view) -> np.ndarray:
    """Per pixel, 1 + the list position of its last composited splat (0 if none): the
    compositing of raster.slang's header (alpha = min(0.999, o exp(power)), skipped when
    power > 0 or alpha < 1/255, the pixel stops where T would fall below 1e-4) in float64,
    vectorised over pixels, one step per list position. Returns that [H, W] int64, whether
    each pixel stopped at T < 1e-4 [H, W] bool, how many splats each pixel composited
    [H, W] int64, and per lane set of rasterize_backward's subgroups (:func:`_lane_set`)
    how many list positions some pixel of it composited at [8 tiles] int64."""
    ys, xs = np.mgrid[0:view.height, 0:view.width]
    tile = ((ys // TILE) * view.tiles_x + xs // TILE).ravel()
    px, py = xs.ravel() + 0.5, ys.ravel() + 0.5
    start = ranges[tile, 0].astype(np.int64)
    length = (ranges[tile, 1] - ranges[tile, 0]).astype(np.int64)
    T = np.ones(px.size)
    last = np.zeros(px.size, np.int64)
    done = np.zeros(px.size, bool)
    composited = np.zeros(px.size, np.int64)
    lane_set = _lane_set(view).ravel()
    lane_any = np.zeros(8 * view.tiles_x * view.tiles_y, np.int64)
    with np.errstate(invalid="ignore"):  # culled Gaussians' rows hold whatever was there (NaN bit
        m2, co = means2d.astype(np.float64), conic_opac.astype(np.float64)  # patterns); only listed ids are read
    for k in range(int(length.max(initial=0))):
        valid = (k < length) & ~done
        g = isect_ids[np.where(valid, start + k, 0)]
        dx, dy = m2[g, 0] - px, m2[g, 1] - py
        a, b, c, o = co[g].T
        power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
        alpha = np.minimum(0.999, o * np.exp(np.minimum(power, 0.0)))
        use = valid & (power <= 0.0) & (alpha >= 1.0 / 255.0)
        next_T = T * (1.0 - alpha)
        stop = use & (next_T < 1e-4)
        done |= stop
        use &= ~stop
        T = np.where(use, next_T, T)
        last = np.where(use, k + 1, last)
        composited += use
        hit = np.zeros(lane_any.size, bool)
        hit[lane_set[use]] = True
        lane_any += hit
    shape = (view.height, view.width)
    return last.reshape(shape), done.reshape(shape), composited.reshape(shape), lane_any


def _lane_set(view) -> np.ndarray:
    """[H, W] index of each pixel's lane set: rasterize_backward's threads hold PY = 2
    pixels in adjacent rows and 32 lanes make a subgroup, so subgroup w (0..3) of a tile
    covers its rows 4w..4w+3, and the first pixels of its lanes (rows 4w, 4w + 2) form lane
    set 2w, the second ones (rows 4w + 1, 4w + 3) lane set 2w + 1; index = 8 tile + set."""
    ys, xs = np.mgrid[0:view.height, 0:view.width]
    tile = (ys // TILE) * view.tiles_x + xs // TILE
    row = ys % TILE
    return 8 * tile + 2 * (row // 4) + row % 2


def test_pairs_match_a_numpy_recompositing(gpu):
    from spirula.engine.splat.render import Rasterizer

    # partial edge tiles on both axes; dense enough that some pixels stop at T < 1e-4 (16%)
    deg, n, width, height = 1, 40_000, 100, 70
    sc = synthetic_scene(n, width, height, deg, seed=11)
    view = View(0, width, height)
    raster = Rasterizer(gpu, deg)
    cams = gpu.upload(camera_row(sc["w2c"], sc["fx"], sc["fy"], sc["cx"], sc["cy"], width, height)[None])
    raster.render(gpu.upload(sc["rows"]), n, cams, view, deg)
    m = raster.m
    ranges = raster.read("ranges", np.uint32, shape=(view.tiles_x * view.tiles_y, 2))
    ids = raster.read("isect_ids", np.uint32)[:m]
    want, stopped, want_composited, want_lane_any = _last_contributors(raster.read("means2d", np.float32, shape=(n, 2)),
                              raster.read("conic_opac", np.float32, shape=(n, 4)), ranges, ids, view)
    got = raster.read("last_index", np.uint32, shape=(height, width))
    # float32 on the GPU against float64 here: a pixel may flip at the 1/255 or 1e-4 cut-offs
    assert np.mean(got == want) > 0.995, f"{np.mean(got == want):.4f} of pixels agree"
    ref_pairs = int(want.sum())
    pairs = cf.pair_count(got)
    # exactly the recomputed pairs, but for the pixels that flipped (none in this scene)
    assert pairs == ref_pairs + int((got.astype(np.int64) - want).sum()), (pairs, ref_pairs)
    assert abs(pairs - ref_pairs) <= 1e-4 * ref_pairs, (pairs, ref_pairs)
    # the bench's helper: same pairs from the same readback (padding to whole tiles adds none)
    visible, replayed, bench_pairs = _raster_counts(raster, n, view)
    assert bench_pairs == pairs
    # the scene must tell pairs apart from the tile lists' length: pixels end before their list
    ys, xs = np.mgrid[0:height, 0:width]
    listed = int((ranges[:, 1] - ranges[:, 0]).astype(np.int64)[(ys // TILE) * view.tiles_x + xs // TILE].sum())
    print(f"{pairs} pairs, {ref_pairs} recomputed, {listed} listed, {m} intersections, "
          f"{stopped.mean():.0%} of pixels stopped")
    assert stopped.mean() > 0.1 and np.all(want[stopped] > 0)
    # composited pairs: the GPU's count over its own last_index against the re-run's, which
    # flips with the same pixels (none here); most pairs of the scene are rejected (3.4%
    # composite), so the count is not the pair count again
    composited = cf.composited_count(gpu, raster, view)
    ref_composited = int(want_composited.sum())
    print(f"{composited} composited, {ref_composited} recomputed")
    assert abs(composited - ref_composited) <= 1e-4 * ref_composited, (composited, ref_composited)
    assert 0 < composited < 0.5 * pairs, (composited, pairs)
    assert 0 < ref_pairs < 0.97 * listed and replayed <= pairs <= TILE * TILE * replayed
    # the backward's lane sets: each visits the positions up to its subgroup's (two lane
    # sets') deepest pixel, from the GPU's last_index (exact); the visits with a composited
    # pixel against the re-run's
    visits, lane_any = cf.lane_set_counts(gpu, raster, view)
    deepest = np.zeros(4 * view.tiles_x * view.tiles_y, np.int64)
    np.maximum.at(deepest, (_lane_set(view) // 2).ravel(), got.ravel().astype(np.int64))
    assert visits == 2 * int(deepest.sum())
    ref_any = int(want_lane_any.sum())
    print(f"{visits} lane-set visits, {lane_any} with a composited pixel, {ref_any} recomputed")
    assert abs(lane_any - ref_any) <= 1e-4 * ref_any, (lane_any, ref_any)
    # a visit with a composite holds 1 to 32 of the composited pairs; most visits hold none
    assert composited / 32 <= lane_any <= composited and lane_any < 0.5 * visits


def _fma_chains_reference(threads: int, iters: int, a: float, b: float) -> np.ndarray:
    """out[t] of shaders/profile/flops.slang for threads 0..threads-1: each chain stepped
    x <- round_f32(x a + b) (float64 product of two float32 is exact) CHAINS x UNROLL x
    iters times in total, then the chains summed."""
    t = np.arange(threads)
    c = np.arange(cf.CHAINS)
    f = np.float32
    x = (f(0.5) + f(0.001) * (t % 1000).astype(f))[:, None] + f(0.1) * c.astype(f)[None, :]
    a64, b64 = float(f(a)), float(f(b))
    for _ in range(cf.UNROLL * iters):
        x = (x.astype(np.float64) * a64 + b64).astype(np.float32)
    return x.astype(np.float64).sum(1)


def test_flop_probe_measures_and_really_computes(gpu):
    r = cf.measure_flops(gpu, threads=2048, iters=4, repeats=2)
    assert math.isfinite(r["flop_per_s"]) and r["flop_per_s"] > 0, r
    assert r["flops"] == 2 * 2048 * cf.CHAINS * cf.UNROLL * 4
    assert r["flop_per_s"] == pytest.approx(r["flops"] / (r["kernel_ms"] / 1e3))
    # the kernel's outputs are the chain's values: every step done (a step fewer or more
    # moves the result by ~0.03 (x0 - 1), 1000x the tolerance), threads past n untouched
    threads, n, iters, a, b = 1024, 1000, 3, 0.97, 0.02
    out = gpu.upload(np.full(threads, SENTINEL, np.uint32))
    gpu.kernel("profile/flops", "fma_chains").raw.dispatch(thread_count=[threads, 1, 1], out=out, n=n,
                                                          iters=iters, a=a, b=b)
    raw = gpu.read(out, np.uint32, threads)
    assert np.all(raw[n:] == SENTINEL)
    got = raw[:n].view(np.float32).astype(np.float64)
    want = _fma_chains_reference(n, iters, a, b)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
    fewer = _fma_chains_reference(n, iters - 1, a, b)
    assert np.min(np.abs(fewer - want) / want) > 1e-3  # the check could tell a short chain


def test_floor_arithmetic():
    assert cf.flops_per_pair("rasterize_forward") == 21 and cf.sfu_per_pair("rasterize_forward") == 1
    assert cf.flops_per_pair("rasterize_backward") == 62 and cf.sfu_per_pair("rasterize_backward") == 2
    # 10^6 pairs x 21 FLOPs at 2.1e10 FLOP/s: 1 ms; measured 5 ms -> 5x
    f = cf.kernel_floor(1_000_000, 21, 2.1e10, 5.0)
    assert f["flops"] == 21_000_000 and f["floor_ms"] == pytest.approx(1.0) and f["ratio"] == pytest.approx(5.0)
    assert cf.kernel_floor(10, 21, 0.0, 1.0)["floor_ms"] is None
    assert cf.kernel_floor(10, 21, 1e9)["ratio"] is None
    # pairs past 2^32 (a 4K frame over deep lists) stay exact
    last = np.full((300, 300), 60_000, np.uint32)
    assert cf.pair_count(last) == 300 * 300 * 60_000 > 2**32
    probe = {"flop_per_s": 6.2e10, "threads": 1, "chains": 8, "unroll": 32, "iters": 1, "repeats": 1}
    rep = cf.compute_report(2_000_000, {"rasterize_forward": 7.0, "rasterize_backward": 4.0}, probe,
                            {"rasterize_forward": 44.0})
    rows = {r["name"]: r for r in rep["kernels"]}
    fwd, bwd = rows["rasterize_forward"], rows["rasterize_backward"]
    assert fwd["floor_ms"] == pytest.approx(2e6 * 21 / 6.2e10 * 1e3) and fwd["ratio"] == pytest.approx(7.0 / fwd["floor_ms"])
    assert bwd["floor_ms"] == pytest.approx(2.0) and bwd["ratio"] == pytest.approx(2.0)
    assert bwd["floor_ms_all_skipped"] == pytest.approx(2e6 * cf.SKIPPED_FLOPS / 6.2e10 * 1e3)
    assert fwd["byte_ratio"] == 44.0 and bwd["byte_ratio"] is None
    assert rep["composited"] is None and fwd["floor_ms_composited"] is None and fwd["ratio_composited"] is None
    # a quarter of the pairs composited: those at the full count, the rest at SKIPPED_FLOPS
    rep = cf.compute_report(2_000_000, {"rasterize_forward": 7.0, "rasterize_backward": 4.0}, probe,
                            {"rasterize_forward": 44.0}, composited=500_000)
    rows = {r["name"]: r for r in rep["kernels"]}
    fwd, bwd = rows["rasterize_forward"], rows["rasterize_backward"]
    assert rep["composited"] == 500_000
    assert bwd["floor_ms_composited"] == pytest.approx((5e5 * 62 + 1.5e6 * 12) / 6.2e10 * 1e3)
    assert bwd["ratio_composited"] == pytest.approx(4.0 / bwd["floor_ms_composited"])
    byte_floor_ms = 7.0 / 44.0  # ms / byte ratio
    assert fwd["composited_over_byte_floor"] == pytest.approx(fwd["floor_ms_composited"] / byte_floor_ms)
    assert bwd["composited_over_byte_floor"] is None
    with pytest.raises(ValueError, match="composited"):
        cf.compute_report(10, {}, probe, composited=11)
    assert sum(o["flops"] for o in bwd["ops"]) == 62
    assert bwd["floor_ms_subgroup"] is None and rep["lane_sets"] is None
    # lane sets: 100,000 visits, 30,000 with a composited pixel: those at the full count on
    # all 32 lanes, the rest at SKIPPED_FLOPS; the backward only
    rep = cf.compute_report(2_000_000, {"rasterize_forward": 7.0, "rasterize_backward": 4.0}, probe,
                            {"rasterize_backward": 80.0}, composited=500_000, lane_sets=(100_000, 30_000))
    rows = {r["name"]: r for r in rep["kernels"]}
    fwd, bwd = rows["rasterize_forward"], rows["rasterize_backward"]
    assert rep["lane_sets"] == {"visits": 100_000, "any": 30_000}
    assert bwd["floor_ms_subgroup"] == pytest.approx(32 * (3e4 * 62 + 7e4 * 12) / 6.2e10 * 1e3)
    assert bwd["ratio_subgroup"] == pytest.approx(4.0 / bwd["floor_ms_subgroup"])
    assert bwd["subgroup_over_byte_floor"] == pytest.approx(bwd["floor_ms_subgroup"] / (4.0 / 80.0))
    assert fwd["floor_ms_subgroup"] is None and fwd["subgroup_over_byte_floor"] is None
    with pytest.raises(ValueError, match="lane sets"):
        cf.compute_report(10, {}, probe, lane_sets=(5, 6))
    text = "\n".join(cf.format_compute_floors(rep))
    assert "32-lane subgroups" in text
    assert "rasterize_forward" in text and "rasterize_backward" in text and "62.0 GFLOP/s" in text


def test_bench_reports_compute_floors(gpu):
    res = bench_raster(gpu, gaussians=3000, width=64, height=48, iters=1, warmup=1, bandwidth_bytes=1 << 20)
    json.dumps(res, allow_nan=False)
    rep = res["compute_floors"]
    assert rep["flop_per_s"] > 0 and rep["probe"]["flop_per_s"] == rep["flop_per_s"]
    # the probe again after the loop, and each timed iteration's GPU time
    assert res["flop_rate_after_over_before"] > 0
    assert len(res["iteration_gpu_ms_each"]) == 1 and res["iteration_gpu_ms_each"][0] == res["iteration_gpu_ms"]
    byte_rows = {r["name"]: r for r in res["floors"]["kernels"]}
    replayed = res["floors"]["workload"]["replayed"]
    assert 0 < replayed <= rep["pairs"] <= TILE * TILE * replayed
    assert 0 < rep["composited"] <= rep["pairs"]
    for r in rep["kernels"]:
        b = byte_rows[r["name"]]
        assert r["pairs"] == rep["pairs"] and r["ms"] == b["ms"] > 0 and r["byte_ratio"] == b["ratio"]
        assert r["floor_ms"] == pytest.approx(r["pairs"] * r["flops_per_pair"] / rep["flop_per_s"] * 1e3)
        assert r["ratio"] == pytest.approx(r["ms"] / r["floor_ms"])
        assert r["floor_ms_all_skipped"] <= r["floor_ms_composited"] <= r["floor_ms"]
    # every lane-set visit is at least one pair's evaluation on 32 lanes, so the backward's
    # subgroup floor is at least the one of its composited pairs
    bwd = next(r for r in rep["kernels"] if r["name"] == "rasterize_backward")
    assert 0 < rep["lane_sets"]["any"] <= rep["lane_sets"]["visits"]
    assert bwd["floor_ms_subgroup"] >= bwd["floor_ms_composited"]
