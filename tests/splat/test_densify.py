"""Adaptive density control on the GPU against the 3DGS rules computed in NumPy; the
Gaussian cap (only the largest screen-space gradients grow); the model's buffer memory."""

from contextlib import contextmanager

import numpy as np
import pytest

from spirula.engine.profile.pool import SPLAT, VramPool
from spirula.engine.splat.param_layout import OFF_OPACITY, OFF_SCALE, row_stride
from spirula.engine.splat.model import GaussianModel
from tests.splat.scenes import random_scene

KEEP, CLONE, SPLIT = 1, 2, 3


# --- NumPy reference ----------------------------------------------------------------------
def reference_actions(rows, grad_sum, counts, grow_threshold, clone_scale, prune_op, prune_scale):
    """3DGS decision rule: action [N] (0 prune, KEEP, CLONE, SPLIT) for Gaussians whose mean
    screen-space gradient g = grad_sum / counts (float32 division, 0 where counts == 0)
    exceeds ``grow_threshold`` (None: nothing grows)."""
    op = 1 / (1 + np.exp(-rows[:, OFF_OPACITY].astype(np.float64)))
    smax = np.exp(rows[:, OFF_SCALE:OFF_SCALE + 3].astype(np.float64).max(1))
    g = mean_grad(grad_sum, counts)
    grow = np.zeros(len(rows), bool) if grow_threshold is None else g > np.float32(grow_threshold)
    clone = grow & (smax <= clone_scale)
    split = grow & (smax > clone_scale)
    # 3DGS prunes after growing: split children (scales / 1.6) are judged, not the parent
    prune = (op < prune_op) | (np.where(split, smax / 1.6, smax) > prune_scale)
    action = np.where(clone, CLONE, np.where(split, SPLIT, KEEP))
    return np.where(prune, 0, action)


def mean_grad(grad_sum, counts):
    g = grad_sum.astype(np.float32) / np.maximum(counts, 1).astype(np.float32)
    return np.where(counts > 0, g, np.float32(0))


def copies_of(action):
    return np.where(action == 0, 0, np.where(action == KEEP, 1, 2))


def capped_reference(rows, grad_sum, counts, thr, rule, cap):
    """Grow only the largest gradients so the count stays <= cap: candidates (g > thr) in
    decreasing g, each adding copies(grown) - copies(kept) rows, the longest prefix that fits."""
    full = reference_actions(rows, grad_sum, counts, thr, *rule)
    kept = reference_actions(rows, grad_sum, counts, None, *rule)
    g = mean_grad(grad_sum, counts)
    cand = np.flatnonzero(g > np.float32(thr))
    order = cand[np.argsort(-g[cand], kind="stable")]
    extra = (copies_of(full) - copies_of(kept))[order]
    assert np.all(extra >= 0)
    budget = cap - copies_of(kept).sum()
    k = int(np.searchsorted(np.cumsum(extra), budget, side="right"))
    action = kept.copy()
    action[order[:k]] = full[order[:k]]
    return action, order, extra, k


def check_rows(out, avg_out, sq_out, rows, moments, moments_sq, action, smax):
    """Output rows [after, D] and moments against what ``action`` asks for."""
    copies = copies_of(action)
    assert len(out) == copies.sum()
    dst = np.concatenate([[0], np.cumsum(copies)[:-1]])
    plain, c, s = action == KEEP, action == CLONE, action == SPLIT
    for got, want in ((out, rows), (avg_out, moments), (sq_out, moments_sq)):
        np.testing.assert_array_equal(got[dst[plain]], want[plain])
        np.testing.assert_array_equal(got[dst[c]], want[c])
    np.testing.assert_array_equal(out[dst[c] + 1], rows[c])
    assert np.all(avg_out[dst[c] + 1] == 0) and np.all(sq_out[dst[c] + 1] == 0)
    for k in (0, 1):
        child = out[dst[s] + k]
        np.testing.assert_allclose(child[:, OFF_SCALE:OFF_SCALE + 3], rows[s, OFF_SCALE:OFF_SCALE + 3] - np.log(1.6), atol=1e-5)
        np.testing.assert_array_equal(child[:, OFF_OPACITY:], rows[s, OFF_OPACITY:])
        assert np.all(avg_out[dst[s] + k] == 0) and np.all(sq_out[dst[s] + k] == 0)
    # split children are drawn from N(mean, Sigma): offsets in units of the parent's scales
    offs = out[dst[s], :3] - rows[s, :3]
    assert np.all(np.linalg.norm(offs, axis=1) < 6 * smax[s])
    assert s.sum() == 0 or np.any(out[dst[s], :3] != out[dst[s] + 1, :3])


