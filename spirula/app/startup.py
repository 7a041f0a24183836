"""Start the studio: `spirula` (no arguments) or `spirula gui [PATH]`.

Order matters (shared/GPU.md): the engine thread creates the device and compiles every
kernel behind a splash screen, then the window shows and the viewport's native window
is handed to the engine for its swapchain.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from pathlib import Path

log = logging.getLogger("spirula.app")


def prepare_environment() -> None:
    """Qt settings that must precede QApplication."""
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    # slangpy 0.43.1 makes Vulkan surfaces from X11 handles on Linux: prefer XWayland
    if sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM"):
        if os.environ.get("WAYLAND_DISPLAY") and os.environ.get("DISPLAY"):
            os.environ["QT_QPA_PLATFORM"] = "xcb"


def check_pyside() -> None:
    """Refuse a PySide6 that releases None on every void call (6.12.0 on Python < 3.12):
    it would crash the app a few seconds in with 'none_dealloc'."""
    if sys.version_info >= (3, 12):
        return
    import PySide6
    from PySide6 import QtCore

    pt = QtCore.QPoint()
    before = sys.getrefcount(None)
    for _ in range(64):
        pt.setX(1)
    lost = before - sys.getrefcount(None)
    if lost >= 32:
        check_pyside.compensation = [None] * lost  # hand back the references the probe took
        raise RuntimeError(f"PySide6 {PySide6.__version__} has a reference-count bug on Python "
                           f"{sys.version_info.major}.{sys.version_info.minor} that crashes the studio; "
                           "install another version: pip install 'PySide6-Essentials>=6.6,!=6.12.*'")


def wait_ready(session, app, timeout: float = 600.0, on_wait=None, on_progress=None):
    """Process Qt events until the engine says EngineReady (returned) or Error (raised as
    RuntimeError with its text); ``on_progress(text)`` hears the warm-up's progress."""
    from spirula.engine.studio import protocol as M

    t_end = time.perf_counter() + timeout
    early = []
    while time.perf_counter() < t_end:
        for msg in session.poll():
            if isinstance(msg, M.EngineReady):
                for m in early:  # keep what came before for the window
                    session.events.put(m)
                return msg
            if isinstance(msg, M.Error):
                raise RuntimeError(msg.text)
            if isinstance(msg, M.StageProgress) and msg.stage == "warmup":
                if on_progress is not None:
                    on_progress(f"Starting the GPU engine: {msg.detail} — step {msg.done + 1} of {msg.total}")
                continue
            early.append(msg)
        if not session.alive:
            raise RuntimeError("the engine thread ended during start-up")
        if on_wait is not None:
            on_wait()
        app.processEvents()
        time.sleep(0.01)
    raise RuntimeError(f"the engine did not start within {timeout:.0f} s")


def _splash_message(sp, text: str) -> None:
    """The splash's progress line, wrapped: the kernel-compiling lines are wider than it."""
    from PySide6 import QtCore, QtGui

    flags = (QtCore.Qt.AlignmentFlag.AlignBottom | QtCore.Qt.AlignmentFlag.AlignHCenter).value
    sp.showMessage(text, flags | QtCore.Qt.TextFlag.TextWordWrap.value, QtGui.QColor("white"))


def create_studio(path: str | os.PathLike | None = None, device: str | None = None, dialogs: bool = True,
                  projects: str | os.PathLike | None = None, splash: bool = True, size=(1440, 900)):
    """(app, window, session) with the window shown and the viewport attached; the caller
    runs the event loop (app.exec()) or drives it (tests, screenshots)."""
    prepare_environment()
    from PySide6 import QtCore, QtGui, QtWidgets

    from spirula.engine.studio.session import Session

    from .window import StudioWindow, load_style

    check_pyside()
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    app.setApplicationName("Spirula Studio")
    app.setOrganizationName("Spirula")
    load_style(app)
    sp = None
    if splash:
        pm = QtGui.QPixmap(520, 200)
        pm.fill(QtGui.QColor(24, 25, 29))
        p = QtGui.QPainter(pm)
        p.setPen(QtGui.QColor(255, 170, 60))
        f = p.font()
        f.setPointSize(22)
        f.setBold(True)
        p.setFont(f)
        p.drawText(pm.rect().adjusted(0, -30, 0, 0), QtCore.Qt.AlignmentFlag.AlignCenter, "Spirula Studio")
        p.end()
        sp = QtWidgets.QSplashScreen(pm)
        _splash_message(sp, "Starting the GPU engine and compiling kernels (the first launch takes a while; "
                            "later ones reuse the compiled kernels)…")
        sp.show()
        app.processEvents()
    session = Session(backend=device, projects=projects).start()
    try:
        def show(text: str) -> None:
            if sp is not None:
                _splash_message(sp, text)

        ready = wait_ready(session, app, on_progress=show)
    except RuntimeError as exc:
        if sp is not None:
            sp.close()
        session.close(save=False, timeout=5)
        raise RuntimeError(str(exc)) from None
    win = StudioWindow(session, ready, dialogs=dialogs)
    win.resize(*size)
    win.show()
    if sp is not None:
        sp.finish(win)
    app.processEvents()
    win.attach_viewport()
    if path:
        win.open_paths([str(path)])
    return app, win, session


def install_excepthook(win) -> None:
    """A Python error in a Qt slot or event handler (a GUI bug) becomes an error dialog and a
    log record instead of ending the studio."""
    default = sys.excepthook

    def hook(kind, value, tb):
        if issubclass(kind, (KeyboardInterrupt, SystemExit)):
            return default(kind, value, tb)
        log.error("unexpected error in the window", exc_info=(kind, value, tb))
        frame = traceback.extract_tb(tb)[-1] if tb is not None else None
        try:
            win.error(f"Unexpected error: {kind.__name__}: {value}",
                      f"{frame.filename}:{frame.lineno}" if frame is not None else "")
        except Exception:  # the window itself is broken: the log has it
            default(kind, value, tb)

    sys.excepthook = hook


def main(path: str | os.PathLike | None = None, device: str | None = None) -> int:
    from .logs import setup

    setup(os.environ.get("SPIRULA_LOG", "WARNING"))  # tracebacks to the log file, one line to the terminal
    try:
        app, win, session = create_studio(path, device)
    except RuntimeError as exc:
        from PySide6 import QtWidgets

        app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
        QtWidgets.QMessageBox.critical(None, "Spirula Studio", f"The GPU engine could not start:\n\n{exc}")
        print(f"error: {exc}", file=sys.stderr)
        return 1
    import signal

    install_excepthook(win)

    def close_window(*_):  # Ctrl-C / kill: close like the window's close button (saves a checkpoint)
        win.dialogs = False
        win.close()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, close_window)
        except (ValueError, OSError):  # not the main thread, or not on this platform
            pass
    rc = app.exec()
    if session.alive:
        win.shutdown(save=True)
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
