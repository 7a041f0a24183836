"""GPU exclusive scan and stable radix sort (spirula/engine/splat/sort.py) against NumPy.

Fresh random inputs per test (seeded for reproducibility of failures, never zeros).
Runs on whatever device spirula.engine.device.get_gpu() gives ($SPIRULA_DEVICE, default vulkan).
"""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.device import get_gpu
from spirula.engine.splat.sort import RadixSort, Scan, read_total

SENTINEL = 0xA5A5A5A5


@pytest.fixture(scope="module")
def gpu():
    return get_gpu()


@pytest.fixture(scope="module")
def scan(gpu):
    return Scan(gpu)


@pytest.fixture(scope="module")
def sorter(gpu):
    return RadixSort(gpu)


@pytest.fixture(scope="module")
def sorter_alt(gpu):
    """Other code paths: shared-memory block scans (no subgroup ops), unrolled loops,
    small tiles (1024 elements: more tiles, more scan levels)."""
    return RadixSort(gpu, items_per_thread=4, use_waves=False, unroll=True)


def _excl(a: np.ndarray) -> tuple[np.ndarray, int]:
    c = np.cumsum(a, dtype=np.uint64)
    ex = np.concatenate([[0], c[:-1]]).astype(np.uint64) % (1 << 32)
    return ex.astype(np.uint32), int(c[-1] % (1 << 32)) if a.size else 0


def _run_scan(gpu, scan, a, in_place=False, with_total=True, total64=False):
    """(dst [n + 3] uint32, total): total[0] (saturating word), or with total64 the 64-bit
    total as a Python int (spirula.engine.splat.sort.read_total)."""
    n = a.size
    src = gpu.upload(np.concatenate([a, np.full(3, SENTINEL, np.uint32)]))
    dst = src if in_place else gpu.upload(np.full(n + 3, SENTINEL, np.uint32))
    total = gpu.upload(np.full(4, SENTINEL, np.uint32))
    enc = gpu.encoder()
    scan.record(enc, src, dst, n, total=total if with_total else None)
    gpu.submit(enc)
    out = gpu.read(dst, np.uint32, n + 3)
    return out, (read_total(gpu, total) if total64 else int(gpu.read(total, np.uint32, 1)[0]))


@pytest.mark.parametrize("n", [1, 255, 256, 257, 4096, 4097, 100_000, 1_500_001])
def test_scan_matches_cumsum(gpu, scan, n):
    rng = np.random.default_rng(1000 + n)
    a = rng.integers(1, 1000, n, dtype=np.uint32)
    out, total = _run_scan(gpu, scan, a)
    ref, ref_total = _excl(a)
    np.testing.assert_array_equal(out[:n], ref)
    assert (out[n:] == SENTINEL).all(), "scan wrote past n"
    assert total == ref_total


def test_scan_in_place_wraps_mod_2_32(gpu, scan):
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1 << 32, 70_001, dtype=np.uint64).astype(np.uint32)  # sums overflow
    out, _ = _run_scan(gpu, scan, a, in_place=True, with_total=False)
    ref, _ = _excl(a)
    np.testing.assert_array_equal(out[:a.size], ref)


@pytest.mark.parametrize("n", [3000, 70_001, 17_000_000])
def test_scan_total_is_64_bit(gpu, scan, n):
    """Sums past 2^32 (one group, two dispatches with raw tile sums, the recursive path):
    the total is exact in 64 bits and its first word saturates; prefix sums below 2^32
    stay exact."""
    rng = np.random.default_rng(11 + n)
    hi = (1 << 33) // n * 2  # mean hi/2 per element: the sum passes 2^33, no 4096-tile passes 2^32
    a = rng.integers(0, hi, n, dtype=np.uint64).astype(np.uint32)
    if n > 4096 ** 2:  # recursive: the 4096^2 elements of a level-1 tile must stay below 2^32
        a = rng.integers(0, 400, n, dtype=np.uint64).astype(np.uint32)
        a[4096 ** 2:] = rng.integers(0, 20_000, n - 4096 ** 2, dtype=np.uint64)
    out, total = _run_scan(gpu, scan, a, total64=True)
    want = int(a.astype(np.uint64).sum())
    assert want > 1 << 32 and total == want
    ref = np.concatenate([[0], np.cumsum(a, dtype=np.uint64)[:-1]])
    below = ref < (1 << 32)
    np.testing.assert_array_equal(out[:n][below], ref[below].astype(np.uint32))
    word0 = int(gpu.read(_last_total(gpu, scan, a), np.uint32, 1)[0])
    assert word0 == 0xFFFFFFFF, "first word must saturate"


