"""Compute floors of the two rasterizer kernels (`spirula bench raster`).

The memory-traffic floors (spirula/engine/cli/bench/floors.py) say how far a kernel is from moving
its bytes at the measured bandwidth. rasterize_forward and rasterize_backward are bound by
per-pixel arithmetic instead, so they also get a *compute floor*: the time the FP32
arithmetic the algorithm must do would take at the FP32 rate the device really reaches,

    floor_ms = pairs x flops_per_pair / measured FLOP/s,     ratio = measured_ms / floor_ms

**pairs** (compulsory pixel-splat pairs, same for both kernels): every pixel must evaluate
the splats of its tile's depth-ordered list up to and including its last contributor, and
the backward must revisit the same ones. The forward writes that count per pixel as
``last_index[p]`` (1 + the list position of the last composited splat, 0 if none), so
pairs = sum over pixels of last_index (:func:`pair_count`). Pairs past a pixel's last
contributor (the rest of a saturated tile's list; in the backward, the positions a
subgroup replays for its deepest pixel only) are not compulsory and not counted.

**FLOPs per pair**: counted from the inner loops of shaders/raster/raster.slang, as
written, one term per expression (:data:`FORWARD_OPS`, :data:`BACKWARD_OPS`). Rules: a
multiply, add or subtract is 1 FLOP, a fused multiply-add 2 (so the count does not depend
on what the compiler fuses); a product that appears twice in the same pair's code (common
subexpression, same operands in the same order) is counted once; negation is free (a
source modifier); exp, and the reciprocal of a division, are special-function (SFU) ops,
counted separately and not in the FLOPs (x / y = rcp(y) SFU + one multiply; one rcp serves
every division by the same denominator: Vulkan allows 2.5 ulp for OpFDiv, so drivers
compile it that way); loads, stores, integer index arithmetic, compares, min/max
(a compare-select), branches and selects are not FLOPs.

rasterize_forward, per pair (the ``for k`` loop of a contributing splat)::

    d = s_xy[k] - pix                                   2   (2 sub)
    power = -0.5 (co.x d.x d.x + co.z d.y d.y)
            - co.y d.x d.y                              9   (7 mul, 2 add/sub)
    if (power > 0) continue                             0   compare
    alpha = min(ALPHA_MAX, co.w * exp(power))           1   (co.w * G) + 1 SFU (exp); min: compare
    if (alpha < ALPHA_MIN) continue                     0   compare
    nextT = T * (1 - alpha)                             2   (sub, mul)
    if (nextT < T_MIN) ...                              0   compare
    C += s_rgb[k] * (alpha * T)                         7   (1 mul, 3 FMA)
    last = b0 + k + 1 - start                           0   integer
                                                       --
                                                       21 FLOPs + 1 SFU

rasterize_backward, per pair (the ``for j < PY`` body of a contributing pixel)::

    d = xy - pix[j]                                     2
    power = (as the forward)                            9
    G = exp(power)                                      0   + 1 SFU
    a_raw = co.w * G                                    1
    alpha = min(ALPHA_MAX, a_raw); contrib = ...        0   compares
    Ti = T[j] / (1 - alpha)                             2   (sub, mul) + 1 SFU (rcp(1 - alpha))
    gcol = alpha * Ti * gC[j]                           4   (alpha Ti, 3 mul)
    ga = dot(gC[j], c * Ti - S[j] / (1 - alpha))       14   (c Ti 3, S rcp 3 (same rcp), 3 sub,
                                                             dot 3 mul + 2 add)
    S[j] += c * (alpha * Ti)                            6   (alpha Ti shared with gcol; 3 FMA)
    gpow = ga * alpha;  goj = ga * G                    2
    w[3] = gpow * -(co.x d.x + co.y d.y)                3   (co.x d.x from power; mul, add, mul)
    w[4] = gpow * -(co.z d.y + co.y d.x)                2   (both products from power; add, mul)
    w[5] = gpow * (-0.5 d.x d.x)                        3
    w[6] = gpow * (-d.x d.y)                            2
    w[7] = gpow * (-0.5 d.y d.y)                        3
    sum of the 9 terms (gcol 3, w[3..7], goj) over
      the splat's pixels                                9   (1 add per term and pair)
                                                       --
                                                       62 FLOPs + 2 SFU

The last line is the compulsory reduction: each pair's 9 gradient terms must be added into
the splat's sums once, however that is done (the kernel sums a thread's PY pixels, then
the subgroup with a shuffle butterfly, then one atomic add; the butterfly's extra adds
and the atomics are the implementation's, not counted).

Where this is a floor and where not:
  - Every pair is charged the full count of a composited pair. A pair rejected by the
    power or alpha test (before its pixel's last contributor) does only d, power, exp and
    co.w * G: :data:`SKIPPED_FLOPS` = 12 FLOPs (+ 1 SFU) in both kernels (a rejected pair
    has no gradient). The JSON gives that lower variant too (``floor_ms_all_skipped``): the
    strict lower bound whatever fraction of pairs composites. The floor proper charges the
    composited pairs in full and the rejected ones SKIPPED_FLOPS (``floor_ms_composited``),
    from a count of the composited pairs (:func:`composited_count`,
    shaders/profile/composited.slang); ``composited_over_byte_floor`` is that floor over
    the kernel's memory-traffic floor: above 3, no implementation of this algorithm can come
    within 3x of its byte floor.
  - Under SIMT a subgroup pays a composited pair's arithmetic when any of its lanes
    composites, so the backward as built (one pixel per lane, 32-lane subgroups, PY = 2
    pixels per thread in adjacent rows) has a higher floor: ``floor_ms_subgroup`` counts,
    per lane set of 32 pixels, the list positions its subgroup replays (up to its deepest
    pixel's last contributor) and charges those where some pixel composites the full count
    on all 32 lanes, the rest SKIPPED_FLOPS (:func:`lane_set_counts`,
    composited.slang:count_lane_sets); ``subgroup_over_byte_floor`` is that over the byte
    floor. It is a floor of this kernel's mapping of pixels to lanes, not of every
    implementation.
  - FLOPs at an FMA-derived rate: the probe's rate counts 2 FLOPs per FMA, so a lone
    multiply or add (1 FLOP in one issue slot that could have done 2) is charged half its
    issue cost: the floor assumes perfect fusion and stays a lower bound.
  - The SFU ops (exp, rcp) are reported but not in the floor: their throughput is not
    measured (on NVIDIA, 16 per SM and clock against 128 FP32 lanes, so 1 exp per 21
    FLOPs can matter; on lavapipe exp is a polynomial of several FMAs in software).
  - Not counted: the split backward's per-pixel checkpoint restore, the per-batch shared
    memory loads and barriers, and the final C += T * background: per pixel or per batch,
    not per pair.

**measured FLOP/s** (:func:`measure_flops`): shaders/profile/flops.slang, each thread
running 8 independent chains of FMAs (``x = fma(x, a, b)``, uniforms a and b), timed with
GPU timestamps in its own command buffer, one warm-up then the median of a few repeats;
FLOPs = 2 x threads x 8 x 32 x iters.
"""

