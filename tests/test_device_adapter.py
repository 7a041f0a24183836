"""$SPIRULA_ADAPTER picks one GPU of several (spirula/engine/device.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import slangpy as spy

from spirula.engine.device import Gpu
from spirula.engine.errors import DeviceError

BACKEND = os.environ.get("SPIRULA_TEST_DEVICE", "vulkan")
KIND = {"vulkan": spy.DeviceType.vulkan, "cuda": spy.DeviceType.cuda}[BACKEND]


@pytest.mark.parametrize("chosen", ["99", "first", "-1"])
def test_an_adapter_that_is_not_there_is_a_clear_error(monkeypatch, chosen):
    monkeypatch.setenv("SPIRULA_ADAPTER", chosen)
    with pytest.raises(DeviceError) as err:
        Gpu(BACKEND)
    first = spy.Device.enumerate_adapters(KIND)[0].name
    assert f"SPIRULA_ADAPTER={chosen}" in str(err.value) and f"0: {first}" in str(err.value)


def test_the_chosen_adapter_runs_the_device(monkeypatch):
    monkeypatch.setenv("SPIRULA_ADAPTER", "0")
    gpu = Gpu(BACKEND)
    assert gpu.adapter_luid == list(spy.Device.enumerate_adapters(KIND)[0].luid)
    data = np.random.default_rng(7).random(257).astype(np.float32)
    np.testing.assert_array_equal(gpu.read(gpu.upload(data, "t.adapter"), np.float32, data.size), data)
    monkeypatch.delenv("SPIRULA_ADAPTER")
    assert Gpu(BACKEND).adapter_luid is None  # unset: the driver's default