def _last_total(gpu, scan, a):
    total = gpu.upload(np.full(4, SENTINEL, np.uint32))
    enc = gpu.encoder()
    scan.record(enc, gpu.upload(a), gpu.buffer(4 * a.size), a.size, total=total)
    gpu.submit(enc)
    return total


def test_scan_total_saturated_tile_is_a_lower_bound(gpu, scan):
    """Tiles summing past 2^32 (elements near 2^32): the total is >= 2^32, never wrapped."""
    rng = np.random.default_rng(5)
    a = rng.integers(1 << 31, 1 << 32, 9000, dtype=np.uint64).astype(np.uint32)
    _, total = _run_scan(gpu, scan, a, total64=True)
    assert (1 << 32) <= total <= int(a.astype(np.uint64).sum())


def test_scan_empty_writes_zero_total(gpu, scan):
    out, total = _run_scan(gpu, scan, np.zeros(0, np.uint32))
    assert total == 0 and (out == SENTINEL).all()


def test_scan_three_levels_alt_path(gpu):
    # tile 1024: 1.5 M elements need 3 levels (4 dispatches: the last sums are reduced per group)
    scan = Scan(gpu, items_per_thread=4, use_waves=False, unroll=True)
    assert scan.dispatches(1_500_000) == 4
    rng = np.random.default_rng(11)
    a = rng.integers(1, 50, 1_500_000, dtype=np.uint32)
    out, total = _run_scan(gpu, scan, a)
    ref, ref_total = _excl(a)
    np.testing.assert_array_equal(out[:a.size], ref)
    assert total == ref_total


@pytest.mark.parametrize("alt", [False, True])
@pytest.mark.parametrize("n, count", [(3000, 1234), (100_000, 0), (100_000, 4097), (100_000, 99_999),
                                      (1_500_000, 700_001), (70_001, 200_000)])
def test_scan_stops_at_a_count_on_the_gpu(gpu, scan, alt, n, count):
    """Scan.record(count=...): a scan sized for n that covers only the first min(n, count[0])
    elements (the viewer's kept splats): their prefix sums and total, nothing written past
    them (one group, raw tile sums, and with the alternative tiles three levels)."""
    s = Scan(gpu, items_per_thread=4, use_waves=False, unroll=True) if alt else scan
    rng = np.random.default_rng(31 + n + count)
    a = rng.integers(1, 1000, n, dtype=np.uint32)
    m = min(n, count)
    src = gpu.upload(np.concatenate([a, np.full(3, SENTINEL, np.uint32)]))
    dst = gpu.upload(np.full(n + 3, SENTINEL, np.uint32))
    total = gpu.upload(np.full(4, SENTINEL, np.uint32))
    counter = gpu.upload(np.array([count, SENTINEL], np.uint32))
    enc = gpu.encoder()
    s.record(enc, src, dst, n, total=total, count=counter)
    gpu.submit(enc)
    out = gpu.read(dst, np.uint32, n + 3)
    ref, ref_total = _excl(a[:m]) if m else (a[:0], 0)
    np.testing.assert_array_equal(out[:m], ref)
    assert (out[m:] == SENTINEL).all(), "scan wrote past the count"
    assert read_total(gpu, total) == ref_total


