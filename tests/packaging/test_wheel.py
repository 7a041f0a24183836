"""`pip install` of the built wheel gives a `spirula` whose `--selftest` passes.

The wheel is built from a copy of the checkout's files that git tracks or would track (a
stale build/ folder cannot leak into it): with this environment's setuptools when it is 77 or
newer (``--no-build-isolation``, no network; the test extra installs it), else in pip's
isolated build environment (as tests/test_house_rules.py's wheel test does). It goes into a fresh venv with ``--no-deps``; that venv sees this environment's
site-packages through a .pth file written after the install (so pip never sees, let alone
touches, this environment's packages, and nothing is downloaded). `spirula --selftest` then
runs from a folder outside the checkout, without $PYTHONPATH, and must find the embedded
sample and the shaders in the installed packages (`spirula_resources`, `spirula_shaders`).
On software Vulkan the self-test trains 200 steps: about a minute.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from ..patience import patient

REPO = Path(__file__).resolve().parents[2]
BACKEND = os.environ.get("SPIRULA_TEST_DEVICE", "vulkan")
SETUPTOOLS_MIN = 77  # pyproject.toml's build-system


def _source_copy(dst: Path) -> Path:
    """The checkout's tracked and not-ignored files, copied to ``dst``."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True, timeout=patient(60)).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"git cannot list the checkout's files: {e}")
    for rel in filter(None, out.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPIRULA_SAMPLE")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the built wheel installed; returns the venv's folder."""
    version = subprocess.run([sys.executable, "-c", "import setuptools; print(setuptools.__version__)"],
                             capture_output=True, text=True, timeout=patient(60)).stdout.strip()
    offline = bool(version) and int(version.split(".")[0]) >= SETUPTOOLS_MIN
    root = tmp_path_factory.mktemp("wheel")
    src = _source_copy(root / "src")
    dist = root / "dist"
    build = ["--no-build-isolation", "--no-index"] if offline else []
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *build, "-w", str(dist), str(src)],
                       capture_output=True, text=True, timeout=patient(300))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    wheel = next(dist.glob("spirula_studio-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=patient(120))
    vpy = venv / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(vpy), "install", "--no-deps", "--no-index",
                        str(wheel)], capture_output=True, text=True, timeout=patient(300), env=_clean_env())
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    # then (not before: pip would see this environment's packages) the libraries of this one
    site = Path(subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=patient(60)).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]} | {
        p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()}
    (site / "zz_spirula_test_libraries.pth").write_text("\n".join(sorted(ours)) + "\n", encoding="utf-8")
    return venv


def test_the_wheel_holds_the_sample_the_shaders_and_no_stage_library_as_a_requirement(installed):
    wheel = next((installed.parent / "dist").glob("spirula_studio-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    sample = REPO / "resources" / "sample" / "fox"
    want = {f"spirula_resources/sample/fox/{p.relative_to(sample).as_posix()}" for p in sample.rglob("*") if p.is_file()}
    assert want and want <= names, sorted(want - names)
    assert "spirula_shaders/raster/" in "".join(sorted(names)) and any(n.endswith(".slang") for n in names)
    required = [line.split(":", 1)[1].strip() for line in meta.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not [r for r in required if r.split(">")[0].split("=")[0].strip().lower()
                in ("av", "pycolmap", "trimesh", "scikit-image", "xatlas", "fast-simplification")], required


def test_installed_spirula_selftest_passes_outside_the_checkout(installed, tmp_path):
    vpy = installed / "bin" / "python"
    env = _clean_env(SPIRULA_DEVICE=BACKEND, PATH=f"{installed / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    where = subprocess.run([str(vpy), "-c", "import spirula.engine, spirula_shaders, spirula_resources as r; "
                            "print(spirula.engine.__file__); print(list(r.__path__)[0])"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=patient(60))
    assert where.returncode == 0, where.stderr
    assert all(str(installed) in line and str(REPO) not in line for line in where.stdout.splitlines()), where.stdout
    r = subprocess.run([str(installed / "bin" / "spirula"), "--selftest"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=patient(600))
    out = r.stdout
    assert r.returncode == 0 and out.rstrip().splitlines()[-1].startswith("PASS"), out[-4000:] + r.stderr[-3000:]
    sample_line = next(line for line in out.splitlines() if line.startswith("[ok] sample"))
    assert f"{installed}" in sample_line and str(REPO) not in sample_line, sample_line  # sample and shaders installed
