"""The Dataset panel: the scene's cameras as thumbnails (training, held-out and excluded
views framed apart) and its notes; double-clicking a camera looks through it. Before
training (a review) the split is the user's: hold out, train on or exclude the selected
images (right-click, or the buttons), or hold out every k-th; Start trains with it. Each
change of the split can be undone and redone (Edit > Undo / Redo route here during a
review: spirula/app/edit_tools.py)."""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from spirula.engine.studio import protocol as M

from .plots import ACCENT, BLUE

GREY = (110, 110, 116)
SPLIT_COLOURS = {"train": ACCENT, "test": BLUE, "excluded": GREY}
SPLIT_WORDS = {"train": "training", "test": "held out", "excluded": "excluded"}


class DatasetPanel(QtWidgets.QWidget):
    camera_activated = QtCore.Signal(int)
    start_requested = QtCore.Signal()
    split_changed = QtCore.Signal(tuple, tuple)   # held out, excluded (image names)
    history_changed = QtCore.Signal()             # what Undo / Redo would do changed

    def __init__(self, parent=None):
        super().__init__(parent)
        self.scene: M.SceneLoaded | None = None
        self.splits: list[str] = []
        self.group: list[int] = []   # per camera: its image's index (a wide image's faces share one)
        self.editable = False
        # the split's changes: (what the change did, the split and every-k before it) to undo,
        # and the undone ones (the split and every-k after them) to redo
        self.undo_stack: list[tuple[str, list[str], int]] = []
        self.redo_stack: list[tuple[str, list[str], int]] = []
        self._every_before = 8
        lay = QtWidgets.QVBoxLayout(self)
        self.summary = QtWidgets.QLabel("No dataset")
        self.summary.setWordWrap(True)
        lay.addWidget(self.summary)
        self.list = QtWidgets.QListWidget()
        self.list.setViewMode(QtWidgets.QListView.ViewMode.IconMode)
        self.list.setIconSize(QtCore.QSize(112, 84))
        self.list.setResizeMode(QtWidgets.QListView.ResizeMode.Adjust)
        self.list.setMovement(QtWidgets.QListView.Movement.Static)
        self.list.setSpacing(4)
        self.list.setUniformItemSizes(True)
        self.list.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.itemActivated.connect(self._activated)
        self.list.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        lay.addWidget(self.list, 1)

        self.split_row = QtWidgets.QWidget()
        row = QtWidgets.QHBoxLayout(self.split_row)
        row.setContentsMargins(0, 0, 0, 0)
        self.split_buttons = {}
        for split, label in (("train", "Train on"), ("test", "Hold out"), ("excluded", "Exclude")):
            b = QtWidgets.QPushButton(label)
            b.setToolTip(f"Mark the selected images as {SPLIT_WORDS[split]}")
            b.clicked.connect(lambda _=False, s=split: self.set_selected(s))
            row.addWidget(b)
            self.split_buttons[split] = b
        row.addWidget(QtWidgets.QLabel("every"))
        self.every = QtWidgets.QSpinBox(minimum=0, maximum=1000)
        self.every.setValue(8)
        self.every.setSpecialValueText("none")
        self.every.setToolTip("Hold out every k-th image by name (0: none), replacing the choices above")
        self.every.valueChanged.connect(self.hold_out_every)
        row.addWidget(self.every)
        lay.addWidget(self.split_row)
        self.start_btn = QtWidgets.QPushButton("Start training")
        self.start_btn.setObjectName("primary")
        self.start_btn.clicked.connect(self.start_requested)
        lay.addWidget(self.start_btn)

        self.notes = QtWidgets.QLabel("")
        self.notes.setWordWrap(True)
        self.notes.setObjectName("dim")
        lay.addWidget(self.notes)
        self.legend = QtWidgets.QLabel("Frames: <span style='color:#ffaa3c'>training</span> · "
                                       "<span style='color:#5ac8ff'>held out</span> · "
                                       "<span style='color:#6e6e74'>excluded</span>. "
                                       "Double-click a thumbnail or click a frustum to look through it.")
        self.legend.setWordWrap(True)
        self.legend.setObjectName("dim")
        lay.addWidget(self.legend)
        self._set_editable(False)

    def _set_editable(self, on: bool) -> None:
        self.editable = on
        self.split_row.setVisible(on)
        self.start_btn.setVisible(on)

    def _activated(self, it: QtWidgets.QListWidgetItem) -> None:
        self.camera_activated.emit(int(it.data(QtCore.Qt.ItemDataRole.UserRole)))

    def set_scene(self, msg: M.SceneLoaded) -> None:
        self.scene = msg
        self.splits = [c.split for c in msg.cameras]
        self._set_editable(msg.kind == "review")
        self.clear_history()
        if msg.kind == "empty":
            self.summary.setText(f"Reconstructing {msg.name} (frames, SfM, undistortion): it opens for review "
                                 "when done; Cancel (Training panel) keeps what finished")
        if msg.kind == "ply":
            self.summary.setText(f"{msg.name}: {msg.num_gaussians:,} Gaussians (viewing, no cameras)")
        elif msg.kind == "mesh":
            splats = f"; M switches to its project's {msg.num_gaussians:,} splats" if msg.num_gaussians else ""
            self.summary.setText(f"{msg.name}: a textured mesh of {msg.faces:,} triangles (viewing{splats})")
        self._fill()
        self.notes.setText("\n".join(msg.warnings[:6]))

    def _summary(self) -> None:
        msg = self.scene
        if msg is None or msg.kind in ("ply", "mesh", "empty"):
            return
        counts = {s: self.splits.count(s) for s in SPLIT_COLOURS}
        excluded = f", {counts['excluded']} excluded" if counts["excluded"] else ""
        if msg.kind == "review":
            points = f"{msg.num_gaussians:,} SfM points" if msg.num_gaussians else "no SfM points (it starts from random ones)"
        else:
            points = f"{msg.num_gaussians:,} initial Gaussians"
        head = "Review, then Start: " if msg.kind == "review" else ""
        n_images = len(set(self.group))
        faces = f" as {len(self.splits)} pinhole faces" if n_images != len(self.splits) else ""
        self.summary.setText(f"{head}{msg.name}: {n_images} registered images{faces} "
                             f"({counts['train']} training, {counts['test']} held out{excluded}) · {points}")
        self.start_btn.setEnabled(counts["train"] > 0)
        if msg.kind == "review" and counts["train"] > 0:
            names = self.split_names()
            self.split_changed.emit(names["held_out"], names["excluded"])

    def _fill(self) -> None:
        self.list.clear()
        # the faces of a wide image (spirula/engine/ingest/faces.py) are one group: listed together under
        # their image's name, held out or excluded together (the engine's hold-out takes whole images)
        cams = self.scene.cameras if self.scene else ()
        images = sorted({c.source or c.name for c in cams})
        rank = {n: k for k, n in enumerate(images)}
        self.group = [rank[c.source or c.name] for c in cams]
        for i, c in enumerate(cams):
            it = QtWidgets.QListWidgetItem(self.list)
            label = f"{c.source} · {c.face}" if c.source else c.name
            it.setText(label if len(label) <= 16 else "…" + label[-15:])
            it.setData(QtCore.Qt.ItemDataRole.UserRole, i)
            self._decorate(it)
        self._summary()

    def _decorate(self, it: QtWidgets.QListWidgetItem) -> None:
        i = int(it.data(QtCore.Qt.ItemDataRole.UserRole))
        c, split = self.scene.cameras[i], self.splits[i]
        face = f"\nthe {c.face} face of {c.source}" if c.source else ""
        it.setToolTip(f"{c.name}{face}\n{c.width}x{c.height} · {SPLIT_WORDS[split]}")
        if not c.thumbnail:
            return
        img = QtGui.QImage(c.thumbnail, c.thumb_w, c.thumb_h, 3 * c.thumb_w, QtGui.QImage.Format.Format_RGB888).copy()
        pm = QtGui.QPixmap.fromImage(img)
        painter = QtGui.QPainter(pm)
        if split == "excluded":
            painter.fillRect(pm.rect(), QtGui.QColor(20, 21, 25, 170))
        pen = QtGui.QPen(QtGui.QColor(*SPLIT_COLOURS[split]))
        pen.setWidth(4)
        painter.setPen(pen)
        painter.drawRect(pm.rect().adjusted(2, 2, -2, -2))
        painter.end()
        it.setIcon(QtGui.QIcon(pm))

    # --- the split (a review only) ---------------------------------------------------------------
    def _menu(self, pos: QtCore.QPoint) -> None:
        if not self.editable or not self.list.selectedItems():
            return
        menu = QtWidgets.QMenu(self)
        for split, b in self.split_buttons.items():
            menu.addAction(b.text(), lambda s=split: self.set_selected(s))
        menu.exec(self.list.viewport().mapToGlobal(pos))

    def set_selected(self, split: str) -> None:
        if not self.editable:
            return
        groups = {self.group[int(it.data(QtCore.Qt.ItemDataRole.UserRole))] for it in self.list.selectedItems()}
        items = []  # a face takes its image's other faces with it
        for r in range(self.list.count()):
            it = self.list.item(r)
            i = int(it.data(QtCore.Qt.ItemDataRole.UserRole))
            if self.group[i] in groups and self.splits[i] != split:
                items.append(it)
        if not items:
            return
        n = len(items)
        verb = {"train": "train on", "test": "hold out", "excluded": "exclude"}[split]
        self._record(f"{verb} {n} image{'s' if n > 1 else ''}")
        for it in items:
            self.splits[int(it.data(QtCore.Qt.ItemDataRole.UserRole))] = split
            self._decorate(it)
        self._summary()

    def hold_out_every(self, k: int) -> None:
        """Every k-th image by name held out (the engine's rule: indices 0, k, 2k, ...);
        exclusions stay."""
        if not self.editable:
            return
        self._record(f"hold out every {k}" if k else "hold out none by number", self._every_before)
        self._every_before = k
        n = len(self.splits)
        for i in range(n):  # by image: a wide image's faces share its group (_fill)
            if self.splits[i] != "excluded":
                self.splits[i] = "test" if k > 0 and self.group[i] % k == 0 else "train"
        if "train" not in self.splits:  # as the engine does: nothing held out rather than nothing trained
            self.splits = ["train" if s == "test" else s for s in self.splits]
        for r in range(self.list.count()):
            self._decorate(self.list.item(r))
        self._summary()

    # --- undo / redo of the split ------------------------------------------------------------------
    def _record(self, label: str, every: int | None = None) -> None:
        self.undo_stack.append((label, list(self.splits), self.every.value() if every is None else every))
        del self.undo_stack[:-200]
        self.redo_stack.clear()
        self.history_changed.emit()

    def clear_history(self) -> None:
        self.undo_stack.clear()
        self.redo_stack.clear()
        self._every_before = self.every.value()
        self.history_changed.emit()

    def undo_text(self) -> str:
        """What Undo would undo ('' nothing; only while the split can be edited)."""
        return self.undo_stack[-1][0] if self.editable and self.undo_stack else ""

    def redo_text(self) -> str:
        return self.redo_stack[-1][0] if self.editable and self.redo_stack else ""

    def undo(self) -> None:
        """The last change of the split undone (the every-k box as it was too)."""
        if self.undo_text():
            self._swap(self.undo_stack, self.redo_stack)

    def redo(self) -> None:
        if self.redo_text():
            self._swap(self.redo_stack, self.undo_stack)

    def _swap(self, take: list, put: list) -> None:
        label, splits, every = take.pop()
        put.append((label, list(self.splits), self.every.value()))
        self.splits = splits
        self.every.blockSignals(True)  # the box as it was, not its rule applied again
        self.every.setValue(every)
        self.every.blockSignals(False)
        self._every_before = every
        for r in range(self.list.count()):
            self._decorate(self.list.item(r))
        self._summary()
        self.history_changed.emit()

    def split_names(self) -> dict:
        """StartTraining's held_out / excluded for the split shown (empty: not a review)."""
        if self.scene is None or self.scene.kind != "review":
            return {}
        names = [c.name for c in self.scene.cameras]
        return {"held_out": tuple(n for n, s in zip(names, self.splits) if s == "test"),
                "excluded": tuple(n for n, s in zip(names, self.splits) if s == "excluded"),
                "eval_every": self.every.value()}

    def select(self, index: int) -> None:
        for k in range(self.list.count()):
            it = self.list.item(k)
            if int(it.data(QtCore.Qt.ItemDataRole.UserRole)) == index:
                self.list.setCurrentItem(it)
                self.list.scrollToItem(it)
                return
