"""File menu entries for the SfM cache (spirula/engine/sfm/cache.py): "Clear SfM cache" of the
project on show, and the remembered setting "Drop the SfM cache when a reconstruction
finishes" that StartPipeline carries."""

from __future__ import annotations

from PySide6 import QtGui

from spirula.engine.studio import protocol as M

from . import remembered

SETTING = "sfm/drop_cache"


class SfmCacheActions:
    def __init__(self, window, menu):
        self.window = window
        self.clear_action = menu.addAction("Clear SfM cache", self.clear)
        self.clear_action.setToolTip("Remove the project's cache/sfm (features and matches kept for a rerun of SfM); "
                                     "frames, the sparse model and the training stay")
        self.drop_action = QtGui.QAction("Drop SfM cache when a reconstruction finishes", window, checkable=True)
        self.drop_action.setChecked(remembered.store().value(SETTING, False, type=bool))
        self.drop_action.toggled.connect(self._remember)
        menu.addAction(self.drop_action)

    @property
    def drop_after_run(self) -> bool:
        return self.drop_action.isChecked()

    def _remember(self, on: bool) -> None:
        s = remembered.store()
        s.setValue(SETTING, bool(on))
        s.sync()

    def clear(self) -> None:
        scene = self.window.scene
        path = (scene.path if scene.kind in ("review", "dataset") else scene.project or scene.path) if scene else ""
        if not path:
            self.window.note("Clear SfM cache: open a project first")
            return
        self.window.session.send(M.ClearSfmCache(path))

    def cleared(self, msg: M.CacheCleared) -> None:
        self.window.note(f"SfM cache of {msg.project} removed: {msg.freed / 1024 ** 2:,.1f} MiB freed ({msg.why})")
