"""The boxes the viewport draws with face handles (spirula/app/bounds_drag.py drags them): the mesh
stage's box (the Export panel's fields, along the proposed box's axes while the stage waits
for it: SetBounds) and the splat edit's crop box (its "handles" EditSplats; spirula/app/edit_tools.py
sends the drag's crop). Each box is drawn again when it changes or when one of its handles
lights up under the mouse or goes dark."""

from __future__ import annotations

from spirula.engine.studio import protocol as M


class BoxHandles:
    """What the engine is told to draw of the boxes of ``window`` (spirula/app/window.py MainWindow)."""

    def __init__(self, window):
        self.w = window
        self.lit = (-1, -1)   # the mesh box's and the crop box's highlighted faces, as last sent
        window.export.bounds_changed.connect(self.mesh_box)
        window.controller.hover_changed.connect(self.hover_changed)

    def mesh_box(self, bounds: tuple) -> None:
        """The mesh box drawn by the engine (its handle under the mouse highlighted); the
        controller drags its handles."""
        c = self.w.controller
        c.frame = self.w.export.box_frame() if bounds else ()
        c.bounds = bounds
        self.lit = (c.active_face if bounds else -1, self.lit[1])
        self.w.session.send(M.SetBounds(bounds, self.lit[0], c.frame))

    def hover_changed(self, _face: int = -1) -> None:
        """A handle lit up or went dark: the box it belongs to drawn again."""
        c = self.w.controller
        if c.active_face != self.lit[0]:
            self.mesh_box(c.bounds)
        if c.crop_face != self.lit[1]:
            self.lit = (self.lit[0], c.crop_face)
            self.w.session.send(M.EditSplats("handles", highlight=c.crop_face))