from __future__ import annotations

import math

from .floor_report import median_gpu_seconds

CHAINS = 8    # shaders/profile/flops.slang CHAINS
UNROLL = 32   # shaders/profile/flops.slang UNROLL

# (expression in shaders/raster/raster.slang, FP32 FLOPs, SFU ops) per pixel-splat pair
FORWARD_OPS: tuple[tuple[str, int, int], ...] = (
    ("d = s_xy[k] - pix", 2, 0),
    ("power = -0.5 (co.x d.x d.x + co.z d.y d.y) - co.y d.x d.y", 9, 0),
    ("alpha = min(ALPHA_MAX, co.w * exp(power))", 1, 1),
    ("nextT = T * (1 - alpha)", 2, 0),
    ("C += s_rgb[k] * (alpha * T)", 7, 0),
)
BACKWARD_OPS: tuple[tuple[str, int, int], ...] = (
    ("d = xy - pix[j]", 2, 0),
    ("power = -0.5 (co.x d.x d.x + co.z d.y d.y) - co.y d.x d.y", 9, 0),
    ("G = exp(power)", 0, 1),
    ("a_raw = co.w * G", 1, 0),
    ("Ti = T[j] / (1 - alpha)", 2, 1),
    ("gcol = alpha * Ti * gC[j]", 4, 0),
    ("ga = dot(gC[j], c * Ti - S[j] / (1 - alpha))", 14, 0),
    ("S[j] += c * (alpha * Ti)", 6, 0),
    ("gpow = ga * alpha; goj = ga * G", 2, 0),
    ("w[3] = gpow * -(co.x d.x + co.y d.y)", 3, 0),
    ("w[4] = gpow * -(co.z d.y + co.y d.x)", 2, 0),
    ("w[5] = gpow * (-0.5 d.x d.x)", 3, 0),
    ("w[6] = gpow * (-d.x d.y)", 2, 0),
    ("w[7] = gpow * (-0.5 d.y d.y)", 3, 0),
    ("sum of the 9 gradient terms over the splat's pixels", 9, 0),
)
# what a pair rejected by the power / alpha test costs: d, power, co.w * exp(power)
SKIPPED_FLOPS = 2 + 9 + 1
LANES = 32  # a subgroup of the backward's floor under SIMT (composited.slang:count_lane_sets)

