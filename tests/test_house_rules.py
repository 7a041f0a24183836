"""Project rules that code review alone would miss."""

import ast
import zipfile
from pathlib import Path

import pytest

from spirula.engine.device import Gpu, shader_dir
from spirula.engine.errors import DeviceError

REPO = Path(__file__).resolve().parents[1]


def test_layer_contracts_hold(monkeypatch, capsys):
    """The import contracts in .importlinter (import-linter, the well-kept checker napari uses):
    the engine never imports Qt or the app, and each layer imports only the layers below it,
    function-level imports included. The report names each broken import chain."""
    from importlinter.cli import lint_imports

    monkeypatch.syspath_prepend(str(REPO))
    code = lint_imports(config_filename=str(REPO / ".importlinter"), no_cache=True, no_logo=True)
    assert code == 0, capsys.readouterr().out[-4000:]


def test_no_module_loads_the_app_by_name():
    """An ``importlib.import_module("app...")`` would hide an import from the contracts."""
    bad = []
    for path in (REPO / "spirula" / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and str(node.args[0].value).startswith(("spirula.app", "PySide6"))):
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}")
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
    assert "spirula/engine/cli/main.py" in names


def test_shaders_use_precise_only_through_the_macro():
    """Slang copies `precise` verbatim into CUDA source, where nvrtc rejects it (it broke
    the CUDA backend once): kernels write PRECISE, which spirula/engine/device.py empties there."""
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


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path, root: Path | None = None) -> dict[str, set[str]]:
    """``{module: modules it imports}`` inside ``package`` (a folder of the repository),
    from every import statement anywhere in a file (a function-level import is an import
    too): absolute and relative, ``from . import x`` importing the submodule ``x`` when
    there is one, and ``import a.b.c`` importing the packages ``a`` and ``a.b`` (their
    ``__init__``) on the way. A module's own enclosing packages are not counted (they are
    always imported before it)."""
    root = root or package.parent
    files = {_module_name(p, root): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[:len(here.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets |= {module} | {f"{module}.{a.name}" for a in node.names}
        edges = set()
        for t in targets:
            parts = t.split(".")
            for k in range(1, len(parts) + 1):
                m = ".".join(parts[:k])
                if m in files and m != name and not name.startswith(m + "."):
                    edges.add(m)
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` per strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:  # a shortest way back to the group's first module
        start = min(group)
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop(0)
            nxt = sorted(graph[path[-1]] & group)
            if start in nxt:
                cycles.append(path + [start])
                break
            for w in nxt:
                if w not in seen:
                    seen.add(w)
                    paths.append(path + [w])
    return cycles


def test_engine_has_no_import_cycles():
    cycles = find_cycles(import_graph(REPO / "spirula" / "engine", REPO))
    assert not cycles, "import cycles in spirula/engine/:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_sees_relative_package_and_lazy_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")                    # the submodule b
    (pkg / "b.py").write_text("def f():\n    from .sub.c import g\n")  # lazy, through sub/__init__
    (pkg / "sub" / "__init__.py").write_text("from ..a import x\n")
    (pkg / "sub" / "c.py").write_text("import os\n")
    (pkg / "d.py").write_text("import pkg.sub.c\n")                   # absolute: no cycle of its own
    cycles = find_cycles(import_graph(pkg))
    assert cycles == [["pkg.a", "pkg.b", "pkg.sub", "pkg.a"]], cycles


def test_no_module_of_engine_or_app_over_600_lines():
    """A module past ~500 lines is more than one thing: split it by concept."""
    long = [f"{p.relative_to(REPO)}: {n}" for top in ("spirula",) for p in sorted((REPO / top).rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600]
    assert not long, long


def test_alpha_compositing_is_defined_once():
    """The splat's alpha and the compositing constants live in shaders/common/composite.slang
    alone: a copy elsewhere could drift (skip or stop on other pixel-splat pairs)."""
    import re

    own = shader_dir() / "common" / "composite.slang"
    copies = []
    for path in shader_dir().rglob("*.slang"):
        if path == own:
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in (r"static const float (ALPHA_MAX|T_MIN)\b", r"ALPHA_MIN\s*=\s*1\.0f\s*/\s*255",
                        r"-0\.5f \* \(co\.x \* d\.x \* d\.x"):
            copies += [f"{path.name}: {m.group(0)}" for m in re.finditer(pattern, text)]
    assert not copies, copies
