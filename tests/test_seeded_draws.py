"""No random draw under tests/ without a seed (tests/conftest.py: the ``rng`` and ``seed``
fixtures, whose seed a failing test reports).

Read from the syntax tree of every .py file under tests/, with each module's import aliases
resolved (``import numpy as np``, ``from numpy.random import default_rng``, ``import random``,
...). Unseeded means:

* a numpy generator or bit generator made without a seed (``default_rng()``,
  ``default_rng(None)``, ``RandomState()``, ``PCG64()``, ``SeedSequence()``, ...) or seeded
  from the clock or the process id;
* any other ``numpy.random.*`` call: the legacy functions (``np.random.rand``,
  ``np.random.seed``, ...) draw from, or reseed, one state shared by every test;
* the standard library's ``random`` module functions and ``random.Random()`` without a seed,
  ``random.SystemRandom``, ``secrets`` and ``os.urandom``.

A line that must draw without a seed (the base seed itself) says why in a comment holding
``unseeded-ok``.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"

# numpy.random constructors that take a seed as their first argument (or ``seed=``)
NP_SEEDED = {"default_rng", "RandomState", "SeedSequence", "PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937"}
NP_NO_DRAW = {"Generator", "BitGenerator"}  # wrap a bit generator: seeded where that one is made
CLOCKS = {"time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
          "time.monotonic_ns", "os.getpid", "datetime.datetime.now", "uuid.uuid4"}


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> qualified name of every import in the module (any depth)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    out[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _qualified(func: ast.expr, aliases: dict[str, str]) -> str | None:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in aliases:
        return None
    return ".".join([aliases[func.id], *reversed(parts)])


def _seed_arg(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    for k in call.keywords:
        if k.arg in ("seed", "entropy", "x"):
            return k.value
    return None


def _why_unseeded(call: ast.Call, aliases: dict[str, str]) -> str | None:
    name = _qualified(call.func, aliases)
    if name is None:
        return None
    if name.startswith("numpy.random."):
        fn = name.rsplit(".", 1)[1]
        if fn in NP_NO_DRAW:
            return None
        if fn not in NP_SEEDED:
            return f"{name}: numpy's global random state (use the rng fixture or a seeded default_rng)"
        arg = _seed_arg(call)
        if arg is None or (isinstance(arg, ast.Constant) and arg.value is None):
            return f"{name}() without a seed"
        clocks = [n for n in ast.walk(arg) if isinstance(n, ast.Call) and _qualified(n.func, aliases) in CLOCKS]
        if clocks:
            return f"{name} seeded from {_qualified(clocks[0].func, aliases)}()"
        return None
    if name == "random.Random":
        return None if _seed_arg(call) is not None else "random.Random() without a seed"
    if name.startswith("random."):
        return f"{name}: the random module's global state (use random.Random(seed) or the rng fixture)"
    if name.startswith("secrets.") or name == "os.urandom":
        return f"{name}: not reproducible (draw the bytes from the rng fixture)"
    return None


def unseeded_draws(root: Path = TESTS) -> list[str]:
    """``path:line: why`` of every unseeded draw in the .py files under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text, filename=str(path))
        aliases = _aliases(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            why = _why_unseeded(node, aliases)
            if why and "unseeded-ok" not in lines[node.lineno - 1]:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {why}")
    return sorted(found)


def test_no_unseeded_random_draw_under_tests():
    found = unseeded_draws()
    assert not found, f"{len(found)} unseeded random draws:\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_unseeded_draw(tmp_path):
    """The check can fail: each unseeded form is found on its line, and the seeded forms pass."""
    (tmp_path / "case.py").write_text(
        "import os, random, secrets, time\n"                                      # 1
        "import numpy as np\n"                                                     # 2
        "import numpy.random as npr\n"                                             # 3
        "from numpy.random import default_rng as make\n"                           # 4
        "a = np.random.default_rng()\n"                                            # 5
        "b = np.random.rand(3)\n"                                                  # 6
        "c = npr.normal(size=3)\n"                                                 # 7
        "d = make(None)\n"                                                         # 8
        "e = random.random()\n"                                                    # 9
        "f = random.Random()\n"                                                    # 10
        "g = os.urandom(4) + secrets.token_bytes(4)\n"                             # 11
        "h = np.random.default_rng(int(time.time()))\n"                            # 12
        "i = np.random.seed(0)\n"                                                  # 13
        "ok = [np.random.default_rng(1), make(seed=2), random.Random(3), np.random.Generator(np.random.PCG64(4)),\n"
        "      npr.SeedSequence(5), np.random.default_rng(7).normal(size=3)]\n"
        "waived = os.urandom(2)  # unseeded-ok: for this test\n",
        encoding="utf-8")
    found = unseeded_draws(tmp_path)
    lines = sorted({int(f.split(":")[1]) for f in found})
    assert lines == list(range(5, 14)), found
    assert sum(":11:" in f for f in found) == 2, found


def test_a_failing_test_reports_its_seed_and_each_test_draws_its_own(tmp_path):
    """tests/conftest.py's fixtures in a pytest run of their own: a failing test's report
    holds its seed and the replay command; the seed hashes the base with the test's id."""
    import os
    import subprocess
    import sys

    from tests.conftest import seed_of

    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_makereport, rng, seed  # noqa\n")
    (tmp_path / "test_case.py").write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('k', [1, 2])\n"
        "def test_draw(k, seed, rng):\n"
        "    assert rng.integers(1 << 30) < 0, seed\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPIRULA_TEST_SEED": "17"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    seeds = [seed_of(f"test_case.py::test_draw[{k}]", base=17) for k in (1, 2)]
    assert seeds[0] != seeds[1]
    for s in seeds:
        assert f"this test drew with seed {s} (base SPIRULA_TEST_SEED=17)" in r.stdout, r.stdout
    assert "replay: SPIRULA_TEST_SEED=17 python -m pytest 'test_case.py::test_draw[1]'" in r.stdout, r.stdout
    assert seed_of("a::b", base=0) != seed_of("a::b", base=1)
