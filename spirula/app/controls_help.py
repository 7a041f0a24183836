"""Help > Controls: the viewport's mouse and keyboard controls, as one text (the window shows it)."""

CONTROLS = (
    "Left drag: orbit · Right / middle drag or Shift+drag: pan · Wheel: zoom\n"
    "Wheel zooms towards the point under the cursor · Alt+drag: orbit about it\n"
    "W A S D: fly · Q / E: down / up · F: frame the subject · Shift+F: frame all · Home: start view\n"
    "Click a camera frustum (or double-click a thumbnail) to look through it;\n"
    "then 2 / 3 show its ground truth / error image.\n"
    "Mesh box and crop box: a handle lights up under the mouse; drag it to move that face.\n"
    "Edit menu (a splat file or a project's splats): B box select, R brush select (Shift adds,\n"
    "Ctrl removes), Delete, Ctrl+I invert, C crop box, Ctrl+Z / Ctrl+Shift+Z undo / redo.\n"
    "A mesh: M switches to the splats it was made from; the toolbar sets its shading.")
