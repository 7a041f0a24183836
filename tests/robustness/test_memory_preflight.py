"""Input class: too many or too large images for the machine. The memory preflight
(spirula/engine/preflight.py) refuses before a single image is decoded or the model allocated,
with "needs X, have Y" and the setting to lower; the limits are faked ($SPIRULA_RAM_LIMIT,
the device's ``vram_limit`` as $SPIRULA_VRAM_LIMIT sets it).

The dataset is a small COLMAP model written here (12 images of 160 x 120 px); the device
estimate is checked against what a real training run allocates on the device.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import spirula.engine.jobs.train as train_job
from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
from spirula.engine.preflight import MemoryPreflightError, check_device, check_host, estimate, preflight

from .fixtures import blob_image, colmap_text, save_png, write_files

W, H, N_IMAGES, N_POINTS = 160, 120, 12, 500


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("preflight") / "scene"
    rng = np.random.default_rng(0)
    images = []
    for i in range(N_IMAGES):
        a = 2 * np.pi * i / N_IMAGES
        c = np.array([4 * np.sin(a), 0.3, -4 * np.cos(a)])   # an orbit looking at the origin
        z = -c / np.linalg.norm(c)
        x = np.cross([0.0, 1.0, 0.0], z)
        x /= np.linalg.norm(x)
        r = np.stack([x, np.cross(z, x), z])
        w2c = np.eye(4)
        w2c[:3, :3], w2c[:3, 3] = r, -r @ c
        images.append((i + 1, w2c, 1, f"im{i:02d}.png", 0))
        save_png(root / "images" / f"im{i:02d}.png", blob_image(rng.uniform(10, 150, (5, 2)), W, H))
    pts = rng.normal(0, 0.5, (N_POINTS, 3))
    write_files(root / "sparse" / "0", colmap_text([(1, "PINHOLE", W, H, [150.0, 150.0, 80.0, 60.0])], images, pts,
                                                    rng.integers(0, 256, (N_POINTS, 3))))
    return root


def _cfg(max_size=64, **train) -> RunConfig:
    return RunConfig(dataset=DatasetConfig(max_size=max_size, eval_every=8), train=TrainConfig(steps=10, **train))


@pytest.fixture
def no_decoding(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("images were decoded before the preflight refused")
    monkeypatch.setattr(train_job, "load_dataset", refuse)


def test_device_short_is_refused_before_any_image_is_decoded(dataset, tmp_path, gpu, monkeypatch, no_decoding):
    monkeypatch.setattr(gpu, "vram_limit", 1 << 19)
    out = tmp_path / "out"
    with pytest.raises(MemoryPreflightError) as e:
        train_job.run_training(dataset, out, _cfg())
    text = str(e.value)
    # by hand: 10 training images (one in 8 held out) at 64 x 48 px as RGBA8, plus the
    # 500 SfM points as the initial Gaussians
    assert text.startswith(f"{dataset}: not enough device memory: needs at least ")
    assert "10 training images at up to 64 x 48 px as RGBA8" in text and "500 initial Gaussians x " in text
    assert "have 0.5 MiB ($SPIRULA_VRAM_LIMIT). Lower --max-size (now 64 px" in text
    assert "\n" not in text and not out.exists()


def test_host_short_is_refused_before_the_gpu_and_the_suggested_size_fits(dataset, tmp_path, monkeypatch,
                                                                          no_decoding):
    monkeypatch.setattr(train_job, "get_gpu", lambda *a: pytest.fail("the GPU was made before the host check"))
    need = estimate(dataset, _cfg(max_size=160)).host
    # decoded by hand: 12 images x 160 x 120 x 3 bytes, plus the loader's images in flight
    assert need >= N_IMAGES * W * H * 3
    monkeypatch.setenv("SPIRULA_RAM_LIMIT", str(need * 3 // 4))
    with pytest.raises(MemoryPreflightError) as e:
        train_job.run_training(dataset, tmp_path / "out", _cfg(max_size=160))
    text = str(e.value)
    assert text.startswith(f"{dataset}: not enough host memory: needs ")
    assert f"{N_IMAGES} images decoded at up to 160 x 120 px" in text and "($SPIRULA_RAM_LIMIT)" in text
    fit = int(text.split("; ")[-1].split(" would fit")[0])
    assert 10 <= fit < 160
    check_host(estimate(dataset, _cfg(max_size=fit)))   # the suggestion passes
    with pytest.raises(MemoryPreflightError):
        check_host(estimate(dataset, _cfg(max_size=fit + 20)))


def test_software_gpu_checks_host_and_device_together(dataset, monkeypatch):
    est = estimate(dataset, _cfg(max_size=160))
    soft = SimpleNamespace(vram_limit=None, software=True)
    monkeypatch.setenv("SPIRULA_RAM_LIMIT", str(est.host + est.device() // 2))
    check_host(est)   # the images alone fit
    with pytest.raises(MemoryPreflightError, match="the software GPU's training images"):
        preflight(dataset, _cfg(max_size=160), lambda: soft, print)


def test_mcmc_budget_is_refused_and_adc_cap_warned(dataset):
    est = estimate(dataset, _cfg(strategy="mcmc", mcmc_budget=400_000, max_gaussians=400_000))
    assert est.certain_gaussians == 400_000
    have = est.device_images + 100_000 * est.bytes_per_gaussian
    small = SimpleNamespace(vram_limit=have, software=False)
    with pytest.raises(MemoryPreflightError) as e:
        check_device(est, small, print)
    assert "the MCMC budget of 400,000 x" in str(e.value) and "--max-gaussians (100,000 would fit)" in str(e.value)
    adc = estimate(dataset, _cfg(max_gaussians=400_000))
    said = []
    small.vram_limit = adc.device_images + 100_000 * adc.bytes_per_gaussian
    check_device(adc, small, said.append)   # 500 initial Gaussians fit: only a warning for the cap
    assert len(said) == 1 and said[0].startswith("warning: at its cap of 400,000 Gaussians (--max-gaussians)")
    assert said[0].endswith("--max-gaussians 100,000 would fit")


def test_estimate_is_close_to_what_training_allocates(dataset, gpu):
    """The estimate (without tile intersections) against the pool's high water of a real
    run with the model at a fixed size (no densification) on the software GPU."""
    from spirula.engine.ingest import load_dataset
    from spirula.engine.splat.trainer import Trainer

    n = 30_000
    cfg = _cfg(max_size=128, init_random_points=n, densify_from=10_000, sh_degree=2)
    ds = load_dataset(dataset, 128)
    ds.points = ds.colors = None                    # start from n random points
    est = estimate(dataset, cfg)
    est.certain_gaussians = n
    gpu.pool.collect()
    before = gpu.pool.total
    gpu.pool.total_high = before
    tr = Trainer(gpu, ds, *ds.split(8)[:1], cfg.train)
    for s in range(6):
        tr.train_step(s)
        tr.state.step += 1
    gpu.wait_idle()
    used = gpu.pool.total_high - before
    tr.release()
    ratio = est.device() / used
    assert 0.6 < ratio < 1.3, f"estimate {est.device() / 2**20:.1f} MiB, allocated {used / 2**20:.1f} MiB"


def test_spirula_train_says_it_in_one_line(dataset, tmp_path, monkeypatch, capsys):
    from spirula.engine.cli.main import main

    monkeypatch.setenv("SPIRULA_RAM_LIMIT", "64K")
    assert main(["train", str(dataset), "-o", str(tmp_path / "out"), "--max-size", "64"]) == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith(f"error: {dataset}: not enough host memory: needs ")
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def _splats(n: int, seed: int = 0):
    from spirula.engine.io.ply import GaussianPly

    rng = np.random.default_rng(seed)
    return GaussianPly(means=rng.normal(size=(n, 3)).astype(np.float32),
                       scales=rng.normal(-3, 0.2, (n, 3)).astype(np.float32),
                       quats=rng.normal(size=(n, 4)).astype(np.float32),
                       opacities=rng.normal(size=n).astype(np.float32),
                       sh0=rng.normal(size=(n, 3)).astype(np.float32),
                       shN=rng.normal(0, 0.1, (n, 3, 3)).astype(np.float32))


def test_init_splat_count_reads_every_formats_header(tmp_path):
    from spirula.engine.io.formats import write_any
    from spirula.engine.preflight import init_splat_count

    g = _splats(300)
    for name, kw in (("a.ply", {}), ("a.compressed.ply", {}), ("a.spz", {}), ("v2.spz", {"spz_version": 2}),
                     ("a.sog", {}), ("a.splat", {})):
        write_any(tmp_path / name, g, **kw)
        assert init_splat_count(tmp_path / name) == 300, name
    (tmp_path / "bad.spz").write_bytes(b"\x1f\x8b garbage")
    assert init_splat_count(tmp_path / "bad.spz") is None  # the training's reader says what is wrong


def test_a_large_init_model_is_refused_before_training(dataset, tmp_path, monkeypatch, no_decoding):
    """Issue 49: an 8.7M-splat --init under an 8 GB limit trained on (the SfM points were
    counted) and peaked at 11.6 GB. Now its splats are what the preflight counts: on the
    device, and on the host while the file is read (3 copies of the packed rows)."""
    n = 8_700_000
    init = tmp_path / "big.ply"  # the header is all the preflight reads
    init.write_bytes(("ply\nformat binary_little_endian 1.0\nelement vertex %d\n" % n
                      + "".join(f"property float {p}\n" for p in
                                ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1",
                                 "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])
                      + "end_header\n").encode())
    cfg = _cfg(init_file=str(init))
    est = estimate(dataset, cfg)
    assert est.certain_gaussians == n and est.init_gaussians == n
    d = 11 + 3 * 16  # SH degree 3
    assert est.host_init == n * 3 * 4 * d
    monkeypatch.setenv("SPIRULA_RAM_LIMIT", "8G")
    soft = SimpleNamespace(vram_limit=None, software=True)  # lavapipe: device buffers are host memory
    monkeypatch.setattr(train_job, "get_gpu", lambda *a: soft)
    with pytest.raises(MemoryPreflightError) as e:
        train_job.run_training(dataset, tmp_path / "out", cfg)
    text = str(e.value)
    assert "8,700,000 Gaussians x " in text and f"reading the 8,700,000 splats of --init {init}" in text, text
    assert "smaller --init model" in text and "\n" not in text
    monkeypatch.delenv("SPIRULA_RAM_LIMIT")
    small = SimpleNamespace(vram_limit=est.device() - 1, software=False)
    with pytest.raises(MemoryPreflightError, match=f"8,700,000 Gaussians \\(the splats of --init {init}\\)"):
        check_device(est, small, print)
    mcmc = estimate(dataset, _cfg(init_file=str(init), strategy="mcmc", mcmc_budget=1_000_000))
    assert mcmc.certain_gaussians == n  # MCMC never removes: the budget below the start does not cap it
