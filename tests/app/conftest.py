"""Fixtures of the studio tests: a private Xvfb display, one QApplication, a tiny dataset.

Tests that need Qt skip when PySide6 / pyqtgraph are not installed; tests that need a real
X11 window (the Vulkan swapchain) skip when Xvfb is missing."""

from __future__ import annotations

import os
import time

import pytest

from .scene import write_scene
from ..patience import patient


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    return write_scene(tmp_path_factory.mktemp("tiny") / "ring")


@pytest.fixture(scope="session")
def xvfb():
    from spirula.app.headless import Xvfb

    if not Xvfb.available():
        pytest.skip("Xvfb is not installed (Debian: apt-get install xvfb)")
    x = Xvfb(1400, 1000).start()
    yield x
    x.stop()


@pytest.fixture(scope="session")
def qapp(xvfb, tmp_path_factory):
    pytest.importorskip("PySide6", reason="PySide6 is not installed (pip install '.[gui]')")
    pytest.importorskip("pyqtgraph", reason="pyqtgraph is not installed (pip install '.[gui]')")
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    from spirula.app.startup import check_pyside, prepare_environment

    prepare_environment()
    try:
        check_pyside()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    from PySide6 import QtCore, QtWidgets

    settings = str(tmp_path_factory.mktemp("qsettings"))  # the studio's memory: never the user's
    for fmt in (QtCore.QSettings.Format.NativeFormat, QtCore.QSettings.Format.IniFormat):
        QtCore.QSettings.setPath(fmt, QtCore.QSettings.Scope.UserScope, settings)
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(["spirula-tests"])
    yield app
    # the X connection must close before the private X server stops (Qt exits on a lost display);
    # in a full-suite run the C++ application may already be gone by the session's end
    from shiboken6 import isValid

    if isValid(app):
        app.processEvents()
        app.shutdown()


@pytest.fixture(scope="module")
def studio(qapp, tmp_path_factory):
    """(app, window) of a studio on a private projects folder, shared by a module's tests
    (tests/app/studio_helpers.py open_studio: the window's commands in ``win.sent``)."""
    from .studio_helpers import open_studio

    app, win = open_studio(tmp_path_factory.mktemp("projects"))
    yield app, win
    win.shutdown(save=False)
    win.close()


def spin(app, seconds: float, until=None, step_ms: int = 10) -> bool:
    """Run the Qt event loop for ``seconds``, or until ``until()`` is true: then ``seconds``
    is a deadline, scaled by tests/patience.py's factor (a loaded machine is slower)."""
    from PySide6 import QtCore

    t_end = time.perf_counter() + (patient(seconds) if until is not None else seconds)
    while time.perf_counter() < t_end:
        app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, step_ms)
        if until is not None and until():
            return True
        time.sleep(0.002)
    return until is None or bool(until())
