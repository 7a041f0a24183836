"""The studio's main window: viewport in the middle, panels docked at the side, engine
messages drained on a timer. The Qt thread only sends commands and shows results.

Nothing is lost: engine errors show as dialogs (the message and the file); closing the
window while training asks, and "Save and quit" has the engine stop after its step and
write a checkpoint while the window shows that it is saving, closing when the engine says
CheckpointSaved (spirula/app/closing.py); opening a project folder whose training stopped continues it."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from spirula.engine.studio import protocol as M

from .box_handles import BoxHandles
from .closing import Closing
from .controls_help import CONTROLS
from .dataset_panel import DatasetPanel
from .drop_overlay import DropHandler, route_drags
from .partition_panel import PartitionPanel
from .export_panel import ExportPanel
from .image_view import readback_reason
from .video_panel import VideoPanel
from . import remembered
from .opening import Opening
from .panel_scroll import PanelScroll
from .profiler_panel import PROFILE_BY_DEFAULT, ProfilerPanel
from .training_panel import TrainingPanel
from .viewport_widget import ViewController, Viewport

log = logging.getLogger("spirula.app")

RESOURCES = Path(__file__).resolve().parent.parent.parent / "resources"


def load_style(app: QtWidgets.QApplication) -> None:
    qss = RESOURCES / "styles" / "studio.qss"
    if qss.is_file():
        app.setStyleSheet(qss.read_text(encoding="utf-8"))
    icon = RESOURCES / "icons" / "spirula.svg"
    if icon.is_file():
        app.setWindowIcon(QtGui.QIcon(str(icon)))


class StudioWindow(Closing, Opening, QtWidgets.QMainWindow):
    def __init__(self, session, ready: M.EngineReady, dialogs: bool = True):
        super().__init__()
        self.session = session
        self.ready = ready
        self.dialogs = dialogs          # False in tests: errors go to self.errors and the status bar
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.messages: list = []        # every engine message, for tests and debugging
        self.scene: M.SceneLoaded | None = None
        self.job_state = "idle"
        self.viewer_mode: M.ViewerStatus | None = None
        self.viewer_stats: M.ViewerStats | None = None
        self.frames_shown = 0
        self.init_closing()
        self.resumed: M.TrainingResumed | None = None
        self.setWindowTitle("Spirula Studio")
        self.resize(1440, 900)

        self.controller = ViewController(session.send, self)
        self.viewport = Viewport(self.controller, self)
        self.viewport.resized.connect(lambda w, h: session.send(M.ResizeViewport(w, h)))
        self.viewport.window_.exposed.connect(lambda: session.send(M.RequestFrame()))
        self.controller.camera_picked.connect(self._on_picked)
        self.setCentralWidget(self.viewport)
        self.drops = DropHandler(self.open_paths, self.viewport, self)  # drop anywhere, the viewport too
        for target in (self, self.viewport, self.viewport.window_, self.viewport.image_view):
            route_drags(target, self.drops)
        from .start_page import StartPage

        self.start_page = StartPage(self)  # the empty viewport: a drop target and the recent projects

        self.training = TrainingPanel()
        self.dataset = DatasetPanel()
        self.partition = PartitionPanel()
        self.profiler = ProfilerPanel()
        self.export = ExportPanel()
        self.video = VideoPanel(self._current_view)
        self.video.use_software_defaults(ready.software)
        self.training.use_software_defaults(ready.software)
        self.export.use_software_defaults(ready.software)
        self.device_kind = "software" if ready.software else "gpu"
        self.next_project = None        # File > New project: where the next training goes
        self.project_dialog = None      # the Resume / Restart / View choice on show
        from .project_state import ProjectState

        self.project_state = ProjectState(self)  # the project on show (spirula/app/project_state.py)
        self.training.restore(remembered.load_values(f"training/{self.device_kind}"))
        self.export.restore(remembered.load_values(f"mesh/{self.device_kind}"))
        self.video.restore(remembered.load_values(f"video/{self.device_kind}"))
        docks = []
        for title, w in (("Training", self.training), ("Dataset", self.dataset), ("Partition", self.partition),
                         ("Profiler", self.profiler), ("Export", self.export), ("Video", self.video)):
            d = QtWidgets.QDockWidget(title, self)
            d.setObjectName(f"dock-{title}")
            d.setWidget(PanelScroll(w))  # the window fits a small screen
            d.setFeatures(QtWidgets.QDockWidget.DockWidgetFeature.DockWidgetMovable
                          | QtWidgets.QDockWidget.DockWidgetFeature.DockWidgetFloatable)
            self.addDockWidget(QtCore.Qt.DockWidgetArea.RightDockWidgetArea, d)
            docks.append(d)
        for d in docks[1:]:
            self.tabifyDockWidget(docks[0], d)
        docks[0].raise_()
        self.resizeDocks([docks[0]], [430], QtCore.Qt.Orientation.Horizontal)
        self.docks = {d.windowTitle(): d for d in docks}

        self.training.start_requested.connect(self.start_training)
        self.training.pause_requested.connect(lambda: session.send(M.Pause()))
        self.training.resume_requested.connect(lambda: session.send(M.Resume()))
        self.training.stop_requested.connect(lambda: session.send(M.Cancel(save=True)))
        self.dataset.camera_activated.connect(self._look_through)
        self.dataset.start_requested.connect(self.start_training)
        self.dataset.split_changed.connect(lambda held, out: session.send(M.SetSplit(held, out)))
        self.partition.merged_ready.connect(lambda ply: session.send(M.OpenPly(ply)))
        self.partition.send = session.send  # its training runs on the engine thread (M.TrainPartition)
        self.profiler.profiling_toggled.connect(lambda on: session.send(M.SetProfiling(on)))
        self.profiler.enable.setChecked(PROFILE_BY_DEFAULT)  # while training (spirula/engine/studio/profiling.py)
        session.send(M.SetProfiling(self.profiler.enable.isChecked()))
        self.export.export_ply_requested.connect(self._ask_export_ply)
        self.export.screenshot_requested.connect(self._ask_screenshot)
        self.export.mesh_requested.connect(self.export_mesh)
        self.export.bounds_confirmed.connect(lambda box, frame: session.send(M.ConfirmBounds(box, frame)))
        self.boxes = BoxHandles(self)   # the mesh box and the crop box drawn with their handles
        self.controller.bounds_dragged.connect(self.export.set_bounds)
        self.export.mesh_cancel_requested.connect(lambda: session.send(M.Cancel(save=False)))
        self.export.open_mesh_requested.connect(lambda path: self.open_paths([path]))
        self.video.export_requested.connect(self._ask_export_video)
        self.video.cancel_requested.connect(lambda: session.send(M.Cancel(save=False)))
        self.video.preview_view.connect(lambda w2c, fov: session.send(M.SetView(w2c, fov)))
        self.video.preview_ended.connect(self.controller.push)
        self.video.path_changed.connect(self._path_to_viewport)

        self._build_actions()
        self.status_adapter = QtWidgets.QLabel(ready.adapter)
        self.status_adapter.setToolTip(f"Engine started in {ready.warmup_s:.1f} s (device and kernel compilation; "
                                       "compiled kernels are cached for the next launch)")
        self.status_viewer = QtWidgets.QLabel("viewport: –")
        self.status_job = QtWidgets.QLabel("idle")
        from .stage_status import StageStatus

        self.stage_status = StageStatus(self)  # the job's stages, elapsed and time left, on every tab
        self.stage_status.stages.set_software(self.device_kind == "software")  # the training's profile
        sb = self.statusBar()
        sb.addPermanentWidget(self.stage_status)
        sb.addPermanentWidget(self.status_job)
        sb.addPermanentWidget(self.status_viewer)
        sb.addPermanentWidget(self.status_adapter)
        sb.showMessage("Drop a dataset, project or photo folder, a video, splats (.ply .spz .sog .splat) or a mesh", 0)

        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(15)
        self.timer.timeout.connect(self.pump)
        self.timer.start()
        self.plot_timer = QtCore.QTimer(self)  # plots redraw a few times a second, when visible
        self.plot_timer.setInterval(300)
        self.plot_timer.timeout.connect(self.refresh_plots)
        self.plot_timer.start()

    # --- actions -------------------------------------------------------------------------------
    def _build_actions(self) -> None:
        tb = self.addToolBar("View")
        tb.setObjectName("toolbar-view")
        tb.setMovable(False)
        m_file = self.menuBar().addMenu("&File")
        m_file.addAction("New project…", self._ask_new_project).setShortcut(QtGui.QKeySequence.StandardKey.New)
        m_file.addAction("Open project…", self._ask_project)
        self.recent_menu = m_file.addMenu("Open recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        m_file.addSeparator()
        a = m_file.addAction("Open dataset folder…", self._ask_dataset)
        a.setShortcut(QtGui.QKeySequence.StandardKey.Open)
        m_file.addAction("Open splat file…", self._ask_ply)
        m_file.addAction("Open video…", self._ask_video)
        m_file.addAction("Open photo folder…", self._ask_photos)
        m_file.addSeparator()
        m_file.addAction("Export Gaussians…", self._ask_export_ply)
        m_file.addAction("Save screenshot…", self._ask_screenshot)
        m_file.addSeparator()
        from .sfm_cache import SfmCacheActions

        self.sfm_cache = SfmCacheActions(self, m_file)
        m_file.addSeparator()
        q = m_file.addAction("Quit", self.close)
        q.setShortcut(QtGui.QKeySequence.StandardKey.Quit)

        from .edit_tools import EditActions

        self.edit_tools = EditActions(self, self.menuBar().addMenu("&Edit"))  # splat editing before export
        tb.addAction("Open…", self._ask_dataset)
        tb.addSeparator()
        self.mode_group = QtGui.QActionGroup(self)
        self.mode_actions = {}
        for mode, label, tip in (("splats", "Splats", "Rendered Gaussians (1)"),
                                 ("gt", "Ground truth", "The dataset image of the camera you look through (2)"),
                                 ("error", "Error", "|render - ground truth| of the camera you look through (3)")):
            act = QtGui.QAction(label, self, checkable=True)
            act.setToolTip(tip)
            act.setShortcut(QtGui.QKeySequence(str(len(self.mode_actions) + 1)))
            act.triggered.connect(lambda _=False, m=mode: self.set_view_mode(m))
            self.mode_group.addAction(act)
            tb.addAction(act)
            self.mode_actions[mode] = act
        self.mode_actions["splats"].setChecked(True)
        tb.addSeparator()
        self.frustum_action = QtGui.QAction("Frustums", self, checkable=True, checked=True)
        self.frustum_action.setToolTip("The dataset's cameras as frustums (a scene with cameras)")
        self.frustum_action.setEnabled(False)   # lit only where there are cameras (_toolbar_states)
        self.frustum_action.setChecked(False)
        self.frustums_wanted = True             # the user's choice, kept while a scene has no cameras
        self.frustum_action.toggled.connect(self._frustums_toggled)
        tb.addAction(self.frustum_action)
        self.view_actions = self._view_actions()
        tb.addAction(self.view_actions["frame"])
        tb.addSeparator()
        # a mesh scene: its triangles or its project's splats, and how the triangles are lit
        self.mesh_action = QtGui.QAction("Mesh", self, checkable=True, checked=True)
        self.mesh_action.setToolTip("Show the mesh's textured triangles; off: the splats it was made from (M)")
        self.mesh_action.setShortcut(QtGui.QKeySequence("M"))
        self.mesh_action.setEnabled(False)
        self.mesh_action.setChecked(False)   # lit only while a mesh is shown (_toolbar_states)
        self.mesh_action.toggled.connect(lambda _: self.set_view_mode(self.view_mode))
        tb.addAction(self.mesh_action)
        self.shading_combo = QtWidgets.QComboBox()
        for key, label in (("texture", "Texture"), ("shaded", "Texture, lit"), ("clay", "Clay")):
            self.shading_combo.addItem(label, key)
        self.shading_combo.setToolTip("How the mesh's triangles are drawn: the texture as baked, lit by a light "
                                      "at the camera, or grey and lit (the geometry alone)")
        self.shading_combo.setEnabled(False)
        self.shading_combo.currentIndexChanged.connect(lambda _: self.set_view_mode(self.view_mode))
        tb.addWidget(self.shading_combo)
        self.view_mode = "splats"
        m_view = self.menuBar().addMenu("&View")
        for act in self.mode_actions.values():
            m_view.addAction(act)
        m_view.addAction(self.frustum_action)
        m_view.addAction(self.mesh_action)
        m_view.addSeparator()
        for act in self.view_actions.values():
            m_view.addAction(act)
        m_view.addSeparator()
        self.frustum_scale = 1.0
        m_view.addAction("Larger frustums", lambda: self.scale_frustums(1.5)).setShortcut(QtGui.QKeySequence("]"))
        m_view.addAction("Smaller frustums", lambda: self.scale_frustums(1 / 1.5)).setShortcut(QtGui.QKeySequence("["))
        m_help = self.menuBar().addMenu("&Help")
        m_help.addAction("Controls", self._show_controls)
        m_help.addAction("Run self-test…", self.run_selftest)

    def _view_actions(self) -> dict:
        """Frame the subject (F), frame all (Shift+F), the start view (Home) and where a drag
        orbits: window-wide shortcuts (a text field keeps its own letters: Qt gives it the key)."""
        c = self.controller
        acts = {}
        for key, label, shortcut, slot, tip in (
                ("frame", "Frame subject", "F", c.frame_subject, "Look at the subject, filling the view (F)"),
                ("all", "Frame all", "Shift+F", c.frame_all, "The whole scene and its cameras in view (Shift+F)"),
                ("home", "Start view", "Home", c.reset, "Back to the start view: the first training camera's (Home)")):
            a = QtGui.QAction(label, self)
            a.setShortcut(QtGui.QKeySequence(shortcut))
            a.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)
            a.setToolTip(tip)
            a.triggered.connect(slot)
            self.addAction(a)   # active wherever the focus is in the window
            acts[key] = a
        pivot = QtGui.QAction("Orbit about the point under the cursor", self, checkable=True)
        pivot.setToolTip("Left drag turns about the point under the cursor (else about the subject; Alt+drag: "
                         "the point under the cursor either way)")
        pivot.toggled.connect(lambda on: setattr(c, "orbit_pivot", "cursor" if on else "subject"))
        acts["pivot"] = pivot
        return acts

    def _frustums_toggled(self, on: bool) -> None:
        if self.frustum_action.isEnabled():
            self.frustums_wanted = on
        self.set_view_mode(self.view_mode)

    def _toolbar_states(self, msg: M.SceneLoaded) -> None:
        """Lit means shown: Mesh while a mesh's triangles are (switchable when it has splats),
        Frustums while the scene has cameras (the user's choice kept for the next one)."""
        cams = bool(msg.cameras)
        for act, enabled, checked in ((self.mesh_action, msg.kind == "mesh" and msg.num_gaussians > 0,
                                       msg.kind == "mesh"),
                                      (self.frustum_action, cams, cams and self.frustums_wanted)):
            act.blockSignals(True)
            act.setEnabled(enabled)
            act.setChecked(checked)
            act.blockSignals(False)

    def _show_controls(self) -> None:
        QtWidgets.QMessageBox.information(self, "Viewport controls", CONTROLS)

    def run_selftest(self):
        """Help > Run self-test: `spirula --selftest` in a child process, in a dialog (on this
        window's backend). Returns the dialog."""
        from .selftest_dialog import SelftestDialog

        dlg = getattr(self, "selftest_dialog", None)
        if dlg is None:
            dlg = self.selftest_dialog = SelftestDialog(self, backend=self.ready.backend)
        dlg.show()
        dlg.raise_()
        dlg.start()
        return dlg

    def set_view_mode(self, mode: str) -> None:
        if mode != "splats" and self.controller.look_through is None:
            # ground truth and error exist for dataset cameras: look through the nearest one
            if self.scene is not None and self.scene.cameras:
                self.controller.look_through_camera(self._nearest_camera())
            else:
                self.note("Ground truth and error views need a dataset camera: open a dataset first")
                mode = "splats"
        self.view_mode = mode
        self.mode_actions[mode].setChecked(True)
        self.session.send(M.SetViewMode(mode, self.frustum_action.isChecked(), self.frustum_scale,
                                        mesh=self.mesh_action.isChecked(),
                                        mesh_shading=self.shading_combo.currentData() or "texture"))

    def scale_frustums(self, factor: float) -> None:
        """View > Larger / Smaller frustums."""
        self.frustum_scale = min(max(self.frustum_scale * factor, 0.05), 20.0)
        self.set_view_mode(self.view_mode)
        if self.video.keyframes:
            self._path_to_viewport()

    def _nearest_camera(self) -> int:
        import numpy as np

        c = self.controller
        if c.centers is None:
            return 0
        d = np.linalg.norm(c.centers - c.camera.eye, axis=1)
        return int(np.argmin(d))

    def _look_through(self, index: int) -> None:
        """A thumbnail double-clicked: look through its camera, and the keys fly from there."""
        self.controller.look_through_camera(index)
        self.viewport.take_focus()

    def _on_picked(self, index: int) -> None:
        self.dataset.select(index)
        if self.scene is not None and 0 <= index < len(self.scene.cameras):
            self.statusBar().showMessage(f"Looking through {self.scene.cameras[index].name}", 4000)

    # --- viewport ------------------------------------------------------------------------------
    def attach_viewport(self) -> None:
        """Present into the viewport's native window when the platform allows it (call
        after show()), except on a slow device (spirula/app/image_view.py readback_reason);
        else the engine's frames are read back into a QImage."""
        w, h = self.viewport.physical_size()
        self.session.send(M.ResizeViewport(w, h))
        reason = readback_reason(self.ready.software)
        if reason:
            self._readback(reason)
            return
        platform, handle = self.viewport.native_handle()
        if platform is None:
            self._readback(handle)
            return
        self.viewport.use_swapchain()
        QtWidgets.QApplication.processEvents()  # map the native window before the swapchain
        w, h = self.viewport.physical_size()
        self.session.send(M.AttachSurface(platform, handle, w, h))

    def _readback(self, reason: str) -> None:
        self.viewport.use_readback(reason)
        self.viewer_mode = M.ViewerStatus("readback", reason)
        self._update_viewer_label()
        self.session.send(M.RequestFrame())

    # --- engine messages -----------------------------------------------------------------------
    def pump(self) -> None:
        if self.saving_to_close and not self.session.alive:  # the engine ended: nothing to wait for
            QtCore.QTimer.singleShot(0, self._close_after_save)
        for msg in self.session.poll(2000):
            self.messages.append(msg)
            try:
                self.handle(msg)
            except Exception:  # a GUI bug must not stop the message pump
                log.exception("handling %r failed", type(msg).__name__)
        frame = self.session.preview.take()
        if frame is not None and self.viewport.mode == "readback":
            self.viewport.show_frame(frame)
            self.frames_shown += 1

    def refresh_plots(self) -> None:
        """One plot per tick (see TrainingPanel.refresh)."""
        self._plot_turn = (getattr(self, "_plot_turn", 0) + 1) % 4
        if self._plot_turn == 3:
            self.profiler.refresh()
        else:
            self.training.refresh()

    def handle(self, msg) -> None:
        if isinstance(msg, (M.StageStarted, M.StageProgress, M.StageFinished, M.JobState)):
            self.stage_status.on_message(msg)
        if isinstance(msg, M.TrainMetrics):
            self.training.on_metrics(msg)
            if msg.loss == msg.loss:  # a step (evaluations carry NaN)
                self.profiler.set_step(msg.step)
            self.export.set_scene_size(msg.num_gaussians)
        elif isinstance(msg, M.StageProgress) and msg.stage == "video":
            self.video.on_progress(msg)
        elif isinstance(msg, M.StageProgress) and msg.stage == "mesh":
            self.export.on_mesh_progress(msg)
        elif isinstance(msg, M.BoundsProposed):  # the mesh stage waits for its box (Export panel)
            self.export.show_proposal(msg)
            self.docks["Export"].raise_()
        elif isinstance(msg, M.CacheCleared):
            self.sfm_cache.cleared(msg)
        elif isinstance(msg, M.MeshExported):
            self.export.mesh_ended(f"Wrote {msg.faces:,} faces in {msg.seconds:.0f} s to "
                                   f"{Path(msg.project) / 'exports'}", True)
            self.statusBar().showMessage(f"Mesh: {dict(msg.files).get('glb', '')}", 0)
        elif isinstance(msg, M.StageProgress):
            if msg.detail.startswith("note: "):  # a stage's note (a 360 capture, a changed K): kept, as the CLI prints it
                self.note(msg.detail[len("note: "):])
            if msg.stage != "train":  # reconstruction stages (training has TrainMetrics)
                total = f"/{msg.total}" if msg.total else ""
                self.training.status.setText(f"{msg.stage}: {msg.done}{total} {msg.detail}".strip())
        elif isinstance(msg, M.ViewerStats):
            self.viewer_stats = msg
            self._update_viewer_label()
        elif isinstance(msg, M.ViewerStatus):
            self.viewer_mode = msg
            if msg.mode == "swapchain":
                self.viewport.use_swapchain()
            else:
                self.viewport.use_readback(msg.reason)
                self.session.send(M.RequestFrame())
            self._update_viewer_label()
        elif isinstance(msg, M.EditState):
            self.edit_tools.apply(msg)
        elif isinstance(msg, M.PartitionMessage):
            self.partition.handle(msg.message)
        elif isinstance(msg, M.SceneLoaded):
            self.project_state.scene_loaded(msg)  # another project: every panel afresh; Open recent
            self.scene = msg
            self.controller.set_scene(msg)
            self.edit_tools.set_scene(msg)
            self.dataset.set_scene(msg)
            self.partition.set_scene(msg)
            self.export.set_project(msg.project, training=msg.kind == "dataset")
            if msg.kind in ("dataset", "review", "ply"):
                self.export.set_extent(msg.center, msg.radius if msg.kind == "ply" else 0.5 * msg.radius)
            self.export.set_can_export(msg.kind not in ("mesh", "empty"))
            self.export.set_scene_size(msg.num_gaussians, msg.sh_degree)
            self.video.set_source(self._video_source(msg))
            self.training.set_dataset(msg.path if msg.kind in ("dataset", "review") else None)
            self.setWindowTitle(f"Spirula Studio — {msg.name}")
            if msg.kind == "review":
                self.docks["Dataset"].raise_()
            self._toolbar_states(msg)  # a mesh opens as its triangles
            self.shading_combo.setEnabled(msg.kind == "mesh")
            self.set_view_mode("splats")
        elif isinstance(msg, M.JobState):
            self.job_state = msg.state
            if self.export.meshing and msg.state in ("idle", "failed"):  # cancelled, or it failed
                self.export.mesh_ended(msg.detail, False)
            if self.video.rendering and msg.state in ("idle", "failed"):  # cancelled, or it failed
                self.video.ended(msg.detail, False)
            self.training.set_state(msg.state, msg.detail)
            # the state alone: the detail (in the panels too) took the room of the status messages
            self.status_job.setText(msg.state)
            if msg.state == "finished" and self.scene is not None and self.scene.kind == "dataset":
                self.edit_tools.training_ended()  # its splats can be edited now
            self.status_job.setToolTip(msg.detail or "")
            if self.saving_to_close and msg.state == "finished":  # it ended by itself meanwhile: all saved
                QtCore.QTimer.singleShot(0, self._close_after_save)
        elif isinstance(msg, M.CheckpointSaved):
            self.statusBar().showMessage(f"Checkpoint: step {msg.step:,} of {msg.steps:,} -> {msg.path}", 8000)
            if msg.stopped and self.saving_to_close:
                QtCore.QTimer.singleShot(0, self._close_after_save)
        elif isinstance(msg, M.TrainingResumed):
            self.resumed = msg
            self.training.show_resumed(msg)
            self.statusBar().showMessage(f"Resumed at step {msg.step:,} of {msg.steps:,} from {msg.checkpoint} "
                                         f"(saved {msg.saved.replace('T', ' ')})", 0)
        elif isinstance(msg, M.ProjectViewed):  # its curves follow as TrainMetrics
            self.training.show_viewed(msg)
        elif isinstance(msg, M.StageStarted):
            if msg.stage == "train" and msg.total:
                self.training.set_total(msg.total)
            self.statusBar().showMessage(f"{msg.stage}: {msg.detail}", 5000)
        elif isinstance(msg, M.ProfilerSnapshot):
            self.profiler.on_snapshot(msg)
        elif isinstance(msg, M.Saved):
            self.export.on_saved(msg)
            if msg.kind == "video":
                self.video.ended(f"Wrote {msg.path} ({msg.detail})", True)
            self.statusBar().showMessage(f"Saved {msg.path}", 8000)
        elif isinstance(msg, M.Done) and "stages" in msg.result:  # spirula.engine.jobs.pipeline's run record
            self.statusBar().showMessage(f"Reconstruction done ({msg.result.get('kind')}): training starts on "
                                         f"{msg.result.get('project')}", 0)
        elif isinstance(msg, M.Done):
            ply = msg.result.get("ply")
            if self.scene is not None:
                self.export.set_project(self.scene.project)  # trained: it can be meshed
                self.video.set_source(self._video_source(self.scene, trained=True))
            psnr = msg.result.get("psnr")
            self.statusBar().showMessage(
                f"Training {'stopped' if msg.result.get('stopped_early') else 'finished'} at step {msg.result.get('step')}"
                + (f", held-out PSNR {psnr:.2f} dB" if psnr else "") + (f"; saved {ply}" if ply else ""), 0)
        elif isinstance(msg, M.Warning):
            self.note(msg.text)
        elif isinstance(msg, M.Error):
            if self.saving_to_close:  # the checkpoint was not written: stay open, say why
                self._abort_close()
            self.error(msg.text, msg.path)

    def _path_to_viewport(self) -> None:
        """The Video panel's keyframes and path, drawn in the viewport (frustums a twentieth
        of the scene's radius deep, x View > Larger / Smaller frustums)."""
        radius = self.scene.radius if self.scene is not None and self.scene.radius > 0 else 1.0
        self.session.send(self.video.path_overlay(0.05 * radius * self.frustum_scale))

    def _current_view(self):
        """The viewport camera: (c2w [4, 4], OpenCV axes; vertical fov degrees)."""
        import numpy as np

        cam = self.controller.camera
        return np.linalg.inv(cam.w2c()), float(cam.fov_y_deg)

    @staticmethod
    def _video_source(msg: M.SceneLoaded, trained: bool = False) -> str:
        """What a video of the scene shows: a splat file, or a trained project ("" none; a
        dataset's project once its training ended: ``trained``)."""
        if msg.kind == "ply":
            return msg.path
        if msg.kind in ("review", "empty") or (msg.kind == "dataset" and not trained):
            return ""
        if msg.project and ExportPanel.trained(msg.project):
            return msg.project
        return ""

    def _update_viewer_label(self) -> None:
        mode = self.viewer_mode.mode if self.viewer_mode else "–"
        s = self.viewer_stats
        extra = ""
        if s is not None:
            extra = f" · {s.frame_ms:.0f} ms/frame · {s.width}x{s.height}"
            if s.render_scale > 1.01:
                extra += f" (splats at 1/{s.render_scale:.1f})"
        self.status_viewer.setText(f"viewport: {mode}{extra}")
        if self.viewer_mode and self.viewer_mode.mode == "readback":
            self.status_viewer.setToolTip(self.viewer_mode.reason)

    # --- user-facing notes -----------------------------------------------------------------------
    def note(self, text: str) -> None:
        self.notes.append(text)
        self.statusBar().showMessage(text, 10000)

    def refuse(self, text: str) -> None:
        """An input we cannot use: say why (a dialog, or the status bar in tests)."""
        self.notes.append(text)
        self.statusBar().showMessage(text, 15000)
        if self.dialogs:
            box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Icon.Information, "Spirula Studio", text,
                                        QtWidgets.QMessageBox.StandardButton.Ok, self)
            box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
            box.open()

    def error(self, text: str, path: str = "") -> None:
        """An engine error: the status bar, and a dialog with the message and the file."""
        self.errors.append(text)
        self.statusBar().showMessage(f"Error: {text}", 0)
        if self.dialogs:
            box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Icon.Warning, "Spirula Studio — error", text,
                                        QtWidgets.QMessageBox.StandardButton.Ok, self)
            box.setObjectName("engine-error")
            if path:
                box.setInformativeText(f"File: {path}")
            from .logs import details

            box.setDetailedText(details())  # "Show Details…": the log file and the last traceback
            box.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
            box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
            box.open()

    # --- input the viewport's native window does not get ----------------------------------------
    def _viewport_has_focus(self) -> bool:
        """The keys may fly the camera: the focus is not in a field one types into."""
        fw = QtWidgets.QApplication.focusWidget()
        typing = (QtWidgets.QLineEdit, QtWidgets.QAbstractSpinBox, QtWidgets.QTextEdit, QtWidgets.QPlainTextEdit)
        return fw is None or not isinstance(fw, typing)

    def keyPressEvent(self, ev) -> None:  # noqa: N802
        # keys a panel widget did not use fly the camera, unless the focus is in a text field
        if not (self._viewport_has_focus() and self.controller.key_press(ev)):
            super().keyPressEvent(ev)

    def keyReleaseEvent(self, ev) -> None:  # noqa: N802
        if not self.controller.key_release(ev):
            super().keyReleaseEvent(ev)
