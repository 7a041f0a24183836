"""An independent reader and writer agrees with ours: PlayCanvas's splat-transform (npm,
pinned and installed into .tools/ by scripts/setup.sh) converts our SOG, SPZ, compressed
PLY and .splat back to PLY, and that PLY holds what our reader decodes from the same file
(to float32 rounding) and what we wrote (to the format's tolerance); and we read the SOG,
SPZ and compressed PLY it writes from our PLY, to the same tolerances.

Skipped only where Node.js itself is absent; with Node.js but without the package this
fails and says to run scripts/setup.sh (CI runs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.io import formats
from spirula.engine.io.ply import read_ply, write_ply
from tests.io.splat_cases import M_FOR_DEGREE, match, random_gaussians, rgb, rotation_error, sigmoid
from ..patience import patient

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / ".tools" / "node_modules" / "@playcanvas" / "splat-transform" / "bin" / "cli.mjs"
N = 2000


@pytest.fixture(scope="module")
def splat_transform():
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed, so splat-transform (the independent reader) cannot run; "
                    "scripts/setup.sh installs nodejs and npm with apt")
    assert CLI.is_file(), f"{CLI} is missing: run scripts/setup.sh (it installs @playcanvas/splat-transform)"

    def run(src: Path, dst: Path) -> None:
        r = subprocess.run([node, str(CLI), "-q", "-w", str(src), str(dst)], capture_output=True, text=True,
                           timeout=patient(300))
        assert r.returncode == 0 and dst.exists(), f"splat-transform {src.name} -> {dst.name}: {r.stderr[-2000:]}"

    return run


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    rng = np.random.default_rng(24)
    g = random_gaussians(rng, N, 3)
    centres = rng.uniform(-0.8, 0.8, (24, M_FOR_DEGREE[3], 3))   # SH a palette can hold (SOG)
    g.shN = (centres[rng.integers(0, 24, N)] + rng.uniform(-0.01, 0.01, (N, 15, 3))).astype(np.float32)
    folder = tmp_path_factory.mktemp("interop")
    write_ply(folder / "ours.ply", g)
    return folder, g


# the format's own tolerances (tests/io/test_format_roundtrip.py derives them)
def _close_to_original(g, h, fmt):
    o = g.subset(match(g, h))
    pos = {"spz": 0.5 / 4096 + 1e-5, "sog": 1e-3, "compressed-ply": np.ptp(g.means) / 1023 / 2 + 1e-5}[fmt]
    assert np.abs(h.means - o.means).max() <= pos
    assert np.abs(rgb(h.sh0) - rgb(o.sh0)).max() <= 1 / 255
    assert np.abs(sigmoid(h.opacities) - sigmoid(o.opacities)).max() <= 1 / 255 + 1e-5
    assert np.abs(h.scales - o.scales).max() <= {"spz": 1 / 32, "sog": 0.06, "compressed-ply": 0.01}[fmt] + 1e-5
    assert rotation_error(o.quats, h.quats).max() < 0.03
    assert h.sh_degree == 3
    assert np.abs(h.shN - o.shN).max() <= {"spz": 8.5 / 128, "sog": 0.04, "compressed-ply": 4 / 256}[fmt] + 1e-5


@pytest.mark.parametrize("fmt", ["spz", "sog", "compressed-ply", "splat"])
def test_splat_transform_reads_our_files(splat_transform, scene, fmt):
    folder, g = scene
    ours = folder / f"ours{formats.EXTENSIONS[fmt]}"
    formats.write_any(ours, g, fmt)
    back = folder / f"back-{fmt}.ply"
    splat_transform(ours, back)
    theirs, mine = read_ply(back, warn=False), formats.read_any(ours, warn=False)
    assert len(theirs) == len(mine) == N
    j = match(mine, theirs)
    mine = mine.subset(j)
    # the two decoders of one file agree to float32 rounding
    assert np.allclose(theirs.means, mine.means, rtol=1e-5, atol=1e-6)
    assert np.allclose(theirs.scales, mine.scales, atol=1e-4)
    assert np.allclose(theirs.sh0, mine.sh0, atol=1e-4)
    assert np.allclose(sigmoid(theirs.opacities), sigmoid(mine.opacities), atol=1e-5)
    # .splat: splat-transform decodes a rotation byte as v / 127.5 - 1, the viewer that defined the
    # format (antimatter15/splat) and we as (v - 128) / 128: the two differ by under 1/128 per component
    assert rotation_error(theirs.quats, mine.quats).max() < (0.03 if fmt == "splat" else 1e-4)
    assert theirs.sh_degree == mine.sh_degree and np.allclose(theirs.shN, mine.shN, atol=1e-4)
    if fmt != "splat":
        _close_to_original(g, theirs, fmt)


@pytest.mark.parametrize("fmt", ["spz", "sog", "compressed-ply"])
def test_we_read_what_splat_transform_writes(splat_transform, scene, fmt):
    folder, g = scene
    out = folder / f"theirs{formats.EXTENSIONS[fmt]}"
    splat_transform(folder / "ours.ply", out)
    assert formats.detect(out) == fmt
    h = formats.read_any(out, warn=False)
    assert len(h) == N
    _close_to_original(g, h, fmt)
