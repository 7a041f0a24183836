"""`spirula` and `spirula gui [path]` open the studio (spirula.app.startup.main), imported lazily by the
command's entry point (spirula/app/launch.py); the engine's own entry has no window."""

from pathlib import Path

import pytest

from spirula.app import launch
from spirula.engine.cli import main as cli


@pytest.fixture
def opened(monkeypatch):
    import spirula.app.startup

    calls = []
    monkeypatch.setattr(spirula.app.startup, "main", lambda path=None, device=None: calls.append((path, device)) or 0)
    monkeypatch.setenv("DISPLAY", ":99")
    return calls


def test_no_arguments_opens_the_window(opened):
    assert launch.main([]) == 0
    assert opened == [(None, None)]


def test_gui_with_a_path_and_device(opened, tmp_path):
    assert launch.main(["gui", str(tmp_path / "a.ply"), "--device", "vulkan"]) == 0
    assert opened == [(tmp_path / "a.ply", "vulkan")] and isinstance(opened[0][0], Path)


def test_no_display_is_a_clear_error(monkeypatch, capsys):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(cli.sys, "platform", "linux")
    assert launch.main(["gui"]) == 2
    assert "no display" in capsys.readouterr().err


def test_the_engine_entry_has_no_window(opened, capsys):
    """`python -m spirula.engine.cli` (engine only) says where the window is instead of importing the app."""
    assert cli.main(["gui"]) == 2
    assert "`spirula` command" in capsys.readouterr().err and opened == []
