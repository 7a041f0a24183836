"""benchmarks/ holds protocols, not sessions (issue 29): no per-session driver comes back,
the one GPU-machine driver knows its protocols and writes results/<date>-<commit>/, and
every raw result there is indexed with the commit it measured."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
DRIVER = BENCH / "gpu.sh"
# the shell scripts allowed: the driver, the shell functions it sources, and the two protocols
# that run alone with their own environment (quality, pipeline: see gpu.sh's header)
SHELL = {"gpu.sh", "h200_common.sh", "h200_quality.sh", "h200_pipeline.sh", "h200_pipeline_prepare.sh"}
SESSION_NAME = re.compile(r"session|probe|chain|20\d\d-?\d\d|(^|[_-])s\d+([_.-]|$)|call\d|lease|lean|fused|mixed",
                          re.IGNORECASE)


def _files():
    return sorted(p.name for p in BENCH.iterdir() if p.name != "results" and not p.name.startswith("."))


def test_no_per_session_driver():
    bad = [n for n in _files() if SESSION_NAME.search(n)]
    assert not bad, (f"benchmarks/ has per-session files {bad}: add a protocol to benchmarks/gpu.sh (or a "
                     "`spirula bench` subcommand) and pass the session's settings in the environment instead")


def test_one_shell_driver():
    extra = sorted(n for n in _files() if n.endswith(".sh") and n not in SHELL)
    assert not extra, (f"new shell drivers {extra}: benchmarks/gpu.sh is the one GPU-machine driver; "
                       "add a protocol function (p_<name>) there")
    # folders: results/, and mesh_gt/ (the ground-truth mesh benchmark's package, issue 47)
    assert not [p for p in BENCH.iterdir() if p.is_dir() and p.name not in ("results", "mesh_gt", "__pycache__")
                and not p.name.startswith(".")]


def _protocols() -> list[str]:
    m = re.search(r'^PROTOCOLS="([^"]+)"', DRIVER.read_text(), re.MULTILINE)
    return m.group(1).split()


def test_every_protocol_is_defined_listed_and_documented():
    text, readme = DRIVER.read_text(), (BENCH / "README.md").read_text()
    listed = subprocess.run(["bash", str(DRIVER), "--list"], capture_output=True, text=True, check=True).stdout
    for p in _protocols():
        assert re.search(rf"^p_{p}\(\)", text, re.MULTILINE), f"gpu.sh has no function p_{p}"
        assert re.search(rf"^{p}: ", listed, re.MULTILINE), f"`gpu.sh --list` does not describe {p}"
        assert f"| `{p}` |" in readme, f"benchmarks/README.md's protocol table lacks {p}"


def _driver(tmp_path, *protocols, **env):
    e = dict(os.environ, OUT=str(tmp_path), SPIRULA_COMMIT="abc1234", GPU_ENV="0", **env)  # this machine, even where .gpu/ is
    return subprocess.run(["bash", str(DRIVER), *protocols], cwd=REPO, env=e, capture_output=True, text=True)


def test_unknown_protocol_is_refused_before_anything_runs(tmp_path):
    r = _driver(tmp_path, "raster", "session11")
    assert r.returncode == 2 and "unknown protocol 'session11'" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_dry_run_names_each_protocols_commands(tmp_path):
    alone = ["quality", "pipeline"]  # they source their own environment
    r = _driver(tmp_path, *[p for p in _protocols() if p not in alone], DRY_RUN="1")
    assert r.returncode == 0, r.stderr
    for p in _protocols():
        assert (f"== {p}\n" in r.stdout) == (p not in alone)
    assert "bench viewer --device cuda --gaussians 3000000" in r.stdout
    assert "bench mesh /tmp/gpu-mesh-project" in r.stdout
    assert "bench studio --device vulkan --data .gpu/data/colmap-office_chair --gaussians 6000000" in r.stdout
    for p in alone:
        r = _driver(tmp_path, p, DRY_RUN="1")
        assert r.returncode == 0 and f"bash benchmarks/h200_{p}.sh" in r.stdout, r.stderr
        r = _driver(tmp_path, "raster", p, DRY_RUN="1")
        assert r.returncode == 2 and "run each alone" in r.stderr


def test_viewer_protocol_writes_the_dated_results_folder(tmp_path):
    """The driver end to end on this machine (no .gpu/): the viewer protocol at a tiny size."""
    r = _driver(tmp_path, "viewer", "large", DEVICES="vulkan", LARGE_DATA="no-such-dataset", VIEWER_GAUSSIANS="2000",
                VIEWER_ARGS="--width 64 --height 48 --frames 2 --warmup 1",
                SPIRULA=f"{sys.executable} -m spirula.engine.cli")
    assert r.returncode == 0, r.stdout + r.stderr
    (folder,) = tmp_path.iterdir()
    assert re.fullmatch(r"20\d\d-\d\d-\d\d-abc1234", folder.name)
    manifest = [json.loads(x) for x in (folder / "manifest.jsonl").read_text().splitlines()]
    assert [(m["protocol"], m["rc"]) for m in manifest] == [("viewer", 0), ("large", 3)]
    assert "not carried" in manifest[1]["skipped"]
    res = json.loads((folder / "viewer" / "viewer-vulkan-2000.json").read_text())
    assert res["bench"] == "viewer" and res["frames"] == 2 and res["width"] == 64
    assert (folder / "viewer" / "viewer-vulkan-2000-readback.json").exists()
    assert "viewer vulkan 2,000 64x48" in r.stdout  # the summary table, printed last


@pytest.mark.parametrize("entry", sorted(p.name for p in (BENCH / "results").iterdir() if p.name != "README.md"))
def test_every_result_is_indexed_with_its_commit(entry):
    if re.fullmatch(r"20\d\d-\d\d-\d\d-[0-9a-f]{7,40}", entry):
        return  # benchmarks/gpu.sh's folders carry the commit in their name
    index = (BENCH / "results" / "README.md").read_text()
    row = next((line for line in index.splitlines() if f"`{entry}`" in line or f"`{entry}/`" in line), None)
    assert row is not None, f"benchmarks/results/{entry} is not in benchmarks/results/README.md's index"
    assert re.search(r"\b[0-9a-f]{7}\b|not recorded", row), f"its row names no commit: {row}"


def _table_rows() -> list[list[str]]:
    text = (REPO / "BENCHMARKS.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in r.strip("|").split(" | ")] for r in rows[1:]]  # without the header


def test_benchmarks_md_is_one_current_table_and_the_history_lives_elsewhere():
    text = (REPO / "BENCHMARKS.md").read_text()
    assert not re.search(r"^## 20\d\d-", text, re.MULTILINE), "session sections go to docs/benchmarks-history.md"
    assert text.count("| claim | result | date | commit | command | results file |") == 1
    assert (REPO / "docs" / "benchmarks-history.md").is_file()


def test_every_row_names_its_date_commit_and_an_existing_results_file():
    rows = _table_rows()
    assert len(rows) >= 8
    results = BENCH / "results"
    for claim, _result, date, commit, _command, files in rows:
        assert re.search(r"20\d\d-\d\d-\d\d", date), claim
        assert re.search(r"\b[0-9a-f]{7}\b", commit), claim
        for name in re.findall(r"`([^`]+)`", files):
            name = name.removeprefix("benchmarks/results/")
            assert list(results.glob(name.rstrip("/"))), f"{claim[:60]}...: {name} is not in benchmarks/results/"
        assert re.findall(r"`([^`]+)`", files) or files.startswith("none kept"), claim


def test_summary_reads_lists_and_result_lines(tmp_path):
    (tmp_path / "quality").mkdir()
    (tmp_path / "large").mkdir()
    (tmp_path / "manifest.jsonl").write_text(
        '{"protocol": "quality", "rc": 0, "seconds": 500, "commit": "abc1234", "skipped": ""}\n'
        '{"protocol": "large", "rc": 0, "seconds": 90, "commit": "abc1234", "skipped": ""}\n')
    (tmp_path / "quality" / "quality-2026-12-03.json").write_text(json.dumps(
        [{"trainer": "ours-adc", "dataset": "fox", "steps": 7000, "psnr": 29.9}, {"trainer": "gsplat-default"}]))
    (tmp_path / "large" / "stdout.txt").write_text('noise\nRESULT {"kind": "large", "gaussians": 10000000}\n')
    r = subprocess.run([sys.executable, str(BENCH / "gpu_summary.py"), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "ours-adc: dataset fox, steps 7000, psnr 29.9" in r.stdout and "gsplat-default: " in r.stdout
    assert "large: gaussians 10000000" in r.stdout and "quality      0      500" in r.stdout
