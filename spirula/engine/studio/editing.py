"""The engine thread's splat edit (spirula/engine/io/splat_edit.py) of the splats on view: the
EditSplats commands (select by box or brush, select all / none, invert, delete, crop, undo,
redo), the view of the edited model (the kept splats uploaded, the selected ones drawn in
one flat colour) and the crop box drawn in the viewport with its face handles (spirula/engine/studio/
bounds_box.py, what the window drags: "handles" commands draw the box being dragged, the
release is one "crop" command, one undoable step).

Only a splat file's scene (scenes.PlyScene: a file or a project's splats viewed) is
editable; a training changes its splats every step, a mesh is no splats. A training that
has ended becomes its splat.ply's scene on the first edit command. The edit of a
project's splat.ply is loaded when the scene opens (its ``edit.json``: a changed PLY's edit
is a warning and a fresh edit) and saved after every command; the scene's export writes the
edited splats. Undo / redo history lasts as long as the scene.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..io.ply_points import SH_C0
from ..io.splat_edit import CropBox, EditFileError, SplatEdit, edit_file_for, file_sha256, load_edit, select_screen
from . import protocol as M

SELECTED_RGB = (1.0, 0.55, 0.1)   # the colour the selected splats are drawn in (linear 0..1)
CROP_RGB = (80, 230, 120)         # the crop box's edges
SELECTED_RGB_8 = tuple(int(round(255 * c)) for c in SELECTED_RGB)  # the selection's outline


class Editing:
    """The edit of the engine's scene (``edit`` None when the scene is not editable)."""

    def __init__(self, engine):
        self.e = engine
        self.scene = None
        self.edit: SplatEdit | None = None
        self.rows: np.ndarray | None = None   # the scene's packed rows, all N
        self.edit_file: Path | None = None    # where the edit is saved (a project's), else None
        self.outline: tuple | None = None     # (segments, colours) of the selection being dragged
        self.dragged: CropBox | None = None   # the crop box while a face of it is dragged (drawn instead)
        self.highlight = -1                   # the crop box's face whose handle is under the mouse

    # --- scenes ------------------------------------------------------------------------------
    def scene_changed(self, scene) -> None:
        """A new scene is on show: its saved edit (a project's splat file) applied to the view."""
        from .loading import trained_project
        from .scenes import PlyScene

        self.scene, self.edit, self.rows, self.edit_file = scene, None, None, None
        self.dragged, self.highlight = None, -1
        if not isinstance(scene, PlyScene) or scene.n == 0:
            self.e.emit(M.EditState(False))
            return
        path = Path(scene.path)
        if trained_project(path) is not None and path.is_file():
            self.edit_file = edit_file_for(path)
        self.edit = SplatEdit(scene.g.means, name=path.name)
        scene.edit = self.edit
        if self.edit_file is not None and self.edit_file.is_file():
            try:
                self.edit = scene.edit = load_edit(self.edit_file, scene.g.means, file_sha256(path), path)
            except EditFileError as exc:
                self.e.emit(M.Warning(f"{exc}; the splats are shown unedited (a new edit replaces that file)"))
        if not self.edit.is_empty():
            self._show()
        self._report("" if self.edit.is_empty() else f"edit {self.edit_file}: {self.edit.summary()}", saved=False)

    # --- commands ----------------------------------------------------------------------------
    def _from_finished_training(self) -> bool:
        """A training that has ended (its splat.ply written) becomes its splat file's scene,
        to edit: True when it did."""
        from ..io.formats import read_any
        from .scenes import PlyScene, TrainingScene

        sc = self.e.scene
        if not isinstance(sc, TrainingScene) or not sc.finished or self.e.training.running:
            return False
        ply = Path(sc.project) / "splat.ply"
        if not ply.is_file():
            return False
        self.e.set_scene(PlyScene(self.e.gpu, ply, read_any(ply, warn=False)))  # scene_changed: its edit
        return self.edit is not None

    def command(self, cmd: M.EditSplats) -> None:
        if self.edit is None and cmd.op in ("outline", "handles"):
            return
        if self.edit is None:
            self._from_finished_training()
        e = self.edit
        if e is None:
            self.e.emit(M.Warning("nothing to edit: open a project's splats or a splat file (a training or a mesh "
                                  "cannot be edited)"))
            return
        if cmd.op == "outline":
            self.outline = outline_segments(cmd)
            self.e.viewport.edit_changed()
            return
        if cmd.op == "handles":
            self.dragged = crop_box(cmd.crop) if cmd.crop else None
            self.highlight = int(cmd.highlight) if 0 <= cmd.highlight < 6 else -1
            self.e.viewport.edit_changed()
            return
        self.outline, self.dragged = None, None
        if cmd.op == "select":
            mask = select_screen(e.means, cmd.w2c, cmd.fov_y_deg, cmd.width, cmd.height,
                                 rect=cmd.rect if len(cmd.rect) == 4 else None,
                                 brush=np.asarray(cmd.brush, np.float64).reshape(-1, 2) if cmd.brush else None,
                                 radius=cmd.radius)
            label = e.select(mask, cmd.mode)
        elif cmd.op == "crop":
            label = e.set_crop(crop_box(cmd.crop) if cmd.crop else None)
        elif cmd.op in ("select_all", "select_none", "invert", "undo", "redo"):
            label = getattr(e, cmd.op)()
            if label is not None and cmd.op in ("undo", "redo"):
                label = f"{cmd.op} {label}"
        elif cmd.op == "delete":
            label = e.delete_selected()
        else:
            raise ValueError(f"unknown edit command {cmd.op!r}")
        if label is None:
            self._report("")
            return
        self._show()
        saved = cmd.op not in ("select", "select_all", "select_none", "invert")  # what the file holds changed
        if saved and self.edit_file is not None:
            e.sha256 = e.sha256 or file_sha256(self.scene.path)
            e.save(self.edit_file)
        self._report(label, saved=saved)

    def _report(self, label: str, saved: bool = False) -> None:
        e = self.edit
        crop, box = (), ()
        if e.crop is not None:
            lo, hi = e.crop.bounds()
            crop = tuple(float(v) for v in (*lo, *hi))
            box = crop_numbers(e.crop)
        self.e.emit(M.EditState(True, label, e._done[-1].label if e._done else "",
                                e._undone[-1].label if e._undone else "", int(e.selected.sum()), int(e.keep().sum()),
                                e.n, crop, str(self.edit_file) if saved and self.edit_file is not None else "", box))
        self.e.viewport.edit_changed()

    # --- the view ----------------------------------------------------------------------------
    def _show(self) -> None:
        """Upload the kept splats (the selected in SELECTED_RGB) as the scene's view."""
        from ..splat.param_layout import OFF_SH, pack

        sc, e = self.scene, self.edit
        if self.rows is None:
            g = sc.g
            self.rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, sc.degree)
        keep = e.keep()
        rows = self.rows[keep]
        sel = e.selected[keep]
        if sel.any():
            rows[sel, OFF_SH:OFF_SH + 3] = (np.asarray(SELECTED_RGB, np.float32) - 0.5) / SH_C0
            rows[sel, OFF_SH + 3:] = 0.0   # flat: no view-dependent colour
        gpu = self.e.gpu
        gpu.wait_idle()
        gpu.forget_bindings()  # kernels' cached arguments would keep the old buffer
        sc.n = len(rows)
        sc.params = gpu.upload(np.ascontiguousarray(rows), "splat.params") if len(rows) else None
        self.e.viewport.model_dirty = True

    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """The crop box's 12 edges in CROP_RGB and its 6 face handles (the box being dragged
        instead while a face is: overlays.box_segments): ([30, 6] float32 world endpoints,
        [30] uint32 BGRA); none without a crop."""
        from .bounds_box import crop_to_box
        from .overlays import box_segments

        segs, cols = np.zeros((0, 6), np.float32), np.zeros(0, np.uint32)
        box = self.dragged or (self.edit.crop if self.edit is not None else None)
        if box is not None:
            bounds, frame = crop_to_box(crop_numbers(box))
            segs, cols = box_segments(bounds, self.highlight, frame, CROP_RGB)
        if self.outline is not None:
            segs, cols = np.concatenate([segs, self.outline[0]]), np.concatenate([cols, self.outline[1]])
        return segs, cols