KERNELS = {"rasterize_forward": FORWARD_OPS, "rasterize_backward": BACKWARD_OPS}


def flops_per_pair(kernel: str) -> int:
    """FP32 FLOPs per composited pixel-splat pair of ``kernel`` (21 forward, 62 backward)."""
    return sum(f for _, f, _ in KERNELS[kernel])


def sfu_per_pair(kernel: str) -> int:
    """Special-function ops (exp, rcp) per pair (1 forward, 2 backward)."""
    return sum(s for _, _, s in KERNELS[kernel])


def pair_count(last_index) -> int:
    """Compulsory pixel-splat pairs: the sum over pixels of the forward's ``last_index``
    (any shape, uint32 per pixel) in int64 (a 4K image over deep lists passes 2^32)."""
    import numpy as np

    return int(np.asarray(last_index).sum(dtype=np.int64))


def _count(gpu, raster, view, entry: str, threads: int, outputs: tuple[str, ...], **uniforms) -> list:
    """Run shaders/profile/composited.slang:``entry``, ``threads`` threads, over ``raster``'s
    own buffers (its last single-pass render of ``view``), writing one uint32 per thread to
    each buffer named in ``outputs``; returns those arrays (int64), in that order. Reporting
    only: outside the profile and the VRAM pool. Raises ValueError past the 1D dispatch
    limit."""
    import numpy as np
    import slangpy as spy

    if threads > gpu.max_items_1d:
        raise ValueError(f"{threads:,} threads: more than one dispatch of {gpu.max_items_1d:,}")
    device = gpu.device
    bufs = {k: device.create_buffer(size=4 * max(threads, 4), usage=spy.BufferUsage.unordered_access
                                    | spy.BufferUsage.shader_resource, label=f"bench.{k}") for k in outputs}
    enc = device.create_command_encoder()
    gpu.kernel("profile/composited", entry).raw.dispatch(
        thread_count=[threads, 1, 1], command_encoder=enc, ranges=raster.buffer("ranges"),
        isect_ids=raster.buffer("isect_ids"), means2d=raster.buffer("means2d"),
        conic_opac=raster.buffer("conic_opac"), last_index=raster.buffer("last_index"),
        width=view.width, height=view.height, tiles_x=view.tiles_x, **uniforms, **bufs)
    device.submit_command_buffer(enc.finish())
    device.wait_for_idle()
    return [bufs[k].to_numpy().view(np.uint32)[:threads].astype(np.int64) for k in outputs]


