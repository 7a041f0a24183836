"""The `spirula` command's entry point: the engine's command line (spirula/engine/cli/main.py) with
the studio window as its `gui` (and no-argument) command. It lives with the window so that the
engine never imports the app; PySide6 is imported only when the window is asked for, so the
command line works without the `gui` extra."""

from __future__ import annotations

import sys
from pathlib import Path


def open_window(path: Path | None = None, device: str | None = None) -> int:
    """Open the studio window (spirula.app.startup); exit code 1 with the install hint without PySide6."""
    try:
        from .startup import main as window_main
    except ImportError as e:
        print(f"error: the studio window needs PySide6 and pyqtgraph: pip install 'spirula-studio[gui]' ({e})",
              file=sys.stderr)
        return 1
    return window_main(path, device)


def main(argv: list[str] | None = None) -> int:
    from spirula.engine.cli.main import main as cli_main

    return cli_main(argv, open_window=open_window)


if __name__ == "__main__":
    sys.exit(main())