def load_model(gpu, rows, degree, grad_sum, counts, moments, moments_sq, moments_bf16=False):
    model = GaussianModel(gpu, rows, degree, moments_bf16=moments_bf16)
    model.load_state_dict(dict(params=rows, exp_avg=moments, exp_avg_sq=moments_sq, adam_step=0,
                               grad2d_sum=grad_sum.astype(np.float32), vis_count=counts.astype(np.float32)))
    return model


def bf16_rounded(x):
    """float32 -> nearest bfloat16 (ties to even), as float32 (NumPy, independent of the model)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def read_state(gpu, model):
    st = model.state_dict()
    return st["params"], st["exp_avg"], st["exp_avg_sq"]


def smax_of(rows):
    return np.exp(rows[:, OFF_SCALE:OFF_SCALE + 3].astype(np.float64).max(1))


# --- tests --------------------------------------------------------------------------------
@pytest.mark.parametrize("bf16", [False, True])
def test_densify_clone_split_prune(gpu, bf16, rng):
    n = 5000
    _, rows = random_scene(rng, n, degree=3, scale=(-4.0, -1.0), opacity=(-6.0, 3.0))
    grad_sum = rng.uniform(0, 4e-4, n).astype(np.float32)
    counts = rng.integers(0, 4, n).astype(np.float32)
    moments = rng.normal(0, 1, rows.shape).astype(np.float32)
    moments_sq = rng.uniform(0, 1, rows.shape).astype(np.float32)
    model = load_model(gpu, rows, 3, grad_sum, counts, moments, moments_sq, moments_bf16=bf16)
    if bf16:  # what the model can hold
        moments, moments_sq = bf16_rounded(moments), bf16_rounded(moments_sq)
    thr, clone_scale, prune_op, prune_scale = 2e-4, 0.1, 0.005, 0.3
    before, after = model.densify(thr, clone_scale, prune_op, prune_scale, max_gaussians=10**7, seed=5)

    action = reference_actions(rows, grad_sum, counts, thr, clone_scale, prune_op, prune_scale)
    assert before == n and after == copies_of(action).sum()
    keep = action > 0
    assert (action == CLONE).sum() > 50 and (action == SPLIT).sum() > 50 and (~keep).sum() > 50, \
        "test scene must exercise all cases"
    smax, op = smax_of(rows), 1 / (1 + np.exp(-rows[:, OFF_OPACITY].astype(np.float64)))
    rescued = (action == SPLIT) & (smax > prune_scale) & (op >= prune_op)
    assert rescued.sum() > 10, "test scene must have too-large parents whose split children survive"
    check_rows(*read_state(gpu, model), rows, moments, moments_sq, action, smax)
    # statistics are reset
    assert np.all(gpu.read(model.buf["vis_count"], np.float32, after) == 0)
    assert np.all(gpu.read(model.buf["grad2d_sum"], np.float32, after) == 0)


def distinct_gradients(rng, n, thr):
    """grad_sum, counts whose mean gradients are well separated (relative gaps >> float32
    ulp, so the GPU's and NumPy's float32 divisions order them alike), from thr/4 to 4 thr."""
    g = thr * 2.0 ** (rng.permutation(n) / n * 4 - 2)
    counts = rng.integers(1, 5, n).astype(np.float32)
    counts[rng.random(n) < 0.05] = 0  # never seen: g = 0
    return (g * np.maximum(counts, 1)).astype(np.float32), counts


@pytest.mark.parametrize("n,degree,cap_frac", [(3000, 1, 0.25), (1000, 3, 0.7)])
def test_densify_cap_grows_largest_gradients(gpu, n, degree, cap_frac, rng):
    """Growth that would pass max_gaussians grows only the largest mean gradients, as many as
    fit: count <= cap, more than no growth, exactly the NumPy prefix of the sorted candidates.
    (3000 rows fit the capacity; 1000 rows grow past it, through the reallocation path.)"""
    _, rows = random_scene(rng, n, degree=degree, max_degree=degree, scale=(-4.0, -1.0), opacity=(-6.0, 3.0))
    thr = 2e-4
    rule = (0.1, 0.005, 0.3)
    grad_sum, counts = distinct_gradients(rng, n, thr)
    moments = rng.normal(0, 1, rows.shape).astype(np.float32)
    moments_sq = rng.uniform(0, 1, rows.shape).astype(np.float32)
    full = copies_of(reference_actions(rows, grad_sum, counts, thr, *rule)).sum()
    skip = copies_of(reference_actions(rows, grad_sum, counts, None, *rule)).sum()
    assert full - skip > 200
    cap = int(skip + cap_frac * (full - skip)) + int(rng.integers(0, 7))
    if n == 3000:
        cap = min(cap, n)  # stays within the model's capacity
    want, order, extra, k = capped_reference(rows, grad_sum, counts, thr, rule, cap)

    model = load_model(gpu, rows, degree, grad_sum, counts, moments, moments_sq)
    cap0 = model.capacity
    before, after = model.densify(thr, *rule, max_gaussians=cap, seed=int(rng.integers(1 << 31)))
    assert (after > cap0) == (n == 1000), "the cases must cover both write paths"
    assert model.capacity == max(cap0, cap)  # a reallocation holds no rows the cap forbids
    assert before == n
    assert skip < after <= cap
    assert after == copies_of(want).sum()
    # as close to the cap as the sorted candidates allow: the next one that adds rows does not fit
    nxt = extra[k:][extra[k:] > 0]
    assert len(nxt) and after + nxt[0] > cap
    # the ones that grew have larger gradients than every candidate that did not
    g = mean_grad(grad_sum, counts)
    t = model.last_grow_threshold
    grown, held = order[:k][extra[:k] > 0], order[k:][extra[k:] > 0]  # (those pruned anyway do not count)
    # t is the held candidate's g as the GPU divides it (within an ulp or two of NumPy's)
    assert g[grown].min() > t >= g[held].max() * (1 - 1e-6) and g[held].max() > thr, (t, g[held].max(), g[grown].min(), thr)
    assert model.last_decide_passes <= 6  # full decide, <= 4 histogram passes, final decide
    if after <= cap0:  # in place: the decision buffer is still there
        np.testing.assert_array_equal(gpu.read(model.buf["action"], np.uint32, n), want)
    check_rows(*read_state(gpu, model), rows, moments, moments_sq, want, smax_of(rows))


def test_densify_cap_below_pruned_count_grows_nothing(gpu, rng):
    n = 2000
    _, rows = random_scene(rng, n, degree=0, max_degree=0, scale=(-4.0, -1.0), opacity=(-6.0, 3.0))
    grad_sum, counts = distinct_gradients(rng, n, 2e-4)
    rule = (0.1, 0.005, 0.3)
    kept = reference_actions(rows, grad_sum, counts, None, *rule)
    z = np.zeros(rows.shape, np.float32)
    for cap in (copies_of(kept).sum(), copies_of(kept).sum() - 5):
        model = load_model(gpu, rows, 0, grad_sum, counts, z, z)
        _, after = model.densify(2e-4, *rule, max_gaussians=cap, seed=3)
        assert after == copies_of(kept).sum() and model.last_grow_threshold == np.inf
        np.testing.assert_array_equal(model.rows(), rows[kept > 0])


@contextmanager
def fresh_pool(gpu):
    """Account this block's buffers in a pool of their own (high-water from zero)."""
    old, gpu.pool = gpu.pool, VramPool()
    try:
        yield gpu.pool
    finally:
        gpu.pool = old