def composited_count(gpu, raster, view) -> int:
    """Composited pixel-splat pairs of ``raster``'s last rendered ``view`` (a single-pass
    render: ranges from tile row 0): per pixel, the splats before its ``last_index`` that
    pass the forward's alpha test, summed in int64 (composited.slang:count_composited).
    Raises ValueError past the device's 1D dispatch limit (pixels)."""
    (per_pixel,) = _count(gpu, raster, view, "count_composited", view.width * view.height, ("composited",))
    return int(per_pixel.sum())


def lane_set_counts(gpu, raster, view) -> tuple[int, int]:
    """How rasterize_backward's 32-lane subgroups (PY = 2, adjacent rows) replay ``raster``'s
    last single-pass render of ``view``: (visits, any), summed in int64 over the lane sets of
    32 pixels (two per subgroup, composited.slang:count_lane_sets): visits = positions each
    lane set evaluates (its subgroup's last contributor), any = those at which at least one
    of its pixels composites. Raises ValueError when ``raster``'s backward takes another
    number of pixels per thread (the count is written for 2)."""
    if raster.backward_pixels_per_thread != 2:
        raise ValueError(f"lane sets are counted for 2 pixels per thread, not {raster.backward_pixels_per_thread}")
    tiles = view.tiles_x * view.tiles_y
    visits, hit = _count(gpu, raster, view, "count_lane_sets", 8 * tiles, ("visits", "any"), tiles=tiles)
    return int(visits.sum()), int(hit.sum())


def kernel_floor(pairs: int, flops_per_pair: int, flop_per_s: float, ms: float | None = None) -> dict:
    """Compute floor of one kernel: ``flops`` = pairs x flops_per_pair, ``floor_ms`` =
    flops / flop_per_s in ms (None without a positive rate), ``ratio`` = ms / floor_ms
    (None without a time or a floor)."""
    flops = int(pairs) * int(flops_per_pair)
    floor_ms = flops / flop_per_s * 1e3 if flop_per_s and flop_per_s > 0 else None
    ratio = ms / floor_ms if ms is not None and floor_ms else None
    return {"pairs": int(pairs), "flops_per_pair": int(flops_per_pair), "flops": flops, "floor_ms": floor_ms,
            "ms": ms, "ratio": ratio}