def crop_box(numbers) -> CropBox:
    """The CropBox of an EditSplats ``crop``: 6 numbers (x0, y0, z0, x1, y1, z1, axis-aligned)
    or 15 (centre, half extents, rotation row-major whose columns are the axes); ValueError
    for another count, EditFileError for a rotation that is not one."""
    if len(numbers) == 6:
        return CropBox.from_bounds(numbers[:3], numbers[3:])
    if len(numbers) == 15:
        return CropBox.from_json({"center": numbers[:3], "half": numbers[3:6],
                                  "rotation": np.reshape(numbers[6:], (3, 3)).tolist()}, "the crop box")
    raise ValueError(f"a crop box is 6 or 15 numbers, not {len(numbers)}")


def crop_numbers(box: CropBox) -> tuple:
    """The 15 numbers of ``box`` (EditState.crop_box, EditSplats.crop)."""
    return tuple(float(v) for v in (*box.center, *box.half, *np.ravel(box.rotation)))


def outline_segments(cmd: M.EditSplats) -> tuple[np.ndarray, np.ndarray] | None:
    """The outline of a selection being dragged (its rectangle, or its brush stroke's path)
    as world segments 1 unit in front of the command's camera, where they project onto the
    screen points: ([S, 6] float32, [S] uint32 BGRA); None when it has no shape."""
    from .overlays import _bgra

    if len(cmd.rect) == 4:
        x0, y0, x1, y1 = cmd.rect
        pts = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]], np.float64)
    elif len(cmd.brush) >= 4:
        pts = np.asarray(cmd.brush, np.float64).reshape(-1, 2)
    else:
        return None
    import math

    w2c = np.asarray(cmd.w2c, np.float64).reshape(4, 4)
    f = 0.5 * cmd.height / math.tan(math.radians(cmd.fov_y_deg) / 2)
    cam = np.c_[(pts[:, 0] - cmd.width / 2) / f, (pts[:, 1] - cmd.height / 2) / f, np.ones(len(pts))]
    world = (cam - w2c[:3, 3]) @ w2c[:3, :3]   # R^T (x - t), row-wise
    segs = np.concatenate([world[:-1], world[1:]], axis=1).astype(np.float32)
    return segs, np.full(len(segs), _bgra(SELECTED_RGB_8), np.uint32)
