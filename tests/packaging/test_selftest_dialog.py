"""Help > Run self-test: the studio runs `spirula --selftest` in a child process and shows the
report, then PASS or FAIL with the reason."""

import sys

import pytest

from tests.app.conftest import spin


@pytest.fixture(scope="module")
def studio(qapp, tmp_path_factory):
    from spirula.app.startup import create_studio

    app, win, session = create_studio(None, dialogs=False, projects=tmp_path_factory.mktemp("projects"),
                                      splash=False, size=(900, 600))
    yield app, win
    win.shutdown(save=False)
    win.close()


def test_help_menu_runs_the_selftest(studio, monkeypatch):
    app, win = studio
    monkeypatch.setenv("SPIRULA_SELFTEST_STEPS", "5")
    help_menu = next(a.menu() for a in win.menuBar().actions() if a.text() == "&Help")
    action = next(a for a in help_menu.actions() if a.text().startswith("Run self-test"))
    action.trigger()
    dlg = win.selftest_dialog
    assert dlg.isVisible()
    assert spin(app, 180, lambda: dlg.passed is not None), dlg.log.toPlainText()
    text = dlg.log.toPlainText()
    assert dlg.passed and dlg.verdict.startswith("PASS"), text
    assert "adapter" in text and "[ok] train" in text and "[ok] export" in text
    assert dlg.status.text().startswith("PASS") and dlg.run_button.isEnabled()
    dlg.close()


def test_a_failure_shows_the_reason(qapp):
    from spirula.app.selftest_dialog import SelftestDialog

    fake = [sys.executable, "-c", "print('[FAIL] device  0.0 s  no Vulkan'); print('FAIL: device: no Vulkan'); "
                                  "raise SystemExit(1)"]
    dlg = SelftestDialog(command=fake)
    got = []
    dlg.finished_with.connect(lambda ok, verdict: got.append((ok, verdict)))
    dlg.start()
    assert spin(qapp, 30, lambda: got)
    assert got == [(False, "FAIL: device: no Vulkan")] and dlg.status.text() == "FAIL: device: no Vulkan"
    assert "[FAIL] device" in dlg.log.toPlainText()
    dlg.close()


def test_a_command_that_cannot_start_is_a_failure(qapp, tmp_path):
    from spirula.app.selftest_dialog import SelftestDialog

    dlg = SelftestDialog(command=[str(tmp_path / "no-such-spirula"), "--selftest"])
    dlg.start()
    assert spin(qapp, 10, lambda: dlg.passed is not None)
    assert dlg.passed is False and dlg.verdict.startswith("FAIL: could not start")
    dlg.close()


def test_command_is_the_bundle_itself_when_frozen(monkeypatch):
    from spirula.app.selftest_dialog import selftest_command

    assert selftest_command()[1:] == ["-m", "spirula.engine.cli", "--selftest"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert selftest_command() == [sys.executable, "--selftest"]
