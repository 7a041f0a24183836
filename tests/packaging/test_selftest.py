"""`spirula --selftest` (spirula/engine/jobs/selftest.py) on a tiny schedule: PASS with every check on the
embedded sample, and FAIL with the failing check's reason when the device, the sample or the
training is broken."""

import os

import pytest

from spirula.engine.cli import main as cli
from spirula.engine.jobs import selftest
from spirula.engine.errors import DeviceError

BACKEND = os.environ.get("SPIRULA_TEST_DEVICE", "vulkan")


def test_selftest_passes_on_the_embedded_sample(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("SPIRULA_DEVICE", BACKEND)
    monkeypatch.setenv("SPIRULA_SELFTEST_STEPS", "10")
    monkeypatch.setattr(selftest.tempfile, "tempdir", str(tmp_path))
    assert cli.main(["--selftest"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("PASS")
    for check in ("device", "modules", "sample", "train", "render", "export"):
        assert f"[ok] {check}" in out, out
    assert "adapter" in out and "backend" in out and "features" in out
    assert not list(tmp_path.iterdir()), "the temporary folder must be removed"


def test_result_reports_device_training_and_export(tmp_path):
    lines = []
    r = selftest.run_selftest(backend=BACKEND, steps=10, workdir=tmp_path, keep=True, out=lines.append)
    assert r.passed and r.reason == "" and r.verdict == "PASS", lines
    assert [c.name for c in r.checks] == ["device", "modules", "sample", "train", "render", "export"]
    dev = r.report["device"]
    assert dev["adapter"] and dev["api"] and dev["backend"] == BACKEND and dev["features"]
    assert r.report["train"]["step"] == 10 and r.report["train"]["num_gaussians"] > 0
    kept = next(tmp_path.iterdir())
    assert (kept / "project" / "splat.ply").is_file() and list((kept / "project" / "eval").glob("*.render.png"))


def test_no_device_fails_with_the_reason(monkeypatch, capsys):
    import spirula.engine.device

    def no_device(backend=None):
        raise DeviceError("No GPU device: tried to create a slangpy vulkan device and got: boom. Fix: install a driver.")

    monkeypatch.setattr(spirula.engine.device, "get_gpu", no_device)
    r = selftest.run_selftest(backend=BACKEND, steps=5, out=lambda s: None)
    assert not r.passed and r.reason.startswith("device: No GPU device") and "Fix:" in r.reason
    assert r.verdict.startswith("FAIL: device:") and len(r.checks) == 1
    assert selftest.main(backend=BACKEND, steps=5) == 1
    assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith("FAIL: device: No GPU device")


def test_missing_sample_fails_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("SPIRULA_SAMPLE", str(tmp_path / "nowhere"))
    r = selftest.run_selftest(backend=BACKEND, steps=5, out=lambda s: None)
    assert not r.passed and r.reason.startswith("sample: the embedded sample is missing")
    assert str(tmp_path / "nowhere") in r.reason


def test_training_that_does_not_learn_fails(monkeypatch):
    def demanding(software, steps=None):
        s = selftest.SelftestSettings(steps=5)
        s.min_psnr_gain_db = 50.0
        return s

    monkeypatch.setattr(selftest, "settings_for", demanding)
    r = selftest.run_selftest(backend=BACKEND, out=lambda s: None)
    assert not r.passed and r.reason.startswith("train: training did not learn"), r.reason


def test_schedule_follows_the_device():
    soft, gpu = selftest.settings_for(True), selftest.settings_for(False)
    assert 200 <= soft.steps <= 500 and soft.max_size <= 160      # minutes at most on lavapipe
    assert gpu.max_size > soft.max_size and gpu.init_points > soft.init_points
    tiny = selftest.settings_for(True, steps=10)
    assert tiny.steps == 10 and tiny.min_psnr_gain_db == 0.0


def test_sample_is_found_in_the_checkout_and_the_bundle(monkeypatch, tmp_path):
    monkeypatch.delenv("SPIRULA_SAMPLE", raising=False)
    assert (selftest.sample_dir() / "transforms.json").is_file()
    assert (selftest.sample_dir() / "LICENSE.txt").is_file()
    monkeypatch.setattr(selftest.sys, "_MEIPASS", str(tmp_path), raising=False)
    bundled = tmp_path / "resources" / "sample" / "fox"   # a frozen bundle's copy of the sample
    bundled.mkdir(parents=True)
    (bundled / "transforms.json").write_text("{}")
    assert selftest.sample_dir() == bundled
