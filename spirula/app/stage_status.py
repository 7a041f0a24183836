"""The stage list in the status bar, on every tab: a button naming the running stage, its
elapsed time and the time left (spirula/engine/studio/stage_list.py estimates it from the stage's
measured rate); its menu lists every stage of the job with state, elapsed and estimate."""

from __future__ import annotations

import time

from PySide6 import QtCore, QtWidgets

from spirula.engine.studio import protocol as M
from spirula.engine.studio.stage_list import LABELS, StageList, format_seconds

MARKS = {"waiting": "·", "running": "▶", "done": "✓", "cached": "✓", "failed": "✗"}


class StageStatus(QtWidgets.QToolButton):
    """``on_message`` takes the stage messages; ``clock`` (seconds, monotonic) is
    replaceable for tests."""

    def __init__(self, parent=None, clock=time.perf_counter):
        super().__init__(parent)
        self.clock = clock
        self.stages = StageList()
        self.setAutoRaise(True)
        self.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu_ = QtWidgets.QMenu(self)
        self.menu_.aboutToShow.connect(self._fill)
        self.setMenu(self.menu_)
        self.setToolTip("The job's stages: state, elapsed time, and the time left from the measured rate")
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(1000)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()
        self.refresh()

    def on_message(self, msg) -> None:
        if isinstance(msg, (M.StageStarted, M.StageProgress, M.StageFinished)):
            if self.stages.on_message(msg, self.clock()):
                self.refresh()
        elif isinstance(msg, M.JobState) and msg.state == "failed":
            self.stages.fail_running(self.clock())
            self.refresh()

    def reset(self) -> None:
        """Another project: no stage listed (a failed one of the previous project's job
        neither)."""
        self.stages.reset()
        self.refresh()

    def lines(self) -> list[str]:
        """One line per stage: mark, name, elapsed, 'about m:ss left'."""
        out = []
        for label, state, elapsed, left in self.stages.rows(self.clock()):
            text = f"{MARKS[state]} {label}"
            if state == "cached":
                text += ": cached"
            elif state != "waiting":
                text += f": {format_seconds(elapsed)}"
            if left is not None:
                text += f", about {format_seconds(left)} left"
            out.append(text)
        return out

    def refresh(self) -> None:
        c = self.stages.current()
        if c is None:
            self.setText("Stages" if self.stages.active() else "No job")
            return
        t = self.clock()
        left = c.remaining(t)
        self.setText(f"{LABELS[c.stage]} {format_seconds(c.elapsed(t))}"
                     + (f" · about {format_seconds(left)} left" if left is not None else ""))

    def _fill(self) -> None:
        self.menu_.clear()
        for line in self.lines():
            a = self.menu_.addAction(line)
            a.setEnabled(False)
