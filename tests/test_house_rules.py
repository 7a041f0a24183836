"""Project rules that code review alone would miss."""

import ast
import zipfile
from pathlib import Path

import pytest

from engine.device import Gpu, shader_dir
from engine.errors import DeviceError

REPO = Path(__file__).resolve().parents[1]


def test_engine_never_imports_qt_or_app():
    bad = []
    for path in (REPO / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in ("PySide6", "PyQt6", "app")]
    assert not bad, bad


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(DeviceError, match="choose one of vulkan, cuda$"):
        Gpu("metal")


def test_device_failure_says_what_was_tried_and_how_to_fix(monkeypatch):
    import slangpy

    def fail(*a, **k):
        raise RuntimeError("Failed to create device")

    monkeypatch.setattr(slangpy, "Device", fail)
    with pytest.raises(DeviceError) as e:
        Gpu("vulkan")
    msg = str(e.value)
    assert "vulkan" in msg and "Failed to create device" in msg and "mesa-vulkan-drivers" in msg


def test_wheel_ships_the_shaders(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                        "-w", str(tmp_path), str(REPO)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(tmp_path.glob("spirula_studio-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    want = {f"spirula_shaders/{p.relative_to(shader_dir()).as_posix()}" for p in shader_dir().rglob("*.slang")}
    assert want and want <= set(names), sorted(want - set(names))
    assert "engine/cli.py" in names


def test_shaders_use_precise_only_through_the_macro():
    """Slang copies `precise` verbatim into CUDA source, where nvrtc rejects it (it broke
    the CUDA backend once): kernels write PRECISE, which engine/device.py empties there."""
    import re

    bad = []
    for path in shader_dir().rglob("*.slang"):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("//")[0]
            if re.search(r"\bprecise\b", code) and not code.strip().startswith("#define PRECISE"):
                bad.append(f"{path.name}:{i}: {line.strip()}")
    assert not bad, bad


@pytest.mark.parametrize("backend,defined", [("vulkan", None), ("cuda", "")])
def test_precise_is_emptied_off_spirv(monkeypatch, backend, defined):
    import slangpy

    seen = {}

    def capture(*a, compiler_options=None, **k):
        seen["defines"] = dict(compiler_options.defines)
        raise RuntimeError("no device here")

    monkeypatch.setattr(slangpy, "Device", capture)
    with pytest.raises(DeviceError):
        Gpu(backend)
    assert seen["defines"].get("PRECISE") == defined
