"""The `spirula` command (no Qt at import): ``main`` (the parser with every subcommand,
`spirula train`, `spirula gui`, `--selftest`), ``run`` (`spirula run`), ``mesh``
(`spirula mesh`), ``options`` (the options and argument types the subcommands share);
`spirula bench` is spirula/engine/cli/bench/commands.py's, registered by ``main``.

Kept import-free (spirula/engine/cli/bench/commands.py imports ``options``); the entry point is
``spirula.app.launch:main`` (the window as its `gui`); ``python -m spirula.engine.cli`` runs the engine's command
line alone (``__main__``)."""
