"""The stage list in the status bar (spirula/app/stage_status.py): a recorded training's progress
replayed on a fake clock, the running stage's elapsed time and estimate in its text, every
stage in its menu; in the studio window it sits in the status bar, seen from every tab."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from spirula.engine.studio import protocol as M

ROOT = Path(__file__).resolve().parents[2]


def _seconds(text: str) -> float:
    parts = [int(p) for p in text.split(":")]
    return float(sum(p * 60 ** i for i, p in enumerate(reversed(parts))))


def test_the_status_shows_the_stage_its_time_and_an_estimate_from_a_recorded_trace(qapp):
    from spirula.app.stage_status import StageStatus

    h = json.loads((ROOT / "benchmarks/results/pipeline-2026-12-06/mouse/train.json").read_text())["history"]
    scale = 60.0                                 # as if on a slower device: 11 s -> 11 min
    now = [0.0]
    w = StageStatus(clock=lambda: now[0])
    assert w.text() == "No job"
    w.on_message(M.StageFinished("sfm", 42.0))
    w.on_message(M.StageStarted("train", 7000))
    total = h[-1]["elapsed_s"] * scale
    for r in h:
        now[0] = r["elapsed_s"] * scale
        w.on_message(M.StageProgress("train", r["step"], 7000, "loss"))
        if r["step"] == 3500:
            break
    text = w.text()
    assert text.startswith("Train ") and "left" in text, text
    elapsed, left = text.split()[1], text.split("about ")[1].split()[0]
    assert _seconds(elapsed) == round(now[0])
    assert abs(_seconds(elapsed) + _seconds(left) - total) <= 0.25 * total, (text, total)
    w._fill()
    lines = [a.text() for a in w.menu_.actions()]
    assert lines[0].startswith("✓ SfM: 0:42") and lines[1].startswith("▶ Train") and "left" in lines[1]
    assert [ln.split(" ", 1)[1] for ln in lines[2:]] == ["Export", "Mesh"]
    w.on_message(M.JobState("failed", "boom"))
    assert w.text() == "Stages"
    w._fill()
    assert w.menu_.actions()[1].text().startswith("✗ Train")
    w.deleteLater()


def test_the_studio_window_has_it_in_its_status_bar(studio):
    app, win = studio
    assert win.stage_status.parent() is win.statusBar() or win.statusBar().isAncestorOf(win.stage_status)
    assert win.stage_status.isVisible()
    win.handle(M.StageStarted("decode", 50))
    assert win.stage_status.text().startswith("Decode")
