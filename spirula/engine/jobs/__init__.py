"""The engine's long jobs, Qt-free and shared by the command line and the studio:
``train`` (`spirula train`: dataset -> trained splat -> PLY, metrics, checkpoints),
``pipeline`` and ``stages`` (`spirula run`: video or photos -> frames -> SfM -> train ->
export, as resumable stages), ``mesh`` (`spirula mesh`: trained splat -> textured mesh),
``selftest`` (`spirula --selftest`).

Kept import-free: the modules are imported by name (``spirula.engine.jobs.train``)."""
