"""Shared fixtures: the GPU device (software Vulkan in CI) and the ../shared datasets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SPIRULA_SHARED_DATA", REPO.parent / "shared" / "data"))
# The CLI picks the `software` preset by itself on a software Vulkan device (engine/cli/options.py
# choose_preset): the tests (and the subprocesses they start) say which settings they train with,
# whatever the device, so they pin the default preset; tests of that choice unset this.
os.environ.setdefault("SPIRULA_PRESET", "default")


@pytest.fixture(scope="session")
def gpu():
    from engine.device import get_gpu

    return get_gpu(os.environ.get("SPIRULA_TEST_DEVICE", "vulkan"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA} (the ../shared folder beside the repo)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _log_dataset_warnings_again():
    """Each test sees its datasets' warnings in the log: a process logs each one once
    (engine/ingest/scene.Scene.warn), and many tests read the same shared dataset."""
    from engine.ingest import scene

    scene._LOGGED.clear()