def compute_report(pairs: int, kernel_ms: dict, flop_rate: dict, byte_ratio: dict | None = None,
                   composited: int | None = None, lane_sets: tuple[int, int] | None = None) -> dict:
    """The ``compute_floors`` section of the bench JSON.

    pairs: :func:`pair_count` of the last rendered iteration; kernel_ms: measured ms per
    iteration by kernel name (missing: None); flop_rate: :func:`measure_flops`'s result;
    byte_ratio: the memory-traffic floor's ratio by kernel name (floor_report.floor_report), for
    comparison; composited: :func:`composited_count` of the same render (None: not counted);
    lane_sets: :func:`lane_set_counts` of the same render (None: not counted).
    Returns ``flop_per_s``, ``probe`` (how it was measured), ``pairs``, ``composited`` and
    ``kernels`` (per kernel: pairs, flops_per_pair, flops, floor_ms, ms, ratio, sfu_per_pair,
    floor_ms_all_skipped and ratio_all_skipped (every pair charged SKIPPED_FLOPS only),
    floor_ms_composited and ratio_composited (composited pairs in full, the rest at
    SKIPPED_FLOPS), byte_ratio, composited_over_byte_floor (floor_ms_composited over the
    byte floor), floor_ms_subgroup, ratio_subgroup and subgroup_over_byte_floor (the
    backward only, else None: its lane sets' visits, those with a composited pixel in full
    for all 32 lanes, the rest at SKIPPED_FLOPS), and the per-expression ``ops``)."""
    rate = flop_rate["flop_per_s"]
    if composited is not None and not 0 <= composited <= pairs:
        raise ValueError(f"composited pairs {composited} outside 0..{pairs}")
    if lane_sets is not None and not 0 <= lane_sets[1] <= lane_sets[0]:
        raise ValueError(f"lane sets: {lane_sets[1]} visits with a composited pixel of {lane_sets[0]}")
    rows = []
    for name in KERNELS:
        ms = kernel_ms.get(name)
        row = {"name": name, **kernel_floor(pairs, flops_per_pair(name), rate, ms), "sfu_per_pair": sfu_per_pair(name)}
        low = kernel_floor(pairs, SKIPPED_FLOPS, rate, ms)
        row["floor_ms_all_skipped"], row["ratio_all_skipped"] = low["floor_ms"], low["ratio"]
        row["floor_ms_composited"] = row["ratio_composited"] = row["composited_over_byte_floor"] = None
        if composited is not None:
            full, rest = kernel_floor(composited, flops_per_pair(name), rate), kernel_floor(pairs - composited, SKIPPED_FLOPS, rate)
            if full["floor_ms"] is not None:
                mixed = full["floor_ms"] + rest["floor_ms"]
                row["floor_ms_composited"] = mixed
                row["ratio_composited"] = ms / mixed if ms is not None and mixed > 0 else None
        row["byte_ratio"] = (byte_ratio or {}).get(name)
        if row["byte_ratio"] and row["ratio_composited"]:
            row["composited_over_byte_floor"] = row["byte_ratio"] / row["ratio_composited"]
        row["floor_ms_subgroup"] = row["ratio_subgroup"] = row["subgroup_over_byte_floor"] = None
        if lane_sets is not None and name == "rasterize_backward" and rate and rate > 0:
            visits, hit = lane_sets
            full = kernel_floor(LANES * hit, flops_per_pair(name), rate)
            rest = kernel_floor(LANES * (visits - hit), SKIPPED_FLOPS, rate)
            row["floor_ms_subgroup"] = full["floor_ms"] + rest["floor_ms"]
            if ms is not None and row["floor_ms_subgroup"] > 0:
                row["ratio_subgroup"] = ms / row["floor_ms_subgroup"]
                if row["byte_ratio"]:
                    row["subgroup_over_byte_floor"] = row["byte_ratio"] / row["ratio_subgroup"]
        row["ops"] = [{"expr": e, "flops": f, "sfu": s} for e, f, s in KERNELS[name]]
        rows.append(row)
    return {"flop_per_s": rate, "probe": flop_rate, "pairs": int(pairs),
            "composited": None if composited is None else int(composited),
            "lane_sets": None if lane_sets is None else {"visits": int(lane_sets[0]), "any": int(lane_sets[1])},
            "kernels": rows}


