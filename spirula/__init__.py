"""Spirula Studio: ``spirula.engine`` (Qt-free: the device, the stages, the jobs, the
studio's engine thread and the ``spirula`` command) beneath ``spirula.app`` (the
PySide6 window). Nothing is imported here."""
