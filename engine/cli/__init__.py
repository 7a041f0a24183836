"""The `spirula` command (no Qt at import): ``main`` (the parser with every subcommand,
`spirula train`, `spirula gui`, `--selftest`), ``run`` (`spirula run`), ``mesh``
(`spirula mesh`), ``options`` (the options and argument types the subcommands share);
`spirula bench` is engine/profile/bench.py's, registered by ``main``.

Kept import-free (engine/profile/bench.py imports ``options``); the entry point is
``engine.cli.main:main`` and ``python -m engine.cli`` runs it (``__main__``)."""
