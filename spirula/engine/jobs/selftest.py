"""`spirula --selftest`: the first thing to run when something is wrong.

Checks, in order, each timed and reported on one line:

1. **device**  create the GPU device (Vulkan unless ``$SPIRULA_DEVICE`` says otherwise) and
   report the adapter, backend, slangpy version, whether it is a software device and its
   features;
2. **modules** import the required libraries (numpy, scipy, Pillow) and those of the other
   stages (PyAV for video, pycolmap for SfM, trimesh / scikit-image / xatlas /
   fast-simplification for the mesh: the package's extras, spirula/engine/optional.py; one not
   installed is a note naming its extra, one that fails to load is a failure) and look for
   the GUI's (PySide6, pyqtgraph: found, not imported); in the frozen bundle every one is
   required;
3. **sample**  find the embedded sample (``resources/sample/fox``: in the checkout, the
   frozen bundle, or the installed package ``spirula_resources``);
4. **train**   a few hundred steps on it through the normal training job
   (:func:`spirula.engine.jobs.train.run_training`: shader compilation, projection, sort,
   rasterizer, loss, backward, Adam); the held-out PSNR must rise;
5. **render**  the held-out renders the job wrote must be finite, non-blank images;
6. **export**  the ``splat.ply`` it exported into a temporary folder must read back
   (:func:`spirula.engine.io.ply.read_ply`) with the trained count and finite values.

The schedule adapts to the device like ``scripts/sample.sh``: small images and few
Gaussians on software Vulkan (everything runs on the CPU), larger on a GPU. The result is
``PASS`` or ``FAIL: <check>: <reason>``; :func:`main` returns 0 or 1. Qt-free like the
rest of the engine: the studio's Help menu runs it as a subprocess.
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import SpirulaError

SAMPLE = Path("resources") / "sample" / "fox"
RESOURCE_PACKAGE = "spirula_resources"  # resources/ in the wheel (pyproject.toml)
# (import name, what needs it): imported by the check, so a broken native library shows here
REQUIRED_MODULES = (("numpy", "everything"), ("scipy", "everything"), ("PIL", "images"))
STAGE_MODULES = REQUIRED_MODULES + (("av", "video import"), ("pycolmap", "SfM"), ("trimesh", "mesh export"),
                                    ("skimage", "mesh surface"), ("xatlas", "mesh UV atlas"),
                                    ("fast_simplification", "mesh decimation"), ("manifold3d", "mesh repair"))
GUI_MODULES = ("PySide6", "pyqtgraph")   # found, not imported: the engine stays Qt-free


@dataclass
class SelftestSettings:
    """Training schedule of the self-test (see :func:`settings_for`)."""

    steps: int = 200
    max_size: int = 80             # longer image side, px
    init_points: int = 2000        # random initial Gaussians (the sample has no SfM points)
    sh_degree: int = 1
    eval_every: int = 8            # held-out views: every 8th image
    min_psnr_gain_db: float = 1.0  # held-out PSNR must rise at least this much


def settings_for(software: bool, steps: int | None = None) -> SelftestSettings:
    """The schedule for a software (CPU) device or a real GPU; ``steps`` overrides the
    step count (tests use a handful; the PSNR gate then only asks for no loss)."""
    s = SelftestSettings() if software else SelftestSettings(steps=500, max_size=480, init_points=20_000,
                                                             sh_degree=3, min_psnr_gain_db=3.0)
    if steps is not None:
        s.steps = int(steps)
        if s.steps < 100:
            s.min_psnr_gain_db = 0.0
    return s


@dataclass
class Check:
    name: str
    ok: bool
    seconds: float
    detail: str


@dataclass
class SelftestResult:
    passed: bool
    reason: str                       # "" when passed; "<check>: <why>" otherwise
    checks: list[Check] = field(default_factory=list)
    report: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else f"FAIL: {self.reason}"


class _Failed(Exception):
    """A check failed for the stated reason (not a crash)."""


def resource_root() -> Path:
    """Folder holding ``resources/``: the source checkout, or the frozen bundle's data folder
    (PyInstaller puts the modules and the data side by side under ``sys._MEIPASS``)."""
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen)
    return Path(__file__).resolve().parents[3]  # spirula/engine/jobs/selftest.py -> the checkout


def installed_resources() -> Path | None:
    """The folder of the installed package ``spirula_resources`` (the wheel's copy of
    ``resources/``), or None when it is not installed."""
    import importlib.util

    spec = importlib.util.find_spec(RESOURCE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def sample_dir() -> Path:
    """The embedded sample dataset: ``$SPIRULA_SAMPLE`` wins, then the checkout's or the
    frozen bundle's ``resources/sample/fox``, then the installed package's."""
    env = os.environ.get("SPIRULA_SAMPLE")
    if env:
        return Path(env)
    local = resource_root() / SAMPLE
    if (local / "transforms.json").is_file():
        return local
    installed = installed_resources()
    if installed is not None and (installed / "sample" / "fox" / "transforms.json").is_file():
        return installed / "sample" / "fox"
    return local


def device_report(gpu) -> dict:
    """Adapter, backend, API, features and a few limits of an engine Gpu, as plain data."""
    import slangpy as spy

    dev = gpu.device
    info = dev.info
    feats = sorted(str(f).split(".")[-1] for f in dev.features)
    limits = {}
    for name in ("max_compute_dispatch_thread_groups", "max_compute_thread_group_size",
                 "max_compute_threads_per_group", "max_shader_visible_samplers"):
        v = getattr(info.limits, name, None)
        if v is not None:
            limits[name] = [int(x) for x in v] if hasattr(v, "__len__") else int(v) if isinstance(v, int) else str(v)
    return {
        "adapter": info.adapter_name, "api": info.api_name, "backend": gpu.backend,
        "software": gpu.software,
        "slangpy": getattr(spy, "__version__", "?"), "features": feats, "limits": limits,
        "python": platform.python_version(), "platform": platform.platform(),
        "frozen": bool(getattr(sys, "frozen", False)),
    }


def run_selftest(backend: str | None = None, steps: int | None = None, workdir: Path | None = None,
                 keep: bool = False, out: Callable[[str], None] = print,
                 verbose: bool = False) -> SelftestResult:
    """Run every check, report each on ``out`` and return the result (never raises for a
    failed check: the reason is in ``result.reason``). ``backend`` defaults to
    ``$SPIRULA_DEVICE`` or vulkan. Outputs go to a temporary folder under ``workdir``
    (default: the system temp dir), removed afterwards unless ``keep``."""
    t_start = time.perf_counter()
    result = SelftestResult(passed=False, reason="")
    tmp = Path(tempfile.mkdtemp(prefix="spirula-selftest-", dir=workdir))
    state: dict = {}

    def step(name: str, fn) -> bool:
        t0 = time.perf_counter()
        try:
            detail = fn()
            ok, why = True, detail
        except (_Failed, SpirulaError) as e:  # a stated reason (engine errors are written for the user)
            ok, why = False, str(e)
        except Exception as e:  # a crash is a failure with its message, the traceback when verbose
            ok, why = False, f"{type(e).__name__}: {e}"
            if verbose:
                out(traceback.format_exc().rstrip())
        dt = time.perf_counter() - t0
        result.checks.append(Check(name, ok, dt, why))
        out(f"[{'ok' if ok else 'FAIL'}] {name:<7} {dt:6.1f} s  {why}")
        if not ok:
            result.reason = f"{name}: {why}"
        return ok

    def check_device() -> str:
        from ..device import get_gpu

        gpu = get_gpu(backend)
        state["gpu"] = gpu
        rep = device_report(gpu)
        result.report["device"] = rep
        out(f"         adapter  {rep['adapter']}")
        out(f"         backend  {rep['backend']} ({rep['api']}{', software: runs on the CPU' if rep['software'] else ''})")
        out(f"         slangpy  {rep['slangpy']}, Python {rep['python']}{' (frozen bundle)' if rep['frozen'] else ''}")
        out(f"         features {', '.join(rep['features'])}")
        return f"{rep['adapter']} via {rep['api']}"

    def check_modules() -> str:
        import importlib
        import importlib.util

        from ..optional import EXTRAS, missing_message

        frozen = getattr(sys, "frozen", False)
        versions, missing, absent = {}, [], []
        for mod, used_for in STAGE_MODULES:
            try:
                m = importlib.import_module(mod)
                versions[mod] = getattr(m, "__version__", "?")
            except ModuleNotFoundError as e:  # not installed: an extra left out, unless required
                if e.name == mod and mod in EXTRAS and not frozen:
                    absent.append(mod)
                else:
                    missing.append(f"{mod} ({used_for}): {type(e).__name__}: {e}")
            except Exception as e:  # installed, but it (or its native library) fails to load
                missing.append(f"{mod} ({used_for}): {type(e).__name__}: {e}")
        gui = {mod: importlib.util.find_spec(mod) is not None for mod in GUI_MODULES}
        result.report["modules"] = {"versions": versions, "gui": gui, "extras_missing": absent}
        if frozen:
            missing += [f"{mod} (studio window): not in the bundle" for mod, ok in gui.items() if not ok]
        if missing:
            raise _Failed("; ".join(missing))
        for mod in absent:
            out(f"         note: {missing_message(mod)}")
        gui_note = "GUI libraries present" if all(gui.values()) else \
            "no GUI libraries (pip install 'spirula-studio[gui]' for the studio window)"
        extras_note = f"; not installed: {', '.join(absent)}" if absent else ""
        return (", ".join(f"{k} {v}" for k, v in versions.items() if k in ("av", "pycolmap", "trimesh"))
                + extras_note + "; " + gui_note)

    def check_sample() -> str:
        from ..device import shader_dir

        d = sample_dir()
        if not (d / "transforms.json").is_file():
            raise _Failed(f"the embedded sample is missing: no {d / 'transforms.json'} (neither in the checkout "
                          f"nor in the installed package {RESOURCE_PACKAGE}; reinstall, or point $SPIRULA_SAMPLE "
                          "at the fox folder)")
        n = len(list((d / "images").glob("*.jpg")))
        result.report["sample"] = str(d)
        result.report["shaders"] = str(shader_dir())
        return f"{d} ({n} images); shaders in {shader_dir()}"

    def check_train() -> str:
        from ..config import DatasetConfig, RunConfig, TrainConfig
        from .train import run_training

        gpu = state["gpu"]
        s = settings_for(result.report["device"]["software"], steps)
        state["settings"] = s
        cfg = RunConfig(device=gpu.backend, dataset=DatasetConfig(max_size=s.max_size, eval_every=s.eval_every),
                        train=TrainConfig(steps=s.steps, sh_degree=s.sh_degree, init_random_points=s.init_points,
                                          log_interval=max(1, min(25, s.steps))))
        out(f"         {s.steps} steps at {s.max_size} px from {s.init_points:,} random Gaussians, SH degree {s.sh_degree}")
        msg = (lambda m: out(f"         {m}")) if verbose else (lambda m: None)
        last = [0.0]

        def progress(p) -> None:
            now = time.perf_counter()
            if now - last[0] > 10.0 or p.step == p.steps:
                last[0] = now
                out(f"         step {p.step}/{p.steps}  loss {p.loss:.4f}  {p.steps_per_sec:.1f} steps/s")

        project = tmp / "project"
        m = run_training(sample_dir(), project, cfg, on_progress=progress, on_message=msg)
        state["metrics"], state["project"] = m, project
        result.report["train"] = {k: m[k] for k in ("step", "num_gaussians", "psnr", "ssim", "initial_psnr",
                                                    "train_seconds", "sec_per_1k_steps")}
        if m["stopped_early"] or m["step"] != s.steps:
            raise _Failed(f"training stopped at step {m['step']} of {s.steps}")
        if m["psnr"] is None or not math.isfinite(m["psnr"]):
            raise _Failed(f"held-out PSNR is {m['psnr']} (no held-out views, or the render is not finite)")
        gain = m["psnr"] - m["initial_psnr"]
        if gain < s.min_psnr_gain_db:
            raise _Failed(f"training did not learn: held-out PSNR {m['initial_psnr']:.2f} -> {m['psnr']:.2f} dB "
                          f"(needs +{s.min_psnr_gain_db:.1f} dB)")
        return (f"{m['step']} steps, {1000.0 / m['sec_per_1k_steps']:.1f} steps/s, held-out PSNR "
                f"{m['initial_psnr']:.2f} -> {m['psnr']:.2f} dB, SSIM {m['ssim']:.3f}")

    def check_render() -> str:
        from PIL import Image

        renders = sorted((state["project"] / "eval").glob("*.render.png"))
        if not renders:
            raise _Failed(f"no held-out render was written to {state['project'] / 'eval'}")
        stds = []
        for p in renders:
            img = np.asarray(Image.open(p), dtype=np.float32)
            if img.ndim != 3 or img.shape[2] < 3:
                raise _Failed(f"{p.name} is not an RGB image (shape {img.shape})")
            stds.append(float(img[..., :3].std()))
        if min(stds) < 1.0:
            raise _Failed(f"a render is blank (pixel std {min(stds):.2f} of 255): {renders[int(np.argmin(stds))].name}")
        h, w = img.shape[:2]
        return f"{len(renders)} held-out views rendered at {w}x{h}, pixel std {min(stds):.0f}..{max(stds):.0f} of 255"

    def check_export() -> str:
        from ..io.ply import read_ply

        path = state["project"] / "splat.ply"
        if not path.is_file():
            raise _Failed(f"{path} was not written")
        g = read_ply(path)
        n = len(g.means)
        if g.dropped:
            raise _Failed(f"{path.name}: {g.dropped} Gaussians hold non-finite values or a zero rotation")
        if n != state["metrics"]["num_gaussians"]:
            raise _Failed(f"{path.name} holds {n} Gaussians, the trainer had {state['metrics']['num_gaussians']}")
        if g.sh_degree != state["settings"].sh_degree:
            raise _Failed(f"{path.name} has SH degree {g.sh_degree}, trained with {state['settings'].sh_degree}")
        for name in ("means", "scales", "quats", "opacities", "sh0", "shN"):
            a = getattr(g, name, None)
            if a is not None and not np.isfinite(a).all():
                raise _Failed(f"{path.name}: non-finite values in {name}")
        return f"{path} ({n:,} Gaussians, {path.stat().st_size / 2**20:.1f} MiB) reads back, all values finite"

    out(f"Spirula Studio self-test (temporary folder {tmp})")
    try:
        for name, fn in (("device", check_device), ("modules", check_modules), ("sample", check_sample), ("train", check_train),
                         ("render", check_render), ("export", check_export)):
            if not step(name, fn):
                break
        else:
            result.passed = True
    finally:
        if keep:
            out(f"outputs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    result.seconds = time.perf_counter() - t_start
    out(f"{result.verdict}  ({result.seconds:.1f} s)")
    return result


def main(verbose: bool = False, backend: str | None = None, steps: int | None = None) -> int:
    """Entry of ``spirula --selftest``: 0 on PASS, 1 on FAIL."""
    if steps is None and os.environ.get("SPIRULA_SELFTEST_STEPS"):
        steps = int(os.environ["SPIRULA_SELFTEST_STEPS"])
    keep = bool(os.environ.get("SPIRULA_SELFTEST_KEEP"))

    def out(line: str) -> None:  # line by line, also into a pipe (the studio's Help > Self-test dialog)
        print(line, flush=True)

    return 0 if run_selftest(backend=backend, steps=steps, keep=keep, out=out, verbose=verbose).passed else 1
