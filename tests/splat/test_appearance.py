"""Per-image appearance (spirula/engine/splat/appearance.py, shaders/appearance/appearance.slang)
against an independent float64 NumPy reference.

Reference: the affine transform out = (I + D[:, :3]) x + D[:, 3] written with einsum; the
bilateral grid sliced with scipy.ndimage.map_coordinates (order 1 = trilinear) over each of
the 12 matrix entries at (gz, gy, gx) = (luma (GZ - 1), (y + 0.5) / H (GY - 1),
(x + 0.5) / W (GX - 1)), luma = BT.601 weights, clamped to [0, 1]. Backward passes are
compared with central finite differences of that reference (float64) of the linear
functional L = sum(g_out * out) for a random g_out, on random inputs: to the render
(h = 1e-6; through the colour and, for the grid, the luma guide; pixels whose luma lies
within 1e-4 of a cell boundary, where the derivative is one-sided, are left out) and to
the parameters (affine: all 12; grid: a scatter-with-trilinear-weights reference on all
entries, itself checked by differences on every entry of 40 touched cells and 200 random
entries). The Adam step (+ the L2 pull, the offsets' own weight, + the grid's total
variation; the affine's restricted forms: frozen entries, one tied gain) against a NumPy
step whose TV gradient is itself checked by finite differences; an overflowed step changes
nothing.

Tolerances (float32 GPU vs float64): forward 1e-5 absolute (values ~1); gradients 2e-4 of
the largest entry + 2e-4 relative (per-pixel sums of 12 terms, float atomics in the
parameter sums); Adam 1e-5 relative + 1e-6 absolute.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.ndimage import map_coordinates

from spirula.engine.splat.appearance import BILAGRID_SHAPE, FORMS, Appearance, AppearanceSettings, read_appearance

LW = np.array([0.299, 0.587, 0.114])


# ---- float64 reference ----------------------------------------------------------------

def ref_affine(x, d):
    """x [H, W, 3], d [3, 4] deviation -> out [H, W, 3]."""
    a = np.eye(3) + d[:, :3]
    return np.einsum("rk,hwk->hwr", a, x) + d[:, 3]


def ref_grid_matrices(x, grid):
    """x [H, W, 3], grid [GZ, GY, GX, 3, 4] deviation -> per-pixel deviation [H, W, 3, 4]."""
    h, w, _ = x.shape
    gz, gy, gx = grid.shape[:3]
    yy, xx = np.meshgrid((np.arange(h) + 0.5) / h, (np.arange(w) + 0.5) / w, indexing="ij")
    luma = np.clip(x @ LW, 0.0, 1.0)
    coords = np.stack([luma * (gz - 1), yy * (gy - 1), xx * (gx - 1)]).reshape(3, -1)
    flat = grid.reshape(gz, gy, gx, 12)
    m = np.stack([map_coordinates(flat[..., k], coords, order=1, mode="nearest") for k in range(12)], -1)
    return m.reshape(h, w, 3, 4)


def ref_grid(x, grid):
    d = ref_grid_matrices(x, grid)
    return x + np.einsum("hwrk,hwk->hwr", d[..., :3], x) + d[..., 3]


def fd_grad(f, v, h=1e-6):
    """Central differences of the scalar f at every entry of v (float64)."""
    g = np.zeros_like(v)
    flat, gf = v.reshape(-1), g.reshape(-1)
    for j in range(flat.size):
        old = flat[j]
        flat[j] = old + h
        fp = f()
        flat[j] = old - h
        fm = f()
        flat[j] = old
        gf[j] = (fp - fm) / (2 * h)
    return g


def ref_tv(grid):
    """Total variation of one grid [GZ, GY, GX, 12] as documented in appearance.slang."""
    tv = 0.0
    for ax in range(3):
        n = grid.shape[ax]
        if n < 2:
            continue
        diff = np.diff(grid, axis=ax)
        tv += (diff ** 2).sum() / diff.size
    return tv


def ref_adam(p, m, v, g, lr, t, b1=0.9, b2=0.999, eps=1e-15):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps), m, v


# ---- helpers ---------------------------------------------------------------------------

def make(gpu, mode, num_images, rng, scale, form="affine"):
    app = Appearance(gpu, mode, num_images, AppearanceSettings(lr=1e-2, reg=0.3, tv_weight=7.0, form=form,
                                                               reg_bias=3.0))
    params = (rng.normal(size=(num_images, app.per_image)) * scale).astype(np.float32)
    gpu.write(app.buf["params"], params)
    return app, params.astype(np.float64)


def run_forward(gpu, app, x, index):
    h, w, _ = x.shape
    img = gpu.upload(x.astype(np.float32))
    enc = gpu.encoder()
    out = app.record_forward(enc, img, index, w, h)
    gpu.submit(enc)
    return gpu.read(out, np.float32, shape=(h, w, 3)).astype(np.float64)


def run_backward_only(gpu, app, x, g, index):
    """The backward kernel alone: (dL/dx [H, W, 3], dL/dD [cells * 12])."""
    h, w, _ = x.shape
    img, grad = gpu.upload(x.astype(np.float32)), gpu.upload(g.astype(np.float32))
    enc = gpu.encoder()
    app.k_bwd.record(enc, app._tiles(w, h), render=img, params=app.buf["params"], grad=grad,
                     accum=app.buf["accum"], image_index=index, width=w, height=h)
    gpu.submit(enc)
    gx = gpu.read(grad, np.float32, shape=(h, w, 3)).astype(np.float64)
    gd = gpu.read(app.buf["accum"], np.float32, app.per_image).astype(np.float64)
    gpu.write(app.buf["accum"], np.zeros(app.per_image, np.float32))
    return gx, gd


def random_image(rng, h, w, lo=0.02, hi=0.98):
    return rng.uniform(lo, hi, size=(h, w, 3))


# ---- tests -----------------------------------------------------------------------------

@pytest.mark.parametrize("w,h", [(37, 29), (16, 16), (70, 45)])
def test_affine_forward_matches_numpy(gpu, w, h, rng):
    app, params = make(gpu, "affine", 5, rng, 0.2)
    x = random_image(rng, h, w)
    i = int(rng.integers(5))
    got = run_forward(gpu, app, x, i)
    want = ref_affine(x, params[i].reshape(3, 4))
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_affine_backward_matches_finite_differences(gpu, rng):
    w, h = 21, 19  # two workgroups wide and tall, partly outside the image
    app, params = make(gpu, "affine", 3, rng, 0.2)
    i = int(rng.integers(3))
    x, g = random_image(rng, h, w), rng.normal(size=(h, w, 3))
    gx, gd = run_backward_only(gpu, app, x, g, i)
    d = params[i].reshape(3, 4).copy()
    fx = fd_grad(lambda: float((g * ref_affine(x, d)).sum()), x)
    fd = fd_grad(lambda: float((g * ref_affine(x, d)).sum()), d).reshape(-1)
    close(gx, fx)
    close(gd, fd)


def close(got, want, rel=2e-4):
    np.testing.assert_allclose(got, want, atol=rel * np.abs(want).max(), rtol=rel)


@pytest.mark.parametrize("w,h", [(40, 33), (128, 72)])
def test_bilagrid_slice_matches_numpy_trilinear(gpu, w, h, rng):
    app, params = make(gpu, "bilagrid", 2, rng, 0.1)
    gx, gy, gz = BILAGRID_SHAPE
    x = random_image(rng, h, w, -0.1, 1.1)  # also where the luma guide clamps
    i = int(rng.integers(2))
    got = run_forward(gpu, app, x, i)
    want = ref_grid(x, params[i].reshape(gz, gy, gx, 3, 4))
    np.testing.assert_allclose(got, want, atol=1e-5)


def ref_grid_param_grad(x, g, shape):
    """dL/dD of L = sum(g * out) by scattering each pixel's g_r xe_k with its 8 trilinear
    weights (float64; itself checked against finite differences below)."""
    gx, gy, gz = shape
    h, w, _ = x.shape
    yy, xx = np.meshgrid((np.arange(h) + 0.5) / h, (np.arange(w) + 0.5) / w, indexing="ij")
    pos = [xx.ravel() * (gx - 1), yy.ravel() * (gy - 1), np.clip(x @ LW, 0, 1).ravel() * (gz - 1)]
    lo = [np.clip(np.floor(p), 0, n - 2).astype(int) for p, n in zip(pos, shape)]
    fr = [p - i for p, i in zip(pos, lo)]
    outer = (g.reshape(-1, 3, 1) * np.concatenate([x, np.ones((h, w, 1))], -1).reshape(-1, 1, 4)).reshape(-1, 12)
    out = np.zeros((gz, gy, gx, 12))
    for c in range(8):
        bits = [(c >> a) & 1 for a in range(3)]
        wgt = np.prod([f if b else 1 - f for f, b in zip(fr, bits)], axis=0)
        np.add.at(out, (lo[2] + bits[2], lo[1] + bits[1], lo[0] + bits[0]), wgt[:, None] * outer)
    return out.reshape(-1)


def test_bilagrid_backward_matches_finite_differences(gpu, rng):
    w, h = 23, 18
    app, params = make(gpu, "bilagrid", 2, rng, 0.1)
    gx_, gy_, gz_ = BILAGRID_SHAPE
    i = int(rng.integers(2))
    x, g = random_image(rng, h, w), rng.normal(size=(h, w, 3))
    gx, gd = run_backward_only(gpu, app, x, g, i)
    grid = params[i].reshape(gz_, gy_, gx_, 3, 4).copy()
    fx = np.zeros_like(x)  # per pixel: the 3 entries of one pixel change that pixel only
    for c in range(3):
        step = np.zeros_like(x)
        step[..., c] = 1e-6
        fx[..., c] = ((g * ref_grid(x + step, grid)).sum(-1) - (g * ref_grid(x - step, grid)).sum(-1)) / 2e-6
    # a luma within h of a cell boundary has a one-sided derivative: leave such pixels out
    gz_pos = np.clip(x @ LW, 0, 1) * (gz_ - 1)
    smooth = np.abs(gz_pos - np.round(gz_pos)) > 1e-4
    assert smooth.mean() > 0.95
    close(gx[smooth], fx[smooth])
    # the guide matters: without its term the gradient would differ
    direct = g + np.einsum("hwrk,hwr->hwk", ref_grid_matrices(x, grid)[..., :3], g)
    assert np.abs(fx - direct)[smooth].max() > 1e-3
    # parameter gradient: the scatter reference everywhere, finite differences (the forward
    # is linear in D) on all entries of 40 touched cells and on 200 random entries
    want = ref_grid_param_grad(x, g, BILAGRID_SHAPE)
    close(gd, want)
    touched = np.flatnonzero(want.reshape(-1, 12).any(1))
    assert len(touched) > 100
    sample = np.r_[(rng.choice(touched, 40, replace=False)[:, None] * 12 + np.arange(12)).ravel(),
                   rng.integers(0, want.size, 200)]
    flat = grid.reshape(-1)
    for j in sample:
        old = flat[j]
        flat[j] = old + 1e-3
        fp = (g * ref_grid(x, grid)).sum()
        flat[j] = old - 1e-3
        fm = (g * ref_grid(x, grid)).sum()
        flat[j] = old
        assert abs((fp - fm) / 2e-3 - want[j]) <= 1e-9 * max(1.0, abs(want).max()), j


def test_tv_gradient_matches_finite_differences(rng):
    """The NumPy TV gradient the Adam test uses, checked against its own definition."""
    gx, gy, gz = 4, 3, 5
    grid = rng.normal(size=(gz, gy, gx, 12))
    want = fd_grad(lambda: ref_tv(grid), grid)
    np.testing.assert_allclose(ref_tv_grad(grid), want, atol=1e-7)


def ref_tv_grad(grid):
    g = np.zeros_like(grid)
    for ax in range(3):
        n = grid.shape[ax]
        if n < 2:
            continue
        diff = np.diff(grid, axis=ax)
        k = 2.0 / diff.size
        sl_hi = [slice(None)] * 4
        sl_lo = [slice(None)] * 4
        sl_hi[ax], sl_lo[ax] = slice(1, None), slice(None, -1)
        g[tuple(sl_hi)] += k * diff
        g[tuple(sl_lo)] -= k * diff
    return g


def restrict_gradient(gd, d, form, reg, reg_bias):
    """The Adam kernel's gradient of one affine image for ``form`` (FORMS): gd the photometric
    gradient [12] plus each entry's pull 2 reg_k d_k (offsets: reg * reg_bias); entries that
    do not train get None; a tied gain: every diagonal entry gets the diagonal's summed
    photometric gradient plus 3 times its pull."""
    mask, tie = FORMS[form]
    diag = [0, 5, 10]
    out = []
    for k in range(gd.size):
        r = reg * (reg_bias if k % 4 == 3 else 1.0)
        if not (mask >> (k % 12)) & 1:
            out.append(None)
        elif tie and k % 12 in diag:
            out.append(sum(gd[k - k % 12 + j] for j in diag) + 6 * r * d[k])
        else:
            out.append(gd[k] + 2 * r * d[k])
    return out


@pytest.mark.parametrize("mode,form", [("affine", "affine"), ("bilagrid", "affine"), ("affine", "gains"),
                                       ("affine", "gains_bias"), ("affine", "gain")])
def test_step_matches_numpy_adam_with_regulariser(gpu, mode, form, rng):
    """record_backward: backward + (TV) + Adam of one image; twice, so the moments carry.
    The affine's restricted forms: entries outside the form keep their (random) values, a
    tied gain's three diagonal entries (equal at the start) stay equal; the lr decayed
    exponentially from start to end."""
    n_img, w, h = 4, 29, 21
    app, params = make(gpu, mode, n_img, rng, 0.1, form=form)
    if FORMS[form][1]:
        params[:, [5, 10]] = params[:, [0]]
        gpu.write(app.buf["params"], params.astype(np.float32))
    s = app.settings
    s.start, s.end, s.lr_final = 2, 12, 2e-3  # step 7: half-way down the decay
    lr = s.lr * (s.lr_final / s.lr) ** 0.5
    gx_, gy_, gz_ = app.shape
    m = np.zeros_like(params)
    v = np.zeros_like(params)
    flags = gpu.zeros(16, "test.flags")
    total = gpu.upload(np.array([5, 0, 0, 0], np.uint32))
    i = int(rng.integers(n_img))
    for t in (1, 2):
        x, g = random_image(rng, h, w), rng.normal(size=(h, w, 3)) * 1e-3
        # the photometric gradient from the backward kernel's own reference (checked above)
        d = params[i].copy()
        if mode == "affine":
            gd = fd_grad(lambda: float((g * ref_affine(x, d.reshape(3, 4))).sum()), d)
        else:
            gd = ref_grid_param_grad(x, g, app.shape)
            gd += s.tv_weight * ref_tv_grad(d.reshape(gz_, gy_, gx_, 12)).reshape(-1)
        for k, gk in enumerate(restrict_gradient(gd, d, form, s.reg, s.reg_bias)):
            if gk is not None:
                params[i, k], m[i, k], v[i, k] = ref_adam(params[i, k], m[i, k], v[i, k], gk, lr, t)
        img, grad = gpu.upload(x.astype(np.float32)), gpu.upload(g.astype(np.float32))
        enc = gpu.encoder()
        app.record_backward(enc, img, grad, i, w, h, flags, step=7, overflow_guard=(total, 10))
        gpu.submit(enc)
        got = gpu.read(app.buf["params"], np.float32, shape=params.shape)
        np.testing.assert_allclose(got, params, rtol=1e-5, atol=1e-6)
    if FORMS[form][1]:
        np.testing.assert_array_equal(got[i, [5, 10]], got[i, [0, 0]])
    assert app.steps.tolist() == [2 if j == i else 0 for j in range(n_img)]
    assert not gpu.read(app.buf["accum"], np.float32).any(), "the step clears the accumulated gradient"
    assert not gpu.read(flags, np.uint32).any()
    # an overflowed step changes nothing and still clears the gradient
    before = gpu.read(app.buf["params"], np.float32)
    enc = gpu.encoder()
    app.record_backward(enc, img, grad, i, w, h, flags, step=8, overflow_guard=(total, 4))
    gpu.submit(enc)
    np.testing.assert_array_equal(gpu.read(app.buf["params"], np.float32), before)
    assert not gpu.read(app.buf["accum"], np.float32).any()


def test_state_and_files_round_trip(gpu, tmp_path, rng):
    for mode in ("exposure", "affine", "bilagrid"):
        app, params = make(gpu, mode, 3, rng, 0.1)
        app.steps[:] = [4, 0, 2]
        state = app.state_dict()
        other = Appearance(gpu, mode, 3)
        assert other.load_state_dict(state)
        np.testing.assert_array_equal(other.state_dict()["params"], params.astype(np.float32))
        assert other.steps.tolist() == [4, 0, 2]
        assert not Appearance(gpu, mode, 4).load_state_dict(state), "another image count starts from identity"
        app.save(tmp_path / mode, ["a.jpg", "b.jpg", "c.jpg"], trained=[0, 2])
        back = read_appearance(tmp_path / mode)
        assert [e["trained"] for e in back["images"]] == [True, False, True]
        want = params.reshape(back["matrices"].shape)
        want[..., :3] += np.eye(3)
        np.testing.assert_allclose(back["matrices"], want, atol=1e-6)


def test_recentre_keeps_every_trained_view_and_moves_the_mean_into_the_colours(gpu, rng):
    """Appearance.recentre + GaussianModel.transform_colours: for every trained image i and
    any colour x of the model, T_i'(c'(x)) == T_i(c(x)) (affine: exactly), the new
    transforms' mean over the trained images is the identity, untrained images stay
    identity, and the SH colour map is checked against reference.sh_basis (float64)."""
    from spirula.engine.splat.param_layout import pack, unpack
    from spirula.engine.splat.model import GaussianModel
    from tests.splat.reference import sh_basis

    app, params = make(gpu, "affine", 4, rng, 0.2)
    params[1] = 0.0  # image 1 never trained: identity
    gpu.write(app.buf["params"], params.astype(np.float32))
    app.steps[:] = [3, 0, 5, 2]
    before = app.matrices()[:, 0, 0, 0]
    n, deg = 50, 3
    rows = pack(rng.normal(size=(n, 3)), rng.normal(-2, 0.3, (n, 3)), rng.normal(size=(n, 4)),
                rng.normal(size=n), rng.normal(0, 0.5, (n, 3)), rng.normal(0, 0.2, (n, 15, 3)), deg)
    model = GaussianModel(gpu, rows.astype(np.float32), deg)
    mean = app.recentre([0, 1, 2, 3])
    assert mean is not None
    model.transform_colours(mean)
    after = app.matrices()[:, 0, 0, 0]
    np.testing.assert_allclose(after[1], np.c_[np.eye(3), np.zeros(3)], atol=1e-6)
    trained = [0, 2, 3]
    want_mean = before[trained].mean(axis=0)
    np.testing.assert_allclose(mean, want_mean, atol=1e-6)
    np.testing.assert_allclose(after[trained].mean(axis=0), np.c_[np.eye(3), np.zeros(3)], atol=1e-5)
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    basis = sh_basis(dirs, deg)                                  # [n, 16]

    def colours(r):
        u = unpack(r.astype(np.float64), deg)
        coeffs = np.concatenate([u["sh0"][:, None], u["shN"]], 1)  # [n, 16, 3]
        return 0.5 + np.einsum("nk,nkc->nc", basis, coeffs)

    c0, c1 = colours(rows), colours(model.rows())
    for i in trained:
        t0 = c0 @ before[i][:, :3].T + before[i][:, 3]
        t1 = c1 @ after[i][:, :3].T + after[i][:, 3]
        np.testing.assert_allclose(t1, t0, atol=2e-5)
    np.testing.assert_allclose(c1, c0 @ want_mean[:, :3].T + want_mean[:, 3], atol=2e-5)
