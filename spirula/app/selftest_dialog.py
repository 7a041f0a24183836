"""Help > Run self-test: `spirula --selftest` (spirula/engine/jobs/selftest.py) in a child process, its
report streamed into a dialog, PASS or FAIL with the reason at the end.

A child process, not the engine thread: the self-test creates its own device and trains,
exactly as a user's `spirula --selftest` in a terminal would, so the studio's device, its
training and the viewport are not disturbed (the GPU is shared while both run).
"""

from __future__ import annotations

import os
import sys

from PySide6 import QtCore, QtGui, QtWidgets


def selftest_command() -> list[str]:
    """argv of `spirula --selftest` for this installation: the frozen bundle's own executable,
    or this Python running spirula.engine.cli."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--selftest"]
    return [sys.executable, "-m", "spirula.engine.cli", "--selftest"]


class SelftestDialog(QtWidgets.QDialog):
    """Runs ``command`` (default :func:`selftest_command`) and shows its output as it comes.
    ``finished(passed: bool, verdict: str)`` is emitted at the end."""

    finished_with = QtCore.Signal(bool, str)

    def __init__(self, parent=None, backend: str | None = None, command: list[str] | None = None):
        super().__init__(parent)
        self.setWindowTitle("Spirula Studio self-test")
        self.resize(900, 560)
        self.command = command or selftest_command()
        self.backend = backend
        self.verdict = ""
        self.passed: bool | None = None

        self.status = QtWidgets.QLabel("")
        self.status.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setWordWrap(True)
        self.log = QtWidgets.QPlainTextEdit(readOnly=True)
        self.log.setFont(QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont))
        self.log.setLineWrapMode(QtWidgets.QPlainTextEdit.LineWrapMode.NoWrap)
        self.run_button = QtWidgets.QPushButton("Run again")
        self.run_button.clicked.connect(self.start)
        copy = QtWidgets.QPushButton("Copy report")
        copy.clicked.connect(lambda: QtWidgets.QApplication.clipboard().setText(self.log.toPlainText()))
        close = QtWidgets.QPushButton("Close")
        close.clicked.connect(self.close)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(copy)
        buttons.addStretch(1)
        buttons.addWidget(close)
        lay = QtWidgets.QVBoxLayout(self)
        intro = QtWidgets.QLabel("Creates a GPU device, trains a few hundred steps on the embedded sample, "
                                 "renders and exports a PLY, in a separate process (on software Vulkan: "
                                 "about a minute).")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        lay.addWidget(self.log, 1)
        lay.addWidget(self.status)
        lay.addLayout(buttons)

        self.proc = QtCore.QProcess(self)
        self.proc.setProcessChannelMode(QtCore.QProcess.ProcessChannelMode.MergedChannels)
        self.proc.readyReadStandardOutput.connect(self._read)
        self.proc.finished.connect(self._done)
        self.proc.errorOccurred.connect(self._error)

    def start(self) -> None:
        if self.proc.state() != QtCore.QProcess.ProcessState.NotRunning:
            return
        self.log.clear()
        self.verdict, self.passed = "", None
        self._set_status("Running…", None)
        self.run_button.setEnabled(False)
        env = QtCore.QProcessEnvironment.systemEnvironment()
        env.insert("PYTHONUNBUFFERED", "1")
        if self.backend:
            env.insert("SPIRULA_DEVICE", self.backend)
        if not getattr(sys, "frozen", False):  # spirula.engine.cli from the same tree as this window
            root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            env.insert("PYTHONPATH", os.pathsep.join(p for p in (root, env.value("PYTHONPATH")) if p))
        self.proc.setProcessEnvironment(env)
        self.proc.start(self.command[0], self.command[1:])

    def _read(self) -> None:
        text = bytes(self.proc.readAllStandardOutput()).decode("utf-8", "replace")
        for line in text.splitlines():
            if line.startswith(("PASS", "FAIL")):
                self.verdict = line
        self.log.moveCursor(QtGui.QTextCursor.MoveOperation.End)
        self.log.insertPlainText(text)
        self.log.ensureCursorVisible()

    def _done(self, code: int, status) -> None:
        self._read()
        crashed = status == QtCore.QProcess.ExitStatus.CrashExit
        self.passed = code == 0 and not crashed
        if not self.verdict or crashed:
            self.verdict = ("FAIL: the self-test process crashed" if crashed
                            else f"FAIL: the self-test ended with exit code {code} and no verdict")
        self._set_status(self.verdict, self.passed)
        self.run_button.setEnabled(True)
        self.finished_with.emit(self.passed, self.verdict)

    def _error(self, err) -> None:
        if err == QtCore.QProcess.ProcessError.FailedToStart:
            self.passed = False
            self.verdict = f"FAIL: could not start {' '.join(self.command)}: {self.proc.errorString()}"
            self._set_status(self.verdict, False)
            self.run_button.setEnabled(True)
            self.finished_with.emit(False, self.verdict)

    def _set_status(self, text: str, ok: bool | None) -> None:
        color = {None: "", True: "color: #2e7d32; font-weight: bold;", False: "color: #c62828; font-weight: bold;"}[ok]
        self.status.setStyleSheet(color)
        self.status.setText(text)

    def closeEvent(self, ev) -> None:  # noqa: N802
        if self.proc.state() != QtCore.QProcess.ProcessState.NotRunning:
            self.proc.kill()
            self.proc.waitForFinished(3000)
        super().closeEvent(ev)
