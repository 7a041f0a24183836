"""Entry point of the frozen bundle: the same `spirula` command as the pip-installed one
(spirula/engine/cli/main.py), with Python and every library inside the bundle.

On Windows and macOS the bundle also has a windowed launcher, "Spirula Studio" (no console):
launched with nothing or with a file (Explorer's / Finder's "Open with", which PyInstaller's
argv emulation turns into an argument on macOS) it opens the studio, i.e. `spirula gui [file]`.
"""

import multiprocessing
import os
import sys

GUI_LAUNCHERS = ("Spirula Studio",)
COMMANDS = ("train", "run", "bench", "mesh", "gui")


def launcher_argv(executable: str, args: list[str]) -> list[str]:
    """The command line for spirula.app.launch.main: the windowed launcher means `gui`."""
    args = [a for a in args if not a.startswith("-psn_")]  # old macOS Finder process serial numbers
    name = os.path.splitext(executable.replace("\\", "/").rsplit("/", 1)[-1])[0]
    if name in GUI_LAUNCHERS and (not args or (args[0] not in COMMANDS and not args[0].startswith("-"))):
        return ["gui", *args]
    return args


if __name__ == "__main__":
    multiprocessing.freeze_support()
    for stream in ("stdout", "stderr"):  # a windowed launcher has none: printing must not fail
        if getattr(sys, stream) is None:
            setattr(sys, stream, open(os.devnull, "w", encoding="utf-8"))
    from spirula.app.launch import main

    sys.exit(main(launcher_argv(sys.executable, sys.argv[1:])))