def held(cap, D, MW):
    """Bytes the model's per-Gaussian buffers take at capacity ``cap`` (each rounded to 16):
    params [cap, D], two moments [cap, MW] words, four [cap] statistics / scratch."""
    r16 = lambda b: (b + 15) // 16 * 16
    return r16(4 * D * cap) + 2 * r16(4 * MW * cap) + 4 * r16(4 * cap)


def big_buffers(pool, nbytes):
    return sorted(name for name, cat, size in pool.live() if cat == SPLAT and size >= nbytes)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("n,grow_past_capacity", [(3000, False), (1000, True)])
def test_densify_holds_no_spare_state(gpu, n, grow_past_capacity, bf16, rng):
    """The model holds params [capacity, D] and two moment buffers [capacity, MW] and
    nothing else of that size (no gradient buffer), before and after densify; densify's
    only transient is one [N, 16] temporary (within capacity) or one old state buffer
    beside the new state (beyond it: the buffers are replaced one at a time)."""
    D = row_stride(3)
    MW = (D + 1) // 2 if bf16 else D
    r16 = lambda b: (b + 15) // 16 * 16
    _, rows = random_scene(rng, n, degree=3, scale=(-4.0, -1.0), opacity=(-6.0, 3.0))
    grad_sum, counts = distinct_gradients(rng, n, 2e-4)
    z = np.zeros(rows.shape, np.float32)
    with fresh_pool(gpu) as pool:
        model = load_model(gpu, rows, 3, grad_sum, counts, z, z, moments_bf16=bf16)
        cap0 = model.capacity
        state = ["splat.exp_avg", "splat.exp_avg_sq", "splat.params"]
        assert big_buffers(pool, 4 * MW * cap0) == state
        start = pool.current[SPLAT]
        assert model.state_bytes() == held(cap0, D, MW)
        limit = 10**7 if grow_past_capacity else cap0
        gpu.write(model.buf["grad2d_sum"], grad_sum[:model.n])
        gpu.write(model.buf["vis_count"], counts[:model.n])
        n_before = model.n
        _, after = model.densify(2e-4, 0.1, 0.005, 0.3, max_gaussians=limit, seed=1)
        cap = model.capacity
        assert (cap > cap0) == grow_past_capacity
        assert big_buffers(pool, 4 * MW * min(cap, cap0)) == state
        assert model.state_bytes() == held(cap, D, MW)
        assert pool.current[SPLAT] == start + held(cap, D, MW) - held(cap0, D, MW)
        if grow_past_capacity:  # replaced one at a time: the new state + one old buffer at most
            assert pool.high[SPLAT] <= pool.current[SPLAT] + r16(4 * D * cap0)
        else:  # the one temporary: 16 columns
            assert pool.high[SPLAT] == start + r16(4 * 16 * n_before)
        del model


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32-moments", "bf16-moments"])
@pytest.mark.parametrize("grow", [False, True], ids=["mostly-prune", "mostly-grow"])
def test_densify_in_place_matches_reference(gpu, bf16, grow, rng):
    """Within capacity densify scatters each buffer in place, a slice of columns at a time
    (later slices must still read their original columns, whether a row moves down by
    pruning or up by growth): the result must equal the NumPy reference."""
    n = 3000
    _, rows = random_scene(rng, n, degree=3, scale=(-4.0, -1.0), opacity=(-6.0, 3.0))
    grad_sum = rng.uniform(1e-4 if grow else 0.0, 8e-4 if grow else 2.4e-4, n).astype(np.float32)
    counts = rng.integers(1, 4, n).astype(np.float32)
    moments = rng.normal(0, 1, rows.shape).astype(np.float32)
    moments_sq = rng.uniform(0, 1, rows.shape).astype(np.float32)
    spare = np.concatenate([rows, rows, rows])  # capacity 3 n: every outcome fits in place
    model = GaussianModel(gpu, spare, 3, moments_bf16=bf16)
    cap = model.capacity
    model.load_state_dict(dict(params=rows, exp_avg=moments, exp_avg_sq=moments_sq, adam_step=0,
                               grad2d_sum=grad_sum, vis_count=counts))
    if bf16:
        moments, moments_sq = bf16_rounded(moments), bf16_rounded(moments_sq)
    rule = (2e-4, 0.1, 0.005, 0.3)
    before, after = model.densify(*rule, max_gaussians=10**7, seed=9)
    assert model.capacity == cap, "must stay on the in-place path"
    action = reference_actions(rows, grad_sum, counts, *rule)
    assert after == copies_of(action).sum()
    assert (after > 1.3 * n) if grow else (after < 0.9 * n), (n, after)  # the case this run covers
    check_rows(*read_state(gpu, model), rows, moments, moments_sq, action, smax_of(rows))


