"""Editing a splat model before export: a crop box and deleted splats, as an undoable list
of commands, saved beside the project as a small JSON file and applied to every export
(spirula/engine/io/export_command.py, the studio's ExportPly) and to the mesh stage's input
(spirula/engine/jobs/mesh.py load_project).

Conventions
-----------
- The edit applies to one splat file's Gaussians as :func:`spirula.engine.io.formats.read_any`
  reads them (a PLY's invalid records dropped on reading, deterministically), index ``i``
  being the ``i``-th Gaussian read. The file is identified by the SHA-256 of its bytes and
  its Gaussian count; an edit applied to any other file is refused in one line
  (:class:`EditFileError`), never applied to indices that no longer mean the same splats.
- A splat is kept when it is not deleted and its centre (``means[i]``, world units) lies in
  the crop box (boundary included). The crop box is oriented: a centre [3], half extents
  [3] (>= 0) and a rotation [3, 3] whose columns are the box's axes in world coordinates
  (identity: axis-aligned, :meth:`CropBox.from_bounds`).
- Screen-space selections (:func:`select_screen`) use the studio's free camera: ``w2c``
  [4, 4] world -> camera, OpenCV axes (x right, y down, z forward), a pinhole of vertical
  field of view ``fov_y_deg`` centred in a ``width`` x ``height`` pixel view (the same
  camera as spirula/engine/studio/viewer.py's ``view_row``). Only splats in front of the camera
  (z > 0) are selected, whatever hides them.
- Commands: select (set / add / remove), select all / none, invert the selection, delete
  the selection, set or clear the crop. Each is stored as its difference (the flipped or
  deleted indices, the crop before and after), so undo / redo cost what the change
  touched, not N. The selection only ever holds splats that are kept.

The file (``<project>/edit.json``; a `spirula run` project's root, not train/)::

    {"version": 1, "ply": {"sha256": "<hex>", "count": N, "name": "train/splat.ply"},
     "crop": null | {"center": [x, y, z], "half": [hx, hy, hz], "rotation": [[...], [...], [...]]},
     "deleted": [[start, stop], ...]}      # sorted, disjoint half-open index ranges

Errors: :class:`EditFileError` (a SpirulaError) naming the file: unreadable JSON, a field
of the wrong type or range, or a splat file other than the one the edit was made for.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from ..fileio import open_atomic

__all__ = ["EDIT_FILE", "CropBox", "EditFileError", "SplatEdit", "file_sha256", "select_screen", "edit_file_for",
           "load_edit", "apply_saved_edit"]

EDIT_FILE = "edit.json"
VERSION = 1


class EditFileError(SpirulaError):
    """An edit file that cannot be read, or that was made for another splat file."""


@dataclass(frozen=True)
class CropBox:
    """An oriented box in world units: ``center`` [3], ``half`` [3] extents >= 0,
    ``rotation`` [3, 3] (columns: the box's unit axes in world coordinates). float64."""

    center: tuple
    half: tuple
    rotation: tuple = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))

    @classmethod
    def from_bounds(cls, lo, hi) -> CropBox:
        """The axis-aligned box from corner ``lo`` [3] to ``hi`` [3] (either order per axis)."""
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        a, b = np.minimum(lo, hi), np.maximum(lo, hi)
        return cls(tuple((a + b) / 2), tuple((b - a) / 2))

    def contains(self, points: np.ndarray) -> np.ndarray:
        """[N] bool: which of ``points`` [N, 3] lie inside the box or on its surface."""
        p = np.asarray(points, np.float64).reshape(-1, 3) - np.asarray(self.center)
        local = p @ np.asarray(self.rotation)  # coordinates along the box axes (columns)
        return np.all(np.abs(local) <= np.asarray(self.half) * (1 + 1e-9) + 1e-12, axis=1)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lo [3], hi [3]): the axis-aligned bounds of the box's corners."""
        r, h = np.asarray(self.rotation), np.asarray(self.half)
        ext = np.abs(r) @ h
        c = np.asarray(self.center)
        return c - ext, c + ext

    def corners(self) -> np.ndarray:
        """[8, 3] world corners, corner k taking +half on axis i when bit i of k is set."""
        signs = np.array([[1.0 if (k >> i) & 1 else -1.0 for i in range(3)] for k in range(8)])
        return np.asarray(self.center) + (signs * np.asarray(self.half)) @ np.asarray(self.rotation).T

    def to_json(self) -> dict:
        return {"center": [float(v) for v in self.center], "half": [float(v) for v in self.half],
                "rotation": [[float(v) for v in row] for row in self.rotation]}

    @classmethod
    def from_json(cls, d, where: str) -> CropBox:
        def vec(key, shape):
            try:
                a = np.asarray(d[key], np.float64)
            except (KeyError, TypeError, ValueError):
                raise EditFileError(f"{where}: crop '{key}' is missing or not numbers") from None
            if a.shape != shape or not np.all(np.isfinite(a)):
                raise EditFileError(f"{where}: crop '{key}' must be {'x'.join(map(str, shape))} finite numbers")
            return a

        if not isinstance(d, dict):
            raise EditFileError(f"{where}: 'crop' must be null or an object with center, half and rotation")
        c, h = vec("center", (3,)), vec("half", (3,))
        r = vec("rotation", (3, 3)) if "rotation" in d else np.eye(3)
        if np.any(h < 0):
            raise EditFileError(f"{where}: crop 'half' extents must be >= 0, not {h.tolist()}")
        if not np.allclose(r.T @ r, np.eye(3), atol=1e-4):
            raise EditFileError(f"{where}: crop 'rotation' is not a rotation (its columns are not orthonormal)")
        return cls(tuple(c), tuple(h), tuple(map(tuple, r)))


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of the bytes of ``path`` (a SOG folder: of its meta.json and images, by name)."""
    path = Path(path)
    if not path.is_dir():
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    h = hashlib.sha256()
    for p in sorted(p for p in path.iterdir() if p.is_file()):
        h.update(p.name.encode() + b"\0" + file_sha256(p).encode())
    return h.hexdigest()


def select_screen(means: np.ndarray, w2c, fov_y_deg: float, width: float, height: float, *,
                  rect=None, brush=None, radius: float = 0.0) -> np.ndarray:
    """[N] bool: the splats whose centres ``means`` [N, 3] project inside a screen shape of
    a ``width`` x ``height`` view (pixels; the camera of the module docstring): ``rect``
    (x0, y0, x1, y1), corners in either order, or ``brush`` [K, 2] pixel positions of a
    stroke painted with a disc of ``radius`` pixels (its segments swept, not only the
    points). Vectorised over the splats; the loop is over the stroke's K segments."""
    w2c = np.asarray(w2c, np.float64).reshape(4, 4)
    means = np.asarray(means).reshape(-1, 3)
    # camera coordinates relative to the camera centre, in float32 (pixel precision is plenty)
    eye = -w2c[:3, :3].T @ w2c[:3, 3]
    p = (means - eye.astype(means.dtype)).astype(np.float32, copy=False) @ w2c[:3, :3].T.astype(np.float32)
    z = p[:, 2]
    front = z > 1e-9
    f = 0.5 * float(height) / math.tan(math.radians(float(fov_y_deg)) / 2)
    zs = np.where(front, z, np.float32(1.0))
    u = p[:, 0] * (f / zs) + np.float32(width / 2)
    v = p[:, 1] * (f / zs) + np.float32(height / 2)
    if rect is not None:
        x0, y0, x1, y1 = (float(t) for t in rect)
        x0, x1 = min(x0, x1), max(x0, x1)
        y0, y1 = min(y0, y1), max(y0, y1)
        return front & (u >= x0) & (u <= x1) & (v >= y0) & (v <= y1)
    if brush is None:
        raise ValueError("select_screen needs rect or brush")
    pts = np.asarray(brush, np.float64).reshape(-1, 2)
    r = float(radius)
    lo, hi = pts.min(axis=0) - r, pts.max(axis=0) + r
    cand = np.flatnonzero(front & (u >= lo[0]) & (u <= hi[0]) & (v >= lo[1]) & (v <= hi[1]))  # the stroke's box
    order = np.argsort(u[cand], kind="stable")  # by screen x: each segment looks at its own columns only
    cand = cand[order]
    cu, cv = u[cand].astype(np.float64), v[cand].astype(np.float64)
    hit = np.zeros(len(cand), bool)
    segs = [(pts[0], pts[0])] if len(pts) == 1 else list(zip(pts[:-1], pts[1:]))
    for a, b in segs:
        i0 = np.searchsorted(cu, min(a[0], b[0]) - r, side="left")
        i1 = np.searchsorted(cu, max(a[0], b[0]) + r, side="right")
        su, sv = cu[i0:i1], cv[i0:i1]
        d = b - a
        dd = float(d @ d)
        t = np.clip(((su - a[0]) * d[0] + (sv - a[1]) * d[1]) / dd, 0.0, 1.0) if dd > 0 else 0.0
        hit[i0:i1] |= (su - a[0] - t * d[0]) ** 2 + (sv - a[1] - t * d[1]) ** 2 <= r * r
    out = np.zeros(len(means), bool)
    out[cand[hit]] = True
    return out


