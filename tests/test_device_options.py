"""The device's host-side options (spirula/engine/device.py): slang-rhi's validation layer and the
persistent shader cache, both chosen by environment variables."""

from __future__ import annotations

import os

import numpy as np
import pytest

from spirula.engine import device as D

BACKEND = os.environ.get("SPIRULA_TEST_DEVICE", "vulkan")


@pytest.mark.parametrize("value,on", [(None, False), ("", False), ("0", False), ("1", True), ("on", True)])
def test_validation_layer_is_off_unless_asked_for(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv("SPIRULA_RHI_VALIDATION", raising=False)
    else:
        monkeypatch.setenv("SPIRULA_RHI_VALIDATION", value)
    assert D._rhi_validation() is on


def test_shader_cache_is_opt_in_and_per_backend(monkeypatch, tmp_path):
    monkeypatch.delenv("SPIRULA_SHADER_CACHE", raising=False)
    assert D._shader_cache("vulkan") is None
    monkeypatch.setenv("SPIRULA_SHADER_CACHE", "off")
    assert D._shader_cache("vulkan") is None
    monkeypatch.setenv("SPIRULA_SHADER_CACHE", str(tmp_path / "sc"))
    assert D._shader_cache("cuda") == str(tmp_path / "sc" / "cuda") and (tmp_path / "sc" / "cuda").is_dir()
    monkeypatch.setenv("SPIRULA_SHADER_CACHE", "default")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert D._shader_cache("vulkan") == str(tmp_path / "xdg" / "spirula-studio" / "shaders" / "vulkan")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SPIRULA_SHADER_CACHE", str(blocker))
    assert D._shader_cache("vulkan") is None  # cannot be made: no cache, no error


def test_a_kernel_runs_with_the_shader_cache_on(monkeypatch, tmp_path, rng):
    """A device made with the cache compiles and runs a kernel, twice (the second device may
    take it from the cache), with the same result as NumPy's."""
    monkeypatch.setenv("SPIRULA_SHADER_CACHE", str(tmp_path))
    keys = rng.integers(0, 1 << 20, 5000).astype(np.uint32)
    for _ in range(2):
        gpu = D.Gpu(BACKEND)
        from spirula.engine.splat.sort import RadixSort

        sorter = RadixSort(gpu)
        buf_k = gpu.upload(keys, label="keys")
        buf_v = gpu.upload(np.arange(keys.size, dtype=np.uint32), label="values")
        enc = gpu.encoder()
        sorter.record(enc, buf_k, buf_v, keys.size, 20)
        gpu.submit(enc)
        gpu.wait_idle()
        got = gpu.read(buf_k, np.uint32, keys.size)
        np.testing.assert_array_equal(got, np.sort(keys))