def test_adc_strategy_hooks_follow_the_config_schedule():
    """spirula/engine/splat/adc.py on a fake model: when it densifies, with which prune scale, when
    the opacities are reset, and that the statistic stops with the densification."""
    from types import SimpleNamespace

    from spirula.engine.config import TrainConfig
    from spirula.engine.splat.adc import NO_SCALE_PRUNE, AdcDensifier

    calls = []
    model = SimpleNamespace(densify=lambda *a, **k: calls.append(("densify", a, k)) or (10, 12),
                            reset_opacity=lambda o: calls.append(("reset", o)))
    cfg = TrainConfig(densify_from=500, densify_until=15_000, densify_interval=100, grad_threshold=2e-4,
                      clone_scale=0.01, prune_opacity=0.005, prune_scale=0.1, opacity_reset_interval=3000,
                      max_gaussians=1000)
    adc = AdcDensifier(model, cfg, extent=2.0)
    assert [d for d in range(1, 20_001) if adc.refine_due(d)] == list(range(600, 15_000, 100))
    assert adc.accumulates_stats(14_999) and not adc.accumulates_stats(15_000) and adc.regularisers() == {}
    assert adc.refine(7, 600) == (10, 12)
    assert calls[-1] == ("densify", (2e-4, 0.02, 0.005, NO_SCALE_PRUNE, 1000), {"seed": 7})
    adc.refine(8, 3100)
    assert calls[-1][1][3] == pytest.approx(0.2)
    calls.clear()
    for d in range(1, 20_001):
        adc.after_step(d)
    assert calls == [("reset", 0.01)] * 4  # 3000, 6000, 9000, 12000 (not 15000: densify_until)
    cfg.densify_until = 0  # read live: a change between steps counts
    assert not adc.refine_due(600) and not adc.accumulates_stats(0)
