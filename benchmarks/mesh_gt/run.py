"""The benchmark driver: generate each scene's dataset, run `spirula run` on it, score its
mesh, write ``results.json`` and print a table.

Per scene, under ``<out>/<scene>/``: ``data/`` (the dataset and its ground truth,
benchmarks/mesh_gt/writer.py; reused when gt.json says it was made at the same size,
seed and format), ``project/`` (the `spirula run` project; removed first so each run starts
afresh), ``run.log`` (its output), ``score.json``. `spirula run` runs at its defaults
except: ``--steps`` at the CI size (Size.steps), ``--device``, the scene's own options
(the room: ``--mesh-bounds scene``) and ``--mesh-args``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .scenes import SIZES, get_scene
from .score import score_file
from .writer import FORMAT, read_ground_truth, write_scene

REPO = Path(__file__).resolve().parents[2]


def commit() -> str:
    """The repository's short commit (with '+dirty' when it has uncommitted changes), or
    'unknown'."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def dataset(scene_name: str, size_name: str, folder: Path, seed: int = 0, log=print, jobs: int = 1) -> dict:
    """Make (or reuse) the dataset of ``scene_name`` at ``size_name`` in ``folder`` (``jobs``
    views rendered at once); gt.json's contents plus ``generate_s`` (0 when reused)."""
    folder = Path(folder)
    info_path = folder / "gt.json"
    if info_path.is_file():
        info = json.loads(info_path.read_text())
        same = info.get("size") == size_name and info.get("seed") == seed and info.get("format") == FORMAT
        if same and (folder / "gt.npz").is_file():
            log(f"[{scene_name}] dataset reused: {folder}")
            return dict(info, generate_s=0.0)
    if folder.exists():
        shutil.rmtree(folder)
    t = time.perf_counter()
    info = write_scene(get_scene(scene_name), SIZES[size_name], folder, seed, jobs=jobs)
    info["generate_s"] = time.perf_counter() - t
    log(f"[{scene_name}] dataset: {info['views']} views {info['width']}x{info['height']}, "
        f"{info['sparse_points']} sparse points, {info['gt_points']} ground-truth points ({info['generate_s']:.0f} s)")
    return info


def spirula_command(data: Path, project: Path, size_name: str, scene_name: str, device: str | None,
                    mesh_args: list[str]) -> list[str]:
    """The `spirula run` command line of one scene (module docstring)."""
    size, scene = SIZES[size_name], get_scene(scene_name)
    cmd = [sys.executable, "-m", "spirula.engine.cli", "run", str(data), "-o", str(project)]
    if size.steps is not None:
        cmd += ["--steps", str(size.steps)]
    if device:
        cmd += ["--device", device]
    return cmd + list(size.run_args) + list(scene.mesh_args) + list(mesh_args)


def run_scene(scene_name: str, size_name: str, out: Path, device: str | None = None, mesh_args=(),
              seed: int = 0, log=print, jobs: int = 1) -> dict:
    """Generate, run and score one scene (module docstring); the scene's result dict
    (scores, seconds, the command, its return code; ``error`` when no mesh came out)."""
    root = Path(out) / scene_name
    root.mkdir(parents=True, exist_ok=True)
    info = dataset(scene_name, size_name, root / "data", seed, log, jobs)
    project = root / "project"
    if project.exists():
        shutil.rmtree(project)
    cmd = spirula_command(root / "data", project, size_name, scene_name, device, list(mesh_args))
    log(f"[{scene_name}] {shlex.join(cmd[1:])}")
    t = time.perf_counter()
    with open(root / "run.log", "w") as fh:
        rc = subprocess.run(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - t
    result = {"scene": scene_name, "title": info["title"], "size": size_name, "command": shlex.join(cmd[1:]),
              "returncode": rc, "seconds": seconds, "generate_s": info["generate_s"]}
    run_json = project / "run.json"
    if run_json.is_file():
        stages = json.loads(run_json.read_text()).get("stages", [])
        result["stage_seconds"] = {e["name"]: e.get("seconds") for e in stages if isinstance(e, dict) and "name" in e}
    mesh = project / "exports" / "mesh.ply"
    if rc != 0 or not mesh.is_file():
        tail = (root / "run.log").read_text(errors="replace").strip().splitlines()[-3:]
        result["error"] = f"spirula run exited {rc}" + (f": {' | '.join(tail)}" if tail else "")
        log(f"[{scene_name}] {result['error']}")
    else:
        t = time.perf_counter()
        result["score"] = score_file(mesh, read_ground_truth(root / "data"), seed)
        result["score_s"] = time.perf_counter() - t
    (root / "score.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def _pct(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(results: list[dict]) -> str:
    """The printed summary: one line per scene (distances in % of the diagonal)."""
    head = (f"{'scene':<6}{'F@0.5%':>8}{'F@1%':>7}{'acc%':>7}{'comp%':>7}{'chamf%':>8}{'out%':>7}"
            f"{'comps':>7}{'wt':>4}{'thin':>6}{'sec':>7}")
    lines = [head]
    for r in results:
        s = r.get("score")
        if s is None:
            lines.append(f"{r['scene']:<6}  {r.get('error', 'no score')[:70]}")
            continue
        d = s["diagonal"]
        rel = lambda x: None if x is None else 100 * x / d
        thin = "-" if s["thin_in_largest"] is None else ("yes" if s["thin_in_largest"] else "no")
        lines.append(f"{r['scene']:<6}{s['fscore@0.5%']:>8.3f}{s['fscore@1%']:>7.3f}{_pct(rel(s['accuracy'])):>7}"
                     f"{_pct(rel(s['completeness'])):>7}{_pct(s['chamfer_pct']):>8}{s['outside_area_pct']:>7.1f}"
                     f"{s['components']:>7}{('yes' if s['watertight'] else 'no'):>4}{thin:>6}{r['seconds']:>7.0f}")
    return "\n".join(lines)


def run(size_name: str, scene_names: list[str], out: Path, device: str | None = None, mesh_args=(), seed: int = 0,
        log=print, jobs: int = 1) -> dict:
    """Every scene in turn; writes and returns ``<out>/results.json``'s contents."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    at = commit()  # the code that runs (taken before: the tree may change during the run)
    results = [run_scene(s, size_name, out, device, mesh_args, seed, log, jobs) for s in scene_names]
    doc = {"benchmark": "mesh_gt", "size": size_name, "commit": at, "device": device or "default",
           "mesh_args": list(mesh_args), "seed": seed, "scenes": results}
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    log(table(results))
    return doc