def format_compute_floors(rep: dict) -> list[str]:
    """Text table of :func:`compute_report` (for the CLI)."""
    p = rep["probe"]
    fmt = lambda v, f: format(v, f) if v is not None else "-"
    lines = [f"  measured FP32 rate {rep['flop_per_s'] / 1e9:.1f} GFLOP/s ({p['threads']:,} threads x {p['chains']} "
             f"FMA chains x {p['unroll'] * p['iters']} steps, 2 FLOPs per FMA, median of {p['repeats']}); "
             f"{rep['pairs']:,} pixel-splat pairs (sum of last_index)"
             + (f", {rep['composited']:,} of them composited ({rep['composited'] / max(rep['pairs'], 1):.1%})"
                if rep.get("composited") is not None else ""),
             f"  {'kernel':22s}{'ms/iter':>10s}{'FLOP/pair':>11s}{'floor ms':>11s}{'x floor':>9s}"
             f"{'x if skipped':>14s}{'x mixed':>9s}{'x byte floor':>14s}{'mixed/byte':>12s}"]
    for r in rep["kernels"]:
        lines.append(f"  {r['name']:22s}{fmt(r['ms'], '10.3f'):>10s}{r['flops_per_pair']:11d}"
                     f"{fmt(r['floor_ms'], '11.4f'):>11s}{fmt(r['ratio'], '9.1f'):>9s}"
                     f"{fmt(r['ratio_all_skipped'], '14.1f'):>14s}{fmt(r.get('ratio_composited'), '9.1f'):>9s}"
                     f"{fmt(r['byte_ratio'], '14.1f'):>14s}{fmt(r.get('composited_over_byte_floor'), '12.2f'):>12s}")
    back = next((r for r in rep["kernels"] if r.get("floor_ms_subgroup") is not None), None)
    if back is not None:
        ls = rep["lane_sets"]
        lines.append(f"  {back['name']} in 32-lane subgroups: {ls['visits']:,} lane-set visits, {ls['any']:,} with a "
                     f"composited pixel ({ls['any'] / max(ls['visits'], 1):.1%}): floor {back['floor_ms_subgroup']:.4f} ms, "
                     f"{fmt(back['ratio_subgroup'], '.1f')}x; that floor is "
                     f"{fmt(back['subgroup_over_byte_floor'], '.2f')}x the byte floor")
    lines.append(f"  (x if skipped: were every pair rejected by the power/alpha test, {SKIPPED_FLOPS} FLOPs each: "
                 "the strict lower bound; x mixed: composited pairs in full, the rest at that price; "
                 "mixed/byte: that floor over the byte floor, above 3 no implementation is within 3x of it)")
    return lines


# --- measured FP32 rate --------------------------------------------------------------------------
def measure_flops(gpu, threads: int | None = None, iters: int | None = None, repeats: int = 5,
                  a: float = 0.99, b: float = 0.01) -> dict:
    """Device FP32 rate from ``2 x threads x CHAINS x UNROLL x iters / GPU time`` of
    shaders/profile/flops.slang:fma_chains, in its own command buffer between two GPU
    timestamps, one warm-up then the median of ``repeats`` (as floor_report.measure_bandwidth).
    Default 2^20 threads x 1024 iterations (5.5e11 FLOPs, ~8 ms at 67 TFLOP/s), on a
    software device (lavapipe) 2^14 x 64. a, b: the chain's x <- fma(x, a, b) (|a| < 1:
    the values stay finite for any length). Bypasses the profiler and the VRAM pool.
    Returns flop_per_s, kernel_ms, flops, threads, iters, chains, unroll, repeats."""
    import slangpy as spy

    device = gpu.device
    soft = gpu.software
    threads = int(threads) if threads is not None else (1 << 14 if soft else 1 << 20)
    iters = int(iters) if iters is not None else (64 if soft else 1024)
    # straight from slangpy, not through gpu.buffer: outside the VRAM pool's high-water mark
    out = device.create_buffer(size=4 * threads, usage=spy.BufferUsage.unordered_access
                               | spy.BufferUsage.shader_resource, label="bench.flops_out")
    kern = gpu.kernel("profile/flops", "fma_chains").raw  # slangpy's own dispatch: not in the profile
    sec = median_gpu_seconds(device, lambda enc, pool, before, after: kern.dispatch(
        thread_count=[threads, 1, 1], command_encoder=enc, query_pool=pool, query_index_before=before,
        query_index_after=after, out=out, n=threads, iters=iters, a=float(a), b=float(b)), repeats)
    flops = 2 * threads * CHAINS * UNROLL * iters
    rate = flops / sec if sec > 0 else 0.0
    if not math.isfinite(rate):
        rate = 0.0
    return {"flop_per_s": rate, "kernel_ms": sec * 1e3, "flops": flops, "threads": threads, "iters": iters,
            "chains": CHAINS, "unroll": UNROLL, "repeats": repeats,
            "how": "shaders/profile/flops.slang fma_chains: independent FMA chains per thread, GPU timestamps, "
                   "2 FLOPs per FMA, median after one warm-up"}
