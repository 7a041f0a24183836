"""The stage list of a job (decode, select, SfM, undistort, train, export, mesh): each
stage's state, elapsed time and an estimate of the time left from its measured rate, fed by
the stages' progress messages (spirula/engine/messages.py StageStarted / StageProgress /
StageFinished). Qt-free: the window shows :meth:`StageList.rows` (spirula/app/stage_status.py).

Times are seconds on any monotonic clock, passed in (``t``), so a recorded trace replays
exactly. The estimate of a stage at progress ``x = done / total`` after the first progress
report (``x0`` at ``t0``) is

    remaining = (t - t0) * (P(1) - P(x)) / (P(x) - P(x0))

where ``P`` is the stage's cumulative cost profile (P(0) = 0, P(1) = 1): the fraction of
the stage's time spent by progress x. The time before the first report (start-up: a
kernel compile, a file opened) is left out of the rate. A stage of phases that each count
their own units (SfM: features over images, matching over pairs, mapping over images) is
measured per phase: a report whose total changes or whose progress falls back starts a new
rate, and the estimate is then the current phase's, short of the later phases' time (office_chair's
SfM on lavapipe: 88 % of the estimates past 10 % within 25 % instead of 15 %, the worst -64 % in
the features instead of +2254 %; benchmarks/results/stage-estimates-2026-12-08-lavapipe). Profiles: a constant rate
(P(x) = x) for every stage but training, whose steps slow down as the Gaussians grow:
:data:`TRAIN_PROFILE`, the mean profile of the 18 trainings recorded by
benchmarks/results/pipeline-2026-12-06*/*/train.json (7,000 steps of MCMC on book, mouse,
chair-video; H100, Vulkan). Replayed with the profile of the other scenes, 97.7 % of the
estimates past 10 % done are within 25 % of the recorded total, every one of them in 13 of
the 18 traces (the worst trace's worst
50 %: a 1 s hiccup in a 7 s run; the median trace's worst 16 %); a constant rate's median
worst is 29 % (tests/test_stage_list.py prints both). On a software device (lavapipe) the
training runs at a constant rate (:func:`train_profile`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STAGES = ("decode", "select", "import", "sfm", "undistort", "train", "export", "mesh")  # a video's; photos: import
LABELS = {"decode": "Decode", "select": "Select frames", "import": "Import photos", "sfm": "SfM",
          "undistort": "Undistort", "train": "Train", "export": "Export", "mesh": "Mesh"}
# P at x = 0, 0.1, ..., 1 (profile_from_traces of the recorded trainings)
TRAIN_PROFILE = (0.0, 0.0724, 0.1418, 0.2156, 0.2929, 0.3764, 0.4702, 0.5874, 0.7044, 0.8467, 1.0)
MIN_FRACTION = 0.02   # no estimate before this much of a stage is done past its first report


def profile_from_traces(traces, points: int = 11) -> tuple:
    """The mean cumulative cost profile of recorded progress ``traces`` (each [K, 2]:
    (done, seconds) rows, done increasing to the total), at ``points`` evenly spaced
    fractions from 0 to 1; each trace measured from its first row."""
    grid = np.linspace(0.0, 1.0, points)
    ps = []
    for tr in traces:
        tr = np.asarray(tr, np.float64)
        x = tr[:, 0] / tr[-1, 0]
        p = (tr[:, 1] - tr[0, 1]) / max(tr[-1, 1] - tr[0, 1], 1e-12)
        ps.append(np.interp(grid, x, p))
    return tuple(float(v) for v in np.mean(ps, axis=0))


@dataclass
class StageClock:
    """One stage: ``state`` "waiting", "running", "done", "cached" or "failed"."""

    stage: str
    state: str = "waiting"
    total: int | None = None
    done: int = 0
    started: float | None = None
    ended: float | None = None
    seconds: float | None = None          # StageFinished's own measure
    first: tuple | None = None            # (t0, x0): the first progress report
    last: tuple | None = None             # (t, x): the latest
    profile: tuple | None = None

    def _p(self, x: float) -> float:
        if self.profile is None:
            return x
        return float(np.interp(x, np.linspace(0.0, 1.0, len(self.profile)), self.profile))

    def start(self, t: float, total: int | None) -> None:
        self.state, self.started, self.total, self.ended = "running", t, total, None
        self.first = self.last = None
        self.done = 0

    def progress(self, t: float, done: int, total: int | None) -> None:
        if self.state != "running":
            self.start(t, total)
        phase = bool(total) and total != self.total   # a stage of phases with their own units (SfM)
        self.total = total if total else self.total
        self.done = int(done)
        if self.total:
            x = min(max(done / self.total, 0.0), 1.0)
            if self.first is None or phase or x < self.last[1]:   # a new phase (or one begun again): its own rate
                self.first = (t, x)
            self.last = (t, x)

    def finish(self, t: float, seconds: float | None = None, cached: bool = False, failed: bool = False) -> None:
        self.state = "failed" if failed else "cached" if cached else "done"
        self.ended, self.seconds = t, seconds

    def elapsed(self, t: float) -> float:
        if self.seconds is not None and self.state in ("done", "cached"):
            return float(self.seconds)
        if self.started is None:
            return 0.0
        return max(0.0, (self.ended if self.ended is not None else t) - self.started)

    def remaining(self, t: float | None = None) -> float | None:
        """Seconds left (at the last report, less the time since it when ``t`` is given),
        None before :data:`MIN_FRACTION` of the stage is measured or when not running."""
        if self.state != "running" or self.first is None or self.last is None:
            return None
        (t0, x0), (t1, x1) = self.first, self.last
        span = self._p(x1) - self._p(x0)
        if x1 - x0 < MIN_FRACTION or span <= 0 or t1 <= t0:
            return None
        left = (t1 - t0) * (1.0 - self._p(x1)) / span
        return max(0.0, left - (max(0.0, t - t1) if t is not None else 0.0))


def train_profile(software: bool) -> tuple | None:
    """The training's cost profile on a device: :data:`TRAIN_PROFILE` on a GPU, a constant
    rate (None) on a software one (lavapipe). There the software preset's run barely grows
    its Gaussians (office_chair, 1,000 steps: 993 -> 1,536) and a step's cost is the image's
    pixels, not the Gaussians: the GPU profile's slowdown over-predicted it by up to 41 %, a
    constant rate stayed within 7 % (benchmarks/results/stage-estimates-2026-12-08-lavapipe)."""
    return None if software else TRAIN_PROFILE


class StageList:
    """The stages of the job on show, fed with its messages (``on_message(msg, t)``);
    ``software``: the job runs on a software device (:func:`train_profile`)."""

    def __init__(self, software: bool = False):
        self.clocks: dict[str, StageClock] = {}
        self.software = software
        self.reset()

    def set_software(self, software: bool) -> None:
        """The device became known: the training's profile follows it (a running training too)."""
        self.software = bool(software)
        self.clocks["train"].profile = train_profile(self.software)

    def reset(self) -> None:
        """A new job: every stage waiting."""
        self.clocks = {s: StageClock(s, profile=train_profile(self.software) if s == "train" else None)
                       for s in STAGES}

    def on_message(self, msg, t: float) -> bool:
        """Take a StageStarted / StageProgress / StageFinished (others: False). A stage of
        another name (warm-up, load) is not listed. A stage starting again, or one before a
        stage that has run, begins a new job's list."""
        from ..messages import StageFinished, StageProgress, StageStarted

        c = self.clocks.get(getattr(msg, "stage", None))
        if c is None:
            return False
        if isinstance(msg, StageStarted):
            later = STAGES[STAGES.index(c.stage) + 1:]
            if c.state != "waiting" or any(self.clocks[s].state != "waiting" for s in later):
                self.reset()
                c = self.clocks[msg.stage]
            c.start(t, msg.total)
        elif isinstance(msg, StageProgress):
            c.progress(t, msg.done, msg.total)
        elif isinstance(msg, StageFinished):
            c.finish(t, msg.seconds, msg.cached)
        else:
            return False
        return True

    def fail_running(self, t: float) -> None:
        """The job failed or was cancelled: a running stage is marked failed."""
        for c in self.clocks.values():
            if c.state == "running":
                c.finish(t, failed=True)

    def current(self) -> StageClock | None:
        """The running stage (the last one listed that runs), else None."""
        running = [c for c in self.clocks.values() if c.state == "running"]
        return running[-1] if running else None

    def rows(self, t: float) -> list[tuple[str, str, float, float | None]]:
        """(label, state, elapsed s, remaining s or None) of the stages that ran or run, and
        the waiting ones after them."""
        cs = list(self.clocks.values())
        last = max((i for i, c in enumerate(cs) if c.state != "waiting"), default=-1)
        return [(LABELS[c.stage], c.state, c.elapsed(t), c.remaining(t)) for i, c in enumerate(cs)
                if c.state != "waiting" or i > last]

    def active(self) -> bool:
        return any(c.state != "waiting" for c in self.clocks.values())


def format_seconds(s: float | None) -> str:
    """'1:05', '12:40', '1:02:03'; '' for None."""
    if s is None:
        return ""
    s = int(round(s))
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