def _keys(rng, n, bits):
    """Keys with many duplicates in the low `bits` bits, random junk above them."""
    distinct = rng.integers(0, 1 << bits, max(1, min(n // 8, 1000)), dtype=np.uint64)
    k = distinct[rng.integers(0, distinct.size, n)]
    if bits < 32:
        k |= rng.integers(0, 1 << (32 - bits), n, dtype=np.uint64) << np.uint64(bits)
    return k.astype(np.uint32)


def _run_sort(gpu, sorter, keys, vals, bits):
    n = keys.size
    pad = np.full(3, SENTINEL, np.uint32)
    kb = gpu.upload(np.concatenate([keys, pad]))
    vb = gpu.upload(np.concatenate([vals, pad]))
    enc = gpu.encoder()
    rk, rv = sorter.record(enc, kb, vb, n, bits)
    assert rk is kb and rv is vb
    gpu.submit(enc)
    return gpu.read(kb, np.uint32, n + 3), gpu.read(vb, np.uint32, n + 3)


def _check_sorted(keys, vals, bits, out_k, out_v):
    n = keys.size
    mask = np.uint32(0xFFFFFFFF if bits == 32 else (1 << bits) - 1)
    order = np.argsort(keys & mask, kind="stable")
    np.testing.assert_array_equal(out_k[:n], keys[order])
    np.testing.assert_array_equal(out_v[:n], vals[order])  # values unique: proves stability
    assert (out_k[n:] == SENTINEL).all() and (out_v[n:] == SENTINEL).all(), "sort wrote past n"


@pytest.mark.parametrize("bits", [4, 12, 13, 32])
@pytest.mark.parametrize("n", [1, 1000, 300_000])
def test_radix_sort_stable(gpu, sorter, n, bits):
    rng = np.random.default_rng(n * 100 + bits)
    keys = _keys(rng, n, bits)
    vals = rng.permutation(n).astype(np.uint32)  # random, unique
    out_k, out_v = _run_sort(gpu, sorter, keys, vals, bits)
    _check_sorted(keys, vals, bits, out_k, out_v)


# 600,001 pairs in 1024-pair tiles: 587 tiles, so radix_offsets scans each digit's row in
# three chunks of 256 tiles with a carry between them
@pytest.mark.parametrize("bits,n", [(7, 50_001), (20, 123_457), (32, 4097), (13, 600_001)])
def test_radix_sort_alt_path(gpu, sorter_alt, bits, n):
    rng = np.random.default_rng(bits + n)
    keys = _keys(rng, n, bits)
    vals = rng.permutation(n).astype(np.uint32)
    out_k, out_v = _run_sort(gpu, sorter_alt, keys, vals, bits)
    _check_sorted(keys, vals, bits, out_k, out_v)


def test_depth_then_tile_and_scratch_growth(gpu):
    """The renderer's use: sort by depth (32 bits), then stably by tile id (13 bits), which
    must equal lexsort by (tile, depth, index). A fresh sorter records a small sort and a
    large one into one encoder first, so its scratch grows between two records."""
    sorter = RadixSort(gpu)  # same compiled kernels as the fixture (cached by the Gpu)
    rng = np.random.default_rng(3)
    n = 200_003
    depth = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    depth[rng.integers(0, n, n // 4)] = depth[0]  # many ties in depth
    tile = rng.integers(0, 5000, n).astype(np.uint32)
    small_k = _keys(rng, 1000, 32)
    small_v = rng.permutation(1000).astype(np.uint32)
    sk, sv = gpu.upload(small_k), gpu.upload(small_v)
    dk, ids = gpu.upload(depth), gpu.upload(np.arange(n, dtype=np.uint32))
    enc = gpu.encoder()
    sorter.record(enc, sk, sv, 1000, 32)
    sorter.record(enc, dk, ids, n, 32)
    gpu.submit(enc)
    pad = np.full(3, SENTINEL, np.uint32)
    _check_sorted(small_k, small_v, 32, np.concatenate([gpu.read(sk, np.uint32), pad]),
                  np.concatenate([gpu.read(sv, np.uint32), pad]))
    ids_d = gpu.read(ids, np.uint32, n)
    np.testing.assert_array_equal(ids_d, np.argsort(depth, kind="stable"))
    tk = gpu.upload(tile[ids_d])  # the renderer emits tile keys in depth order on the GPU
    enc = gpu.encoder()
    sorter.record(enc, tk, ids, n, 13)
    gpu.submit(enc)
    ref = np.lexsort((np.arange(n), depth, tile))
    np.testing.assert_array_equal(gpu.read(ids, np.uint32, n), ref)
    np.testing.assert_array_equal(gpu.read(tk, np.uint32, n), tile[ref])


def test_odd_passes_without_copy_back(gpu, sorter):
    rng = np.random.default_rng(5)
    n, bits = 20_000, 8
    keys = _keys(rng, n, bits)
    vals = rng.permutation(n).astype(np.uint32)
    kb, vb = gpu.upload(keys), gpu.upload(vals)
    enc = gpu.encoder()
    rk, rv = sorter.record(enc, kb, vb, n, bits, copy_back=False)
    assert rk is not kb and rv is not vb  # one pass: result in the ping-pong buffers
    gpu.submit(enc)
    _check_sorted(keys, vals, bits,
                  np.concatenate([gpu.read(rk, np.uint32, n), np.full(3, SENTINEL, np.uint32)]),
                  np.concatenate([gpu.read(rv, np.uint32, n), np.full(3, SENTINEL, np.uint32)]))


# the last two: past 256 tiles of 4096 pairs, so radix_offsets carries between chunks on the
# default path (subgroup scans) too, with and without a count below the capacity
@pytest.mark.parametrize("count,capacity,bits", [(70_001, 100_000, 13), (5, 9000, 12), (123_457, 123_457, 20),
                                                (150_000, 100_000, 13), (60_000, 100_000, 20),
                                                (1_000_003, 1_100_000, 13), (1_100_000, 1_100_000, 20)])
def test_radix_sort_count_on_gpu(gpu, sorter, count, capacity, bits):
    """The training step's use: dispatches sized for ``capacity`` pairs, the number to sort
    (count) only in a GPU buffer. The first min(count, capacity) pairs come out sorted
    stably; with an even number of passes the rest of the buffers is untouched."""
    rng = np.random.default_rng(count + capacity + bits)
    keys = _keys(rng, capacity, bits)
    vals = rng.permutation(capacity).astype(np.uint32)
    pad = np.full(3, SENTINEL, np.uint32)
    kb, vb = gpu.upload(np.concatenate([keys, pad])), gpu.upload(np.concatenate([vals, pad]))
    cb = gpu.upload(np.array([count, SENTINEL, SENTINEL, SENTINEL], np.uint32))
    enc = gpu.encoder()
    sorter.record(enc, kb, vb, capacity, bits, count=cb)
    gpu.submit(enc)
    out_k, out_v = gpu.read(kb, np.uint32, capacity + 3), gpu.read(vb, np.uint32, capacity + 3)
    m = min(count, capacity)
    _check_sorted(keys[:m], vals[:m], bits, np.concatenate([out_k[:m], pad]), np.concatenate([out_v[:m], pad]))
    if sorter.passes(bits) % 2 == 0:
        np.testing.assert_array_equal(out_k[m:capacity], keys[m:])
        np.testing.assert_array_equal(out_v[m:capacity], vals[m:])


@pytest.mark.parametrize("bits", [8, 13, 24])  # one, two and three passes
@pytest.mark.parametrize("count,capacity", [(70_001, 100_000), (100_000, 100_000)])
def test_radix_sort_from_separate_inputs_lands_in_place(gpu, sorter, bits, count, capacity):
    """The viewer's depth sort: pairs sorted from ``inputs`` into keys / values with no copy
    back whatever the pass count; with a GPU count below the capacity, the result's elements
    past it keep what they held."""
    rng = np.random.default_rng(bits * 7 + count)
    keys = _keys(rng, capacity, bits)
    vals = rng.permutation(capacity).astype(np.uint32)
    pad = np.full(3, SENTINEL, np.uint32)
    ik, iv = gpu.upload(keys), gpu.upload(vals)
    old = rng.integers(0, 1 << 32, capacity, dtype=np.uint64).astype(np.uint32)
    kb, vb = gpu.upload(np.concatenate([old, pad])), gpu.upload(np.concatenate([old[::-1], pad]))
    cb = gpu.upload(np.array([count, SENTINEL, SENTINEL, SENTINEL], np.uint32))
    enc = gpu.encoder()
    rk, rv = sorter.record(enc, kb, vb, capacity, bits, count=cb, inputs=(ik, iv))
    assert rk is kb and rv is vb
    gpu.submit(enc)
    out_k, out_v = gpu.read(kb, np.uint32, capacity + 3), gpu.read(vb, np.uint32, capacity + 3)
    m = count
    _check_sorted(keys[:m], vals[:m], bits, np.concatenate([out_k[:m], pad]), np.concatenate([out_v[:m], pad]))
    np.testing.assert_array_equal(out_k[m:], np.concatenate([old[m:], pad]))
    np.testing.assert_array_equal(out_v[m:], np.concatenate([old[::-1][m:], pad]))
