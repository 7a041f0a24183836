"""`spirula` and `spirula gui [path]` open the studio (app.main.main), imported lazily."""

from pathlib import Path

import pytest

from engine.cli import main as cli


@pytest.fixture
def opened(monkeypatch):
    import app.main

    calls = []
    monkeypatch.setattr(app.main, "main", lambda path=None, device=None: calls.append((path, device)) or 0)
    monkeypatch.setenv("DISPLAY", ":99")
    return calls


def test_no_arguments_opens_the_window(opened):
    assert cli.main([]) == 0
    assert opened == [(None, None)]


def test_gui_with_a_path_and_device(opened, tmp_path):
    assert cli.main(["gui", str(tmp_path / "a.ply"), "--device", "vulkan"]) == 0
    assert opened == [(tmp_path / "a.ply", "vulkan")] and isinstance(opened[0][0], Path)


def test_no_display_is_a_clear_error(monkeypatch, capsys):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(cli.sys, "platform", "linux")
    assert cli.main(["gui"]) == 2
    assert "no display" in capsys.readouterr().err
