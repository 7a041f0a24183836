"""Shared fixtures: the GPU device (software Vulkan in CI), the ../shared datasets, and each
test's random seed.

Random draws: a test that draws takes the ``rng`` fixture (a ``numpy.random.Generator``) or
the ``seed`` fixture (an int, for a ``TrainConfig.seed`` or a generator of its own). The seed
is a hash of the test's node id and the base seed ``$SPIRULA_TEST_SEED`` (default 0), so a
run is reproducible and each test (each parametrisation) draws differently;
``SPIRULA_TEST_SEED=random`` draws a fresh base for exploring, printed in the session header.
A failing test's report holds a "random seed" section with its seed and the command that
replays it. Helpers and module-scoped fixtures seed their generators with a literal instead;
tests/test_seeded_draws.py fails on any unseeded draw under tests/.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pytest

from .patience import PATIENCE

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SPIRULA_SHARED_DATA", REPO.parent / "shared" / "data"))
# The CLI picks the `software` preset by itself on a software Vulkan device (spirula/engine/cli/options.py
# choose_preset): the tests (and the subprocesses they start) say which settings they train with,
# whatever the device, so they pin the default preset; tests of that choice unset this.
os.environ.setdefault("SPIRULA_PRESET", "default")

SEED_ENV = "SPIRULA_TEST_SEED"
_SEED_KEY = pytest.StashKey[int]()
_BASE: dict[str, int | None] = {"random": None}


def _base_seed() -> int:
    text = os.environ.get(SEED_ENV, "").strip()
    if not text:
        return 0
    if text == "random":
        if _BASE.get("random") is None:  # once per session, then printed in the header
            _BASE["random"] = int.from_bytes(os.urandom(4), "little")  # unseeded-ok: the base seed itself, printed
        return _BASE["random"]
    try:
        return int(text, 0)
    except ValueError:
        raise pytest.UsageError(f"${SEED_ENV}={text!r}: give an integer or 'random'") from None


def seed_of(nodeid: str, base: int | None = None) -> int:
    """The seed of the test ``nodeid`` (as pytest names it) under the base seed."""
    base = _base_seed() if base is None else base
    return zlib.crc32(f"{base}/{nodeid}".encode())


def pytest_configure(config):
    """A drawn base (``random``) goes into the environment as its number: pytest-xdist's
    workers (scripts/test.sh), started after this, inherit it and draw with the same base."""
    if os.environ.get(SEED_ENV, "").strip() == "random":
        os.environ[SEED_ENV] = str(_base_seed())


def pytest_report_header(config):
    return f"random draws: base seed {_base_seed()} (${SEED_ENV}; each test's seed hashes it with the test's id)"


@pytest.fixture
def seed(request) -> int:
    """This test's seed (uint32), reported with the failure."""
    s = seed_of(request.node.nodeid)
    request.node.stash[_SEED_KEY] = s
    return s


@pytest.fixture
def rng(seed) -> np.random.Generator:
    """A generator seeded with this test's ``seed``."""
    return np.random.default_rng(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    s = item.stash.get(_SEED_KEY, None)
    if rep.failed and s is not None:
        rep.sections.append(("random seed", f"this test drew with seed {s} (base {SEED_ENV}={_base_seed()}); "
                                            f"replay: {SEED_ENV}={_base_seed()} python -m pytest '{item.nodeid}'"))


def pytest_collection_modifyitems(config, items):
    """Each test's pytest-timeout limit (its mark, else --timeout / the ini's) times PATIENCE
    (tests/patience.py): the limit guards against a hang and must outlast the test's own
    waits, which are scaled by the same factor."""
    if PATIENCE == 1.0:
        return
    default = config.getoption("timeout", None) or config.getini("timeout")
    for item in items:
        mark = item.get_closest_marker("timeout")
        base = mark.args[0] if mark is not None and mark.args else (mark.kwargs.get("timeout") if mark else None)
        base = float(base if base is not None else default or 0)
        if base > 0:
            rest = {k: v for k, v in (mark.kwargs if mark is not None else {}).items() if k != "timeout"}
            item.add_marker(pytest.mark.timeout(base * PATIENCE, **rest), append=False)


@pytest.fixture(scope="session")
def gpu():
    from spirula.engine.device import get_gpu

    return get_gpu(os.environ.get("SPIRULA_TEST_DEVICE", "vulkan"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATA} (the ../shared folder beside the repo)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _log_dataset_warnings_again():
    """Each test sees its datasets' warnings in the log: a process logs each one once
    (spirula/engine/ingest/scene.Scene.warn), and many tests read the same shared dataset."""
    from spirula.engine.ingest import scene

    scene._LOGGED.clear()
