"""The studio's engine thread (engine/studio/session.py is the window's handle on it): one
thread owns the GPU device, routes the window's typed commands to their handlers, trains
in slices of the one step schedule (engine/splat/schedule.py), renders the viewport and
answers through messages (engine/studio/messages.py). Nothing here imports Qt.

Kept import-free: the modules are imported by name (``engine.studio.session``)."""
