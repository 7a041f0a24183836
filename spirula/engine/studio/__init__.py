"""The studio's engine thread (spirula/engine/studio/session.py is the window's handle on it): one
thread owns the GPU device, routes the window's typed commands to their handlers, trains
in slices of the one step schedule (spirula/engine/splat/schedule.py), renders the viewport and
answers through messages (spirula/engine/studio/protocol.py). Nothing here imports Qt.

Kept import-free: the modules are imported by name (``spirula.engine.studio.session``)."""