@dataclass
class _Command:
    label: str
    flip: np.ndarray | None = None     # selection indices toggled
    delete: np.ndarray | None = None   # indices deleted (were selected and kept)
    crop: tuple | None = None          # (before, after) CropBox or None


@dataclass
class SplatEdit:
    """The edit of one splat model of ``len(means)`` Gaussians (``means`` [N, 3] world
    centres, kept by reference, not copied). ``sha256`` / ``count`` / ``name`` identify the
    file it applies to (see the module docstring). State: ``deleted`` and ``selected`` [N]
    bool, ``crop`` (CropBox or None); history: :meth:`undo` / :meth:`redo`."""

    means: np.ndarray
    sha256: str = ""
    name: str = ""
    crop: CropBox | None = None
    deleted: np.ndarray = field(default=None)  # type: ignore[assignment]
    selected: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        n = len(self.means)
        if self.deleted is None:
            self.deleted = np.zeros(n, bool)
        if self.selected is None:
            self.selected = np.zeros(n, bool)
        self._done: list[_Command] = []
        self._undone: list[_Command] = []
        self._in_crop: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.means)

    # --- state -------------------------------------------------------------------------------
    def in_crop(self) -> np.ndarray:
        if self._in_crop is None:
            self._in_crop = self.crop.contains(self.means) if self.crop is not None else np.ones(self.n, bool)
        return self._in_crop

    def keep(self) -> np.ndarray:
        """[N] bool: the splats an export writes (not deleted, centre in the crop box)."""
        return ~self.deleted & self.in_crop()

    def is_empty(self) -> bool:
        """True when the edit removes nothing (no crop, nothing deleted)."""
        return self.crop is None and not self.deleted.any()

    def summary(self) -> str:
        """One line: what the edit removes, e.g. 'crop box, 1,204 deleted: 93,412 of 95,000 kept'."""
        parts = (["crop box"] if self.crop is not None else []) + (
            [f"{int(self.deleted.sum()):,} deleted"] if self.deleted.any() else [])
        return f"{', '.join(parts) or 'nothing removed'}: {int(self.keep().sum()):,} of {self.n:,} kept"

    def apply(self, g):
        """``g`` (a GaussianPly of this edit's N Gaussians) less the removed ones."""
        if len(g) != self.n:
            raise EditFileError(f"the edit {self.name or ''} is for {self.n:,} Gaussians, not {len(g):,}")
        return g if self.is_empty() else g.subset(self.keep())

    # --- commands ----------------------------------------------------------------------------
    def _push(self, cmd: _Command) -> str:
        self._do(cmd)
        self._done.append(cmd)
        self._undone.clear()
        return cmd.label

    def _do(self, cmd: _Command, undo: bool = False) -> None:
        if cmd.flip is not None:
            self.selected[cmd.flip] ^= True
        if cmd.delete is not None:
            self.deleted[cmd.delete] = not undo
            self.selected[cmd.delete] = undo
        if cmd.crop is not None:
            self.crop = cmd.crop[0] if undo else cmd.crop[1]
            self._in_crop = None

    def _select(self, new: np.ndarray, label: str) -> str | None:
        flip = np.flatnonzero(new != self.selected)
        if not len(flip):
            return None
        return self._push(_Command(label, flip=flip))

    def select(self, mask: np.ndarray, mode: str = "set") -> str | None:
        """Select the kept splats of ``mask`` [N] bool: ``mode`` "set" (replace the
        selection), "add" or "remove". Returns the command's label, None when nothing changed."""
        mask = np.asarray(mask, bool) & self.keep()
        new = {"set": mask, "add": self.selected | mask, "remove": self.selected & ~mask}[mode]
        return self._select(new, {"set": "select", "add": "add to selection", "remove": "remove from selection"}[mode])

    def select_all(self) -> str | None:
        return self._select(self.keep(), "select all")

    def select_none(self) -> str | None:
        return self._select(np.zeros(self.n, bool), "select none")

    def invert(self) -> str | None:
        """Select the kept splats that are not selected, and only those."""
        return self._select(self.keep() & ~self.selected, "invert selection")

    def delete_selected(self) -> str | None:
        """Delete the selected splats (they are no longer kept, nor selected)."""
        idx = np.flatnonzero(self.selected & self.keep())
        if not len(idx):
            return None
        return self._push(_Command(f"delete {len(idx):,} splats", delete=idx))

    def set_crop(self, box: CropBox | None) -> str | None:
        """Crop to ``box`` (None: no crop). The selection loses the splats the box leaves out
        (in the same command, so one undo restores both)."""
        if box == self.crop:
            return None
        before = self.crop
        self.crop, self._in_crop = box, None
        outside = np.flatnonzero(self.selected & ~self.in_crop())
        self.crop, self._in_crop = before, None
        cmd = _Command("crop" if box is not None else "remove crop", crop=(before, box),
                       flip=outside if len(outside) else None)
        return self._push(cmd)

    def can_undo(self) -> bool:
        return bool(self._done)

    def can_redo(self) -> bool:
        return bool(self._undone)

    def undo(self) -> str | None:
        """Undo the last command; its label, or None when there is none."""
        if not self._done:
            return None
        cmd = self._done.pop()
        self._do(cmd, undo=True)
        self._undone.append(cmd)
        return cmd.label

    def redo(self) -> str | None:
        """Redo the last undone command; its label, or None when there is none."""
        if not self._undone:
            return None
        cmd = self._undone.pop()
        self._do(cmd)
        self._done.append(cmd)
        return cmd.label

    # --- the file ----------------------------------------------------------------------------
    def to_json(self) -> dict:
        d = np.concatenate([[False], self.deleted, [False]]).astype(np.int8)
        edges = np.flatnonzero(np.diff(d))
        ranges = edges.reshape(-1, 2).tolist()
        return {"version": VERSION, "ply": {"sha256": self.sha256, "count": self.n, "name": self.name},
                "crop": self.crop.to_json() if self.crop is not None else None, "deleted": ranges}

    def save(self, path: str | Path) -> None:
        """Write the edit (crop and deleted splats, not the selection or the history) to
        ``path`` atomically."""
        with open_atomic(Path(path), "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f)  # one line: the ranges may be many


def load_edit(path: str | Path, means: np.ndarray, sha256: str, ply: str | Path = "") -> SplatEdit:
    """The edit saved in ``path`` for the splats ``means`` [N, 3] of the file whose SHA-256
    is ``sha256`` (``ply``: its path, for messages). EditFileError naming ``path`` when the
    file is unreadable or malformed, or when it was made for another splat file."""
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise EditFileError(f"{path}: not a readable edit file ({e})") from None
    if not isinstance(d, dict) or d.get("version") != VERSION or not isinstance(d.get("ply"), dict):
        raise EditFileError(f"{path}: not a version-{VERSION} edit file (no 'version': {VERSION} and 'ply' object)")
    n = len(means)
    made_for, count = d["ply"].get("sha256"), d["ply"].get("count")
    if made_for != sha256 or count != n:
        raise EditFileError(f"{path}: made for another splat file ({d['ply'].get('name') or '?'}, {count} Gaussians, "
                            f"sha256 {str(made_for)[:12]}...) than {ply or 'this one'} ({n:,} Gaussians, sha256 "
                            f"{sha256[:12]}...): the splats changed since the edit; delete the edit file or redo it")
    crop = CropBox.from_json(d["crop"], str(path)) if d.get("crop") is not None else None
    ranges = d.get("deleted", [])
    try:
        r = np.asarray(ranges, np.int64).reshape(-1, 2) if len(ranges) else np.zeros((0, 2), np.int64)
        if not all(isinstance(v, int) and not isinstance(v, bool) for pair in ranges for v in pair):
            raise ValueError
    except (TypeError, ValueError):
        raise EditFileError(f"{path}: 'deleted' must be a list of [start, stop] integer pairs") from None
    flat = r.reshape(-1)
    if len(flat) and (flat[0] < 0 or flat[-1] > n or np.any(np.diff(flat) <= 0)):
        raise EditFileError(f"{path}: 'deleted' ranges must be increasing, disjoint and within 0..{n}")
    deleted = np.zeros(n, bool)
    if len(r):
        marks = np.bincount(r[:, 0], minlength=n + 1) - np.bincount(r[:, 1], minlength=n + 1)
        deleted = np.cumsum(marks[:-1]) > 0
    return SplatEdit(means, sha256=sha256, name=str(d["ply"].get("name") or ""), crop=crop, deleted=deleted)


def edit_file_for(splat_file: str | Path) -> Path:
    """Where the edit of a project's splat file is kept: ``<project>/edit.json``, the
    project being the file's folder, or its parent for a `spirula run` project's
    ``train/`` or ``exports/`` (run.json beside them)."""
    folder = Path(splat_file).parent
    if folder.name in ("train", "exports") and (folder.parent / "run.json").is_file():
        folder = folder.parent
    return folder / EDIT_FILE


def apply_saved_edit(splat_file: str | Path, g, edit_file: str | Path | None = None):
    """(``g`` with the edit of ``splat_file`` applied, the edit's summary line or None):
    the edit is ``edit_file`` or, when that is None, the project's (:func:`edit_file_for`)
    if there is one. EditFileError when the edit was made for another file."""
    path = Path(edit_file) if edit_file is not None else edit_file_for(splat_file)
    if edit_file is None and not path.is_file():
        return g, None
    edit = load_edit(path, g.means, file_sha256(splat_file), splat_file)
    return edit.apply(g), f"{path}: {edit.summary()}"
