"""The libraries of one stage each are extras (pyproject.toml, spirula/engine/optional.py): PyAV
(`video`), pycolmap (`sfm`), trimesh / scikit-image / xatlas / fast-simplification (`mesh`).
Without them every engine module imports and a training runs; a stage that needs one says
in one line which extra to install; scripts/setup.sh and the packaging recipes install them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from spirula.engine import optional
from spirula.engine.optional import EXTRAS, MissingExtraError, need

from ..patience import patient

REPO = Path(__file__).resolve().parents[2]
STAGE_LIBS = {"av": "video", "pycolmap": "sfm", "trimesh": "mesh", "skimage": "mesh", "xatlas": "mesh",
              "fast_simplification": "mesh", "manifold3d": "mesh"}
DISTS = {"video": {"av"}, "sfm": {"pycolmap"},
         "mesh": {"trimesh", "scikit-image", "xatlas", "fast-simplification", "manifold3d"}}

# Run in a fresh interpreter with the stage libraries made unimportable (None in sys.modules:
# `import av` raises ModuleNotFoundError, as when it is not installed).
BLOCKED = f"""
import sys
for name in {sorted(STAGE_LIBS)!r}:
    sys.modules[name] = None
"""


def _name(req: str) -> str:
    return req.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].split("!")[0].strip().lower()


def test_stage_libraries_are_extras_and_setup_installs_them():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = {_name(r) for r in cfg["dependencies"]}
    extras = cfg["optional-dependencies"]
    for extra, dists in DISTS.items():
        assert not dists & deps, f"{dists & deps} must not be required (extra {extra!r})"
        assert {_name(r) for r in extras[extra]} == dists, (extra, extras[extra])
    assert any("video" in r and "sfm" in r and "mesh" in r for r in extras["all"]), extras["all"]
    assert {k: v[1] for k, v in EXTRAS.items()} == STAGE_LIBS  # spirula/engine/optional.py names the same extras
    for script in ("scripts/setup.sh", "packaging/linux/setup.sh", "packaging/macos/build_dmg.sh",
                   "packaging/windows/build.ps1"):
        text = (REPO / script).read_text(encoding="utf-8")
        installs = [line for line in text.splitlines() if "pip install" in line and "-e" in line]
        assert installs and all(all(e in line for e in ("video", "sfm", "mesh")) for line in installs), (script, installs)


@pytest.mark.parametrize("module", sorted(STAGE_LIBS))
def test_a_missing_stage_library_names_its_extra_in_one_line(module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as e:
        need(module)
    msg = str(e.value)
    extra = STAGE_LIBS[module]
    assert "\n" not in msg and msg.endswith(f"pip install 'spirula-studio[{extra}]'"), msg
    assert f"needs {EXTRAS[module][0]}, which is not installed" in msg, msg
    assert isinstance(e.value, ImportError)  # code that guards an import with `except ImportError` still works


def test_a_broken_installed_library_keeps_its_own_error(tmp_path, monkeypatch):
    """Installed but failing to load (here: it imports a module that is missing) is not
    reported as a missing extra: the real error shows."""
    (tmp_path / "spirula_fake_stage.py").write_text("import spirula_no_such_dependency\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(optional.EXTRAS, "spirula_fake_stage", ("fake", "mesh"))
    with pytest.raises(ModuleNotFoundError) as e:
        need("spirula_fake_stage")
    assert not isinstance(e.value, MissingExtraError) and e.value.name == "spirula_no_such_dependency"


def _blocked_python(code: str, tmp_path: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", BLOCKED + code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=patient(timeout))


def test_every_engine_module_imports_and_training_runs_without_the_stage_libraries(tmp_path):
    """A short training on a tiny dataset (the job `spirula train` runs) and the import of
    every engine module (the studio's, the viewer's, the CLI's) with all six blocked."""
    from tests.app.scene import write_scene

    data = write_scene(tmp_path / "ring", views=6, points=60)
    code = f"""
import importlib, json, pkgutil
import spirula.engine
mods = [m.name for m in pkgutil.walk_packages(spirula.engine.__path__, "spirula.engine.") if not m.name.endswith("__main__")]
for m in mods:
    importlib.import_module(m)
from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
from spirula.engine.jobs.train import run_training
from spirula.engine.io.ply import read_ply
cfg = RunConfig(device={os.environ.get("SPIRULA_TEST_DEVICE", "vulkan")!r}, dataset=DatasetConfig(eval_every=3),
                train=TrainConfig(steps=5, sh_degree=0, init_random_points=300, log_interval=5, checkpoint_every=0))
m = run_training({str(data)!r}, {str(tmp_path / "out")!r}, cfg)
g = read_ply({str(tmp_path / "out" / "splat.ply")!r})
print(json.dumps({{"modules": len(mods), "step": m["step"], "gaussians": len(g.means)}}))
"""
    r = _blocked_python(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["modules"] > 50 and res["step"] == 5 and res["gaussians"] > 0, res


def test_spirula_run_on_a_video_without_pyav_says_which_extra(tmp_path):
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(64))
    code = f"""
import sys
from spirula.engine.cli.main import main
sys.exit(main(["run", {str(video)!r}, "-o", {str(tmp_path / "proj")!r}]))
"""
    r = _blocked_python(code, tmp_path, timeout=120)
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert lines == ["error: reading a video needs PyAV, which is not installed: pip install 'spirula-studio[video]'"], \
        r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]


def test_selftest_notes_missing_extras_and_still_checks_the_rest(tmp_path):
    """The self-test's module check passes without the extras, a note naming each one (the
    sample is pointed nowhere, so the run stops at the next check instead of training)."""
    code = f"""
import json
import os
os.environ["SPIRULA_SAMPLE"] = {str(tmp_path / "nowhere")!r}
from spirula.engine.jobs import selftest
lines = []
r = selftest.run_selftest(steps=1, out=lines.append)
modules = next(c for c in r.checks if c.name == "modules")
print(json.dumps({{"ok": modules.ok, "detail": modules.detail, "lines": lines, "reason": r.reason,
                   "missing": r.report["modules"]["extras_missing"]}}))
"""
    r = _blocked_python("import os\nos.environ['SPIRULA_DEVICE'] = " + repr(os.environ.get("SPIRULA_TEST_DEVICE", "vulkan"))
                        + "\n" + code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["ok"] and sorted(res["missing"]) == sorted(STAGE_LIBS), res
    assert res["reason"].startswith("sample: the embedded sample is missing"), res
    assert "not installed: " in res["detail"]
    assert any("reading a video needs PyAV" in line and "[video]" in line for line in res["lines"]), res["lines"]
