"""Round trips ours -> file -> ours for every splat format on fresh random Gaussians, SH
degrees 0-3, each held to the tolerance its spec's quantisation allows (the steps are
derived here from the spec text in each module's docstring, not read from the code)."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.io import formats
from tests.io.splat_cases import M_FOR_DEGREE, match, random_gaussians, rgb, rotation_error, sigmoid

N = 1500
EPS = 1e-5


def roundtrip(tmp_path, fmt, g, **kw):
    path = tmp_path / f"scene{formats.EXTENSIONS[fmt]}"
    size = formats.write_any(path, g, fmt, **kw)
    assert size == path.stat().st_size
    assert formats.detect(path) == fmt
    back = formats.read_any(path, warn=False)
    return back, size


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@pytest.mark.parametrize("version", [2, 3, 4])
def test_spz(tmp_path, degree, version):
    g = random_gaussians(np.random.default_rng(10 * degree + version), N, degree)
    h, _ = roundtrip(tmp_path, "spz", g, spz_version=version)
    assert len(h) == N and h.sh_degree == degree                     # SPZ keeps the order
    assert np.abs(h.means - g.means).max() <= 0.5 / 4096 + EPS       # 12 fractional bits
    assert np.abs(rgb(h.sh0) - rgb(g.sh0)).max() <= 1 / 255          # step SH_C0 / (0.15 * 255) < 1/255
    assert np.abs(sigmoid(h.opacities) - sigmoid(g.opacities)).max() <= 0.5 / 255 + EPS
    assert np.abs(h.scales - g.scales).max() <= 0.5 / 16 + EPS
    rot = rotation_error(g.quats, h.quats)
    if version >= 3:   # 9-bit magnitudes of components <= 1/sqrt(2): |dq| <= 0.5 / 511 / sqrt(2)
        assert rot.max() < 0.01
    else:              # x, y, z in 8 bits, w derived: poor only where w is near 0
        assert np.median(rot) < 0.02 and np.percentile(rot, 90) < 0.06
    if degree:
        err = np.abs(h.shN - g.shN)
        assert err[:, :3].max() <= 4.5 / 128 + EPS                   # 5 bits: multiples of 8/128
        assert err.max() <= 8.5 / 128 + EPS                          # 4 bits: multiples of 16/128


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_compressed_ply(tmp_path, degree):
    g = random_gaussians(np.random.default_rng(degree), N, degree)
    h, size = roundtrip(tmp_path, "compressed-ply", g)
    j = match(g, h)
    g = g.subset(j)
    ext = np.ptp(g.means, axis=0)            # any chunk's bounds lie within the whole extent
    assert np.all(np.abs(h.means - g.means) <= ext / np.array([2047, 1023, 2047]) / 2 + EPS)
    assert np.all(np.abs(h.scales - g.scales) <= np.ptp(g.scales, axis=0) / np.array([2047, 1023, 2047]) / 2 + EPS)
    assert np.abs(rgb(h.sh0) - rgb(g.sh0)).max() <= 1 / 255
    assert np.abs(sigmoid(h.opacities) - sigmoid(g.opacities)).max() <= 0.5 / 255 + EPS
    assert rotation_error(g.quats, h.quats).max() < 0.005
    if degree:
        assert np.abs(h.shN - g.shN).max() <= 0.5 * 8 / 256 + EPS
    m = M_FOR_DEGREE[degree]
    assert size > N * (16 + 3 * m) and size < N * (16 + 3 * m) + (N // 256 + 1) * 72 + 2048


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_splat(tmp_path, degree):
    g = random_gaussians(np.random.default_rng(degree), N, degree)
    h, size = roundtrip(tmp_path, "splat", g)
    assert size == 32 * N and len(h) == N and h.sh_degree == 0
    assert np.array_equal(h.means, g.means)
    assert np.allclose(h.scales, g.scales, rtol=0, atol=1e-5)
    assert np.abs(rgb(h.sh0) - rgb(g.sh0)).max() <= 0.5 / 255 + EPS
    assert np.abs(sigmoid(h.opacities) - sigmoid(g.opacities)).max() <= 0.5 / 255 + EPS
    assert rotation_error(g.quats, h.quats).max() < 0.03              # components to 1/256


def _clustered_sh(rng, n, degree, clusters=20, noise=0.01):
    """SH drawn around a few centres: a palette of >= ``clusters`` entries fits them."""
    m = M_FOR_DEGREE[degree]
    centres = rng.uniform(-0.8, 0.8, (clusters, m, 3))
    return (centres[rng.integers(0, clusters, n)] + rng.uniform(-noise, noise, (n, m, 3))).astype(np.float32)


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_sog(tmp_path, degree):
    rng = np.random.default_rng(degree)
    g = random_gaussians(rng, N, degree)
    g.shN = _clustered_sh(rng, N, degree)
    h, _ = roundtrip(tmp_path, "sog", g, sog_palette=64)
    assert h.sh_degree == degree
    g = g.subset(match(g, h))
    # positions: 16 bits of n = sign(x) ln(1 + |x|) over its range; dx = (1 + |x|) dn
    n = np.sign(g.means) * np.log1p(np.abs(g.means.astype(np.float64)))
    step = np.ptp(n, axis=0) / 65535
    assert np.all(np.abs(h.means - g.means) <= (1 + np.abs(g.means)) * step * 0.5 * 1.01 + EPS)
    # scales and colours: one 256-entry codebook each; on uniform data no worse than a uniform
    # 256-level quantiser's largest error (half a step), with room for k-means' unequal cells
    assert np.abs(h.scales - g.scales).max() <= 2 * np.ptp(g.scales) / 256
    assert np.abs(rgb(h.sh0) - rgb(g.sh0)).max() <= 1 / 255
    assert np.abs(sigmoid(h.opacities) - sigmoid(g.opacities)).max() <= 0.5 / 255 + EPS
    assert rotation_error(g.quats, h.quats).max() < 0.02               # components to sqrt(2) / 255
    if degree:   # 20 clusters of +-0.01 in a 64-entry palette, then a 256-entry codebook over +-0.81
        assert np.abs(h.shN - g.shN).max() <= 0.02 + 2 * 1.62 / 256


def test_sog_reads_a_folder_and_its_meta_json(tmp_path):
    import zipfile

    g = random_gaussians(np.random.default_rng(5), 300, 1)
    bundle = tmp_path / "a.sog"
    formats.write_any(bundle, g)
    folder = tmp_path / "unzipped"
    zipfile.ZipFile(bundle).extractall(folder)
    a, b, c = (formats.read_any(p, warn=False) for p in (bundle, folder, folder / "meta.json"))
    assert formats.detect(folder) == formats.detect(folder / "meta.json") == "sog"
    for x in (b, c):
        assert np.array_equal(a.means, x.means) and np.array_equal(a.shN, x.shN)


def test_a_big_scene_keeps_its_positions_in_spz(tmp_path):
    """Coordinates beyond 2^11 no longer fit 12 fractional bits in 24: fewer are used."""
    g = random_gaussians(np.random.default_rng(3), 200, 0, extent=30000.0)
    h, _ = roundtrip(tmp_path, "spz", g)
    assert np.abs(h.means - g.means).max() <= 0.5 / 2 ** 8 + 1e-3   # 15 integer bits leave 8


def test_estimated_sizes_are_exact_for_the_fixed_record_formats(tmp_path):
    for degree in (0, 3):
        g = random_gaussians(np.random.default_rng(degree), 700, degree)
        for fmt in ("ply", "compressed-ply", "splat"):
            path = tmp_path / f"s{formats.EXTENSIONS[fmt]}"
            formats.write_any(path, g, fmt)
            assert formats.estimated_bytes(fmt, 700, degree) == (path.stat().st_size, True), fmt
        for fmt in ("spz", "sog"):
            est, exact = formats.estimated_bytes(fmt, 700, degree)
            assert not exact and 10 * 700 < est < 40 * 700
