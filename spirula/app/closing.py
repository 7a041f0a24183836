"""Closing the studio window without losing anything (part of StudioWindow, spirula/app/window.py).

Closing while training asks (Save and quit, Quit without saving, Cancel); "Save and quit"
has the engine stop after its step and write a checkpoint while the window shows that it
is saving, and closes when the engine says CheckpointSaved(stopped=True); an Error keeps
the window open. Every way out stops the engine before the native window goes."""

from __future__ import annotations

import time

from PySide6 import QtCore, QtGui, QtWidgets

from spirula.engine.studio import protocol as M


class Closing:
    """StudioWindow's close flow (a mixin: it uses the window's session, training panel,
    status bar, timers and dialogs flag)."""

    def init_closing(self) -> None:
        self.closing = False
        self.saving_to_close = False    # "Save and quit" asked: closes on CheckpointSaved(stopped=True)
        self.save_progress: QtWidgets.QProgressDialog | None = None
        self.close_box: QtWidgets.QMessageBox | None = None  # the close question while it is open

    def closeEvent(self, ev: QtGui.QCloseEvent) -> None:  # noqa: N802
        if self.closing:
            ev.accept()
            return
        if self.saving_to_close:  # already saving: it closes once the checkpoint is on disk
            ev.ignore()
            return
        answer = "save"
        if self._training_under_way():
            answer = self.ask_close() if self.dialogs else "save"
            if answer == "cancel":
                ev.ignore()
                return
            if answer == "save" and self._training_under_way():
                ev.ignore()
                self._save_then_close()
                return
        self.closing = True
        self.statusBar().showMessage("Closing…")
        self.shutdown(save=answer == "save")
        ev.accept()

    def _training_under_way(self) -> bool:
        return self.job_state in ("running", "paused")

    def ask_close(self) -> str:
        """'save', 'discard' or 'cancel'. A modal question; the engine messages keep coming
        (the event loop runs while it is open)."""
        B = QtWidgets.QMessageBox
        step = self.training.progress.value()
        box = B(B.Icon.Question, "Spirula Studio",
                f"Training is under way (step {step:,} of {self.training.total:,}). Save a checkpoint in the "
                "project folder before quitting? Opening the project again continues from it.", B.StandardButton.NoButton,
                self)
        box.setObjectName("close-question")
        save = box.addButton("Save and quit", B.ButtonRole.AcceptRole)
        discard = box.addButton("Quit without saving", B.ButtonRole.DestructiveRole)
        box.addButton(B.StandardButton.Cancel)
        box.setDefaultButton(save)
        self.close_box = box
        try:
            box.exec()
        finally:
            self.close_box = None
        clicked = box.clickedButton()
        box.deleteLater()
        return "save" if clicked is save else "discard" if clicked is discard else "cancel"

    def _save_then_close(self) -> None:
        """Stop after the current step and save (the engine thread does it); show that it is
        saving; CheckpointSaved closes the window, an Error keeps it open."""
        self.saving_to_close = True
        self.session.send(M.Cancel(save=True))
        p = QtWidgets.QProgressDialog("Saving a checkpoint of the training, then closing…", "", 0, 0, self)
        p.setObjectName("saving")
        p.setWindowTitle("Spirula Studio")
        p.setCancelButton(None)
        p.setWindowModality(QtCore.Qt.WindowModality.WindowModal)
        p.setMinimumDuration(0)
        p.setAutoClose(False)
        p.setAutoReset(False)
        p.show()
        self.save_progress = p
        self.statusBar().showMessage("Saving a checkpoint…")

    def _hide_save_progress(self) -> None:
        self.saving_to_close = False
        if self.save_progress is not None:
            self.save_progress.close()
            self.save_progress.deleteLater()
            self.save_progress = None

    def _close_after_save(self) -> None:
        if not self.saving_to_close:
            return
        self._hide_save_progress()
        self.closing = True
        self.shutdown(save=False)  # the training has stopped and saved: this is quick
        self.close()

    def _abort_close(self) -> None:
        self._hide_save_progress()
        self.statusBar().showMessage("Not closed: the checkpoint could not be saved", 0)

    def shutdown(self, save: bool = True, timeout: float = 120.0) -> bool:
        """Stop the engine (it saves a checkpoint when asked) before the native window goes:
        the swapchain must not outlive it. The only place the Qt thread waits for the engine."""
        self.timer.stop()
        self.plot_timer.stop()
        s = self.session
        if not s.alive:
            return True
        s.send(M.Shutdown(save=save))
        t_end = time.perf_counter() + timeout
        while s.alive and time.perf_counter() < t_end:
            QtWidgets.QApplication.processEvents(QtCore.QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents, 50)
            s.thread.join(0.05)
        for msg in s.poll():
            self.messages.append(msg)
            if isinstance(msg, M.Saved):
                self.export.on_saved(msg)
        return not s.alive
