"""The viewport widget: a native window the engine presents into through a Vulkan swapchain
(slangpy surface on the window's handle), or, when that is impossible or the device is slow, a
widget showing the frames the engine read back, reprojected at once for a moved camera
(spirula/app/image_view.py). Input (orbit, pan, zoom, WASD fly, click a frustum) becomes
``SetView`` commands: the wheel zooms towards the point under the cursor (the nearest of the
scene's sampled points there, else the cursor ray at the target's depth); a left drag orbits
about the target (the subject's centre after F) or, with Alt or ``orbit_pivot`` "cursor",
about the point under the cursor; F / Shift+F frame the subject / the whole scene, Home goes
back to the start view (the first training camera's). A left drag on a face handle of the
mesh bounds box (``bounds`` along ``frame``'s axes: the oriented box the mesh stage proposes)
moves that face (spirula/app/bounds_drag.py; ``bounds_dragged``); on one of the splat edit's crop box
(``crop``, its 15 numbers) it moves that face of the crop box (``crop_dragged`` while dragged,
``crop_released`` once at the end: one undoable step). With the Edit menu's box or brush tool
(``tool``), a left drag selects splats instead (EditSplats commands: its outline while
dragged, the selection on release; Shift adds, Ctrl removes). The mesh box's handle under
the mouse (or dragged) is ``active_face``, the crop box's ``crop_face`` (``hover_changed``:
the engine draws it highlighted) and the cursor becomes an open hand over it, a closed one
while dragging. The Qt thread never touches the GPU.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from spirula.engine.studio import protocol as M

from spirula.engine.studio.bounds_box import box_to_crop, crop_to_box

from .bounds_drag import FaceDrag, pick_face
from .image_view import ImageView, InputMixin
from .camera import OrbitCamera, pick, point_under

log = logging.getLogger("spirula.app.viewport_widget")

FLY_KEYS = {
    QtCore.Qt.Key.Key_W: (1, 0, 0), QtCore.Qt.Key.Key_S: (-1, 0, 0),
    QtCore.Qt.Key.Key_D: (0, 1, 0), QtCore.Qt.Key.Key_A: (0, -1, 0),
    QtCore.Qt.Key.Key_E: (0, 0, 1), QtCore.Qt.Key.Key_Q: (0, 0, -1),
}


class ViewController(QtCore.QObject):
    """Camera state of the viewport and the input that moves it."""

    view_changed = QtCore.Signal()           # the camera moved (at once; its SetView goes on the next tick)
    camera_picked = QtCore.Signal(int)
    bounds_dragged = QtCore.Signal(tuple)    # the mesh box while a face handle is dragged
    hover_changed = QtCore.Signal(int)       # active_face or crop_face changed (-1: none)
    crop_dragged = QtCore.Signal(tuple)      # the crop box (15 numbers) while a face handle is dragged
    crop_released = QtCore.Signal(tuple)     # ... and where the drag ended

    def __init__(self, send, parent=None):
        super().__init__(parent)
        self.send = send
        self.camera = OrbitCamera()
        self.look_through: int | None = None
        self.centers: np.ndarray | None = None   # dataset camera centres (picking)
        self.cameras: tuple = ()                 # CameraInfo of the scene
        self.size = QtCore.QSize(1, 1)           # logical pixels
        self._press: QtCore.QPointF | None = None
        self._last: QtCore.QPointF | None = None
        self._moved = False
        self._bounds: tuple = ()                 # the mesh box drawn in the viewport (its handles drag)
        self.frame: tuple = ()                   # its axes (9 floats, rows in world; (): the world's)
        self._crop: tuple = ()                   # the crop box: (bounds, frame) of spirula/engine/studio/bounds_box.py
        self._drag: FaceDrag | None = None
        self._drag_box = "mesh"                  # which box the drag moves: "mesh" or "crop"
        self._hover: tuple | None = None         # (box, face) whose handle is under the mouse
        self._keys: set = set()
        self.tool = "orbit"                      # left drag: "orbit", "box" or "brush" (select splats)
        self.brush_radius = 24.0                 # logical pixels
        self._stroke: list | None = None         # the selection being dragged: [(x, y), ...]
        self._stroke_mode = "set"
        self._dirty = False
        self._home = None
        self.subject: tuple = ()                 # world boxes F and Shift+F frame (SceneLoaded)
        self.extent: tuple = ()
        self.pick_points: np.ndarray | None = None  # [N, 3] the point under the cursor is one of these
        self.orbit_pivot = "subject"             # left drag turns about the target ("subject") or the
        self._pivot = None                       # point under the cursor at the press ("cursor", or Alt)
        self._t_fly = time.perf_counter()
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(16)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    # --- the boxes' handles -------------------------------------------------------------------
    @property
    def bounds(self) -> tuple:
        return self._bounds

    @bounds.setter
    def bounds(self, value: tuple) -> None:
        self._bounds = tuple(value)
        if not self._bounds and self._hover is not None and self._hover[0] == "mesh":
            self._set_hover(None)

    @property
    def crop(self) -> tuple:
        """The crop box's 15 numbers (spirula/engine/studio/bounds_box.py box_to_crop), () for none."""
        return box_to_crop(*self._crop) if self._crop else ()

    @crop.setter
    def crop(self, value: tuple) -> None:
        if self._drag is not None and self._drag_box == "crop":
            return   # the drag's box stands until its release
        self._crop = crop_to_box(value) if len(value) == 15 else ()
        if not self._crop and self._hover is not None and self._hover[0] == "crop":
            self._set_hover(None)

    def _face(self, box: str) -> int:
        if self._drag is not None:
            return self._drag.face if self._drag_box == box else -1
        return self._hover[1] if self._hover is not None and self._hover[0] == box else -1

    @property
    def active_face(self) -> int:
        """The mesh box's face whose handle is dragged, else the one under the mouse; -1: none."""
        return self._face("mesh")

    @property
    def crop_face(self) -> int:
        """The crop box's face whose handle is dragged, else the one under the mouse; -1: none."""
        return self._face("crop")

    def cursor_shape(self) -> QtCore.Qt.CursorShape:
        if self._drag is not None:
            return QtCore.Qt.CursorShape.ClosedHandCursor
        return QtCore.Qt.CursorShape.OpenHandCursor if self._hover is not None else QtCore.Qt.CursorShape.ArrowCursor

    def _set_hover(self, hover: tuple | None) -> None:
        before = (self.active_face, self.crop_face)
        self._hover = hover
        if (self.active_face, self.crop_face) != before:
            self.hover_changed.emit(self.active_face)

    def _boxes(self):
        """[(name, bounds, frame)] of the boxes whose handles drag: the mesh box, the crop box."""
        out = [("mesh", self._bounds, self.frame)] if self._bounds else []
        return out + ([("crop", *self._crop)] if self._crop else [])

    def pick(self, x: float, y: float) -> tuple | None:
        """(box, face) of the handle under (x, y) (logical pixels): the mesh box's before the crop box's."""
        if self.tool != "orbit":
            return None
        for name, bounds, frame in self._boxes():
            face = pick_face(self.camera, bounds, self.size.width(), self.size.height(), x, y, frame=frame)
            if face is not None:
                return name, face
        return None

    def hover(self, x: float, y: float) -> None:
        """The mouse moved without a button over (x, y) (logical pixels)."""
        self._set_hover(self.pick(x, y))

    def leave(self) -> None:
        if self._drag is None:
            self._set_hover(None)

    # --- scene -------------------------------------------------------------------------------
    def set_scene(self, msg: M.SceneLoaded) -> None:
        """A new scene: its boxes and points to frame and pick, and the start view: through
        its first training camera (its pose and field of view, turning about the subject's
        centre's depth along its axis), else the subject framed from the current direction."""
        cam = self.camera
        cam.scale = max(msg.radius, 1e-6)
        cam.set_up(msg.up)
        self.cameras = msg.cameras
        c, r = np.asarray(msg.center, float), float(msg.radius)
        self.subject = tuple(msg.subject) if len(msg.subject) == 6 else tuple((*(c - 0.5 * r), *(c + 0.5 * r)))
        self.extent = tuple(msg.extent) if len(msg.extent) == 6 else self.subject
        self.pick_points = np.asarray(msg.pick_points, np.float64).reshape(-1, 3) if msg.pick_points else None
        w, h = max(self.size.width(), 1), max(self.size.height(), 1)
        if msg.cameras:
            c2w = np.array([np.array(k.c2w).reshape(4, 4) for k in msg.cameras])
            self.centers = c2w[:, :3, 3]
            first = next((i for i, k in enumerate(msg.cameras) if k.split == "train"), 0)
            k = msg.cameras[first]
            cam.fov_y_deg = float(np.degrees(2 * np.arctan(0.5 * k.height / k.fy)))
            eye, fwd = c2w[first, :3, 3], c2w[first, :3, 2]
            mid = np.asarray(self.subject, float).reshape(2, 3).mean(0)
            dist = float(np.dot(mid - eye, fwd))
            cam.look_along(eye, fwd, dist if dist > 1e-3 * cam.scale else float(np.linalg.norm(mid - eye)) or 1.0)
        else:
            self.centers = None
            cam.fov_y_deg = 50.0
            cam.look_at(c - 2.5 * r * cam.axes()[2], c)
            cam.frame_box(self.subject, w, h)
        self.look_through = None
        self._home = (cam.target.copy(), cam.distance, cam.yaw, cam.pitch, cam.fov_y_deg)
        self.push()

    def reset(self) -> None:
        """The start view (Home)."""
        if self._home is not None:
            c = self.camera
            c.target, c.distance, c.yaw, c.pitch, c.fov_y_deg = (self._home[0].copy(), *self._home[1:])
        self.look_through = None
        self.push()

    def frame_subject(self) -> None:
        """F: look at the subject's box centre from the current direction, the box filling the view."""
        self._frame(self.subject)

    def frame_all(self) -> None:
        """Shift+F: the whole scene (its points and cameras) in view."""
        self._frame(self.extent or self.subject)

    def _frame(self, box) -> None:
        if len(box) != 6:
            return
        self.camera.frame_box(box, max(self.size.width(), 1), max(self.size.height(), 1))
        self.look_through = None
        self.push()

    def point_under(self, x: float, y: float) -> np.ndarray:
        """The world point under pixel (x, y): on the cursor's ray, at the depth of the
        nearest scene point seen there (the pick sample, spirula/app/camera.py point_under), else
        at the target's depth."""
        cam, w, h = self.camera, self.size.width(), self.size.height()
        p = point_under(cam, self.pick_points, w, h, x, y)
        depth = cam.distance if p is None else float((p - cam.eye) @ cam.forward)
        eye, d = cam.ray(x, y, w, h)
        return eye + d * (depth / max(float(d @ cam.forward), 1e-6))

    def look_through_camera(self, index: int) -> None:
        """Use dataset camera ``index``'s pose and intrinsics; the orbit camera follows so
        the next drag starts from there."""
        if not (0 <= index < len(self.cameras)):
            return
        c = self.cameras[index]
        c2w = np.array(c.c2w).reshape(4, 4)
        eye, fwd = c2w[:3, 3], c2w[:3, 2]
        dist = float(np.dot(self.camera.target - eye, fwd))
        self.camera.look_along(eye, fwd, dist if dist > 1e-3 * self.camera.scale else self.camera.distance)
        self.camera.fov_y_deg = float(np.degrees(2 * np.arctan(0.5 * c.height / c.fy)))
        self.look_through = index
        self.push()
        self.camera_picked.emit(index)

    def push(self) -> None:
        """Send the view now."""
        self._dirty = False
        self.send(M.SetView(tuple(float(v) for v in self.camera.w2c().reshape(-1)), self.camera.fov_y_deg,
                            self.look_through))
        self.view_changed.emit()

    def _changed(self) -> None:
        self.look_through = None
        self._dirty = True  # sent on the next tick: a burst of mouse moves is one SetView
        self.view_changed.emit()  # the readback surface shows the move at once (spirula/app/image_view.py)

    def pivot(self) -> np.ndarray:
        """The world point the view turns about: the point under the cursor a drag turns
        about, else the target."""
        return self._pivot if self._pivot is not None else self.camera.target

    def _tick(self) -> None:
        now = time.perf_counter()
        dt, self._t_fly = min(now - self._t_fly, 0.1), now
        if self._keys:
            f = sum(FLY_KEYS[k][0] for k in self._keys)
            r = sum(FLY_KEYS[k][1] for k in self._keys)
            u = sum(FLY_KEYS[k][2] for k in self._keys)
            if f or r or u:
                self.camera.fly(f, r, u, dt)
                self._changed()
        if self._dirty:
            self.push()

    # --- input ---------------------------------------------------------------------------------
    # --- selecting splats (the Edit menu's box and brush tools) --------------------------------
    def _edit_command(self, op: str = "select", **kw) -> M.EditSplats:
        return M.EditSplats(op, w2c=tuple(float(v) for v in self.camera.w2c().reshape(-1)),
                            fov_y_deg=float(self.camera.fov_y_deg), width=float(self.size.width()),
                            height=float(self.size.height()), **kw)

    def select_box(self, x0: float, y0: float, x1: float, y1: float, mode: str = "set") -> None:
        """Select the splats whose centres are seen inside the rectangle (logical pixels)."""
        self.send(self._edit_command(rect=(x0, y0, x1, y1), mode=mode))

    def select_brush(self, points, mode: str = "set") -> None:
        """Select the splats a brush stroke through ``points`` [(x, y), ...] (logical pixels) painted."""
        flat = tuple(float(v) for p in points for v in p)
        self.send(self._edit_command(brush=flat, radius=self.brush_radius, mode=mode))

    def mouse_press(self, ev: QtGui.QMouseEvent) -> None:
        self._press = self._last = ev.position()
        self._moved = False
        self._drag = None
        self._stroke = None
        self._pivot = None
        if ev.button() == QtCore.Qt.MouseButton.LeftButton and (
                self.orbit_pivot == "cursor" or ev.modifiers() & QtCore.Qt.KeyboardModifier.AltModifier):
            self._pivot = self.point_under(ev.position().x(), ev.position().y())
        if self.tool != "orbit" and ev.button() == QtCore.Qt.MouseButton.LeftButton:
            m = ev.modifiers()
            self._stroke_mode = ("add" if m & QtCore.Qt.KeyboardModifier.ShiftModifier else
                                 "remove" if m & QtCore.Qt.KeyboardModifier.ControlModifier else "set")
            self._stroke = [(ev.position().x(), ev.position().y())]
            return
        if ev.button() == QtCore.Qt.MouseButton.LeftButton:
            p, w, h = ev.position(), self.size.width(), self.size.height()
            hit = self.pick(p.x(), p.y())
            if hit is not None:
                name, face = hit
                bounds, frame = (self._bounds, self.frame) if name == "mesh" else self._crop
                self._drag, self._drag_box = FaceDrag(self.camera, bounds, face, w, h, (p.x(), p.y()), frame), name
                self._hover = hit
                self.hover_changed.emit(self.active_face)  # the cursor closes

    def mouse_move(self, ev: QtGui.QMouseEvent) -> None:
        if self._last is None:
            self.hover(ev.position().x(), ev.position().y())
            return
        p = ev.position()
        d = p - self._last
        self._last = p
        if self._stroke is not None:
            if self.tool == "brush":
                self._stroke.append((p.x(), p.y()))
                self.send(self._edit_command("outline", brush=tuple(float(v) for q in self._stroke for v in q)))
            else:
                self._stroke[1:] = [(p.x(), p.y())]
                (x0, y0), (x1, y1) = self._stroke[0], self._stroke[-1]
                self.send(self._edit_command("outline", rect=(x0, y0, x1, y1)))
            return
        if not self._moved and (p - self._press).manhattanLength() < 3:
            return
        self._moved = True
        if self._drag is not None:
            new = self._drag.at((p.x(), p.y()))
            if self._drag_box == "crop":
                if new != self._crop[0]:
                    self._crop = (new, self._crop[1])
                    self.crop_dragged.emit(self.crop)
            elif new != self.bounds:
                self.bounds = new
                self.bounds_dragged.emit(new)
            return
        b = ev.buttons()
        pan = (b & (QtCore.Qt.MouseButton.RightButton | QtCore.Qt.MouseButton.MiddleButton)) or (
            ev.modifiers() & QtCore.Qt.KeyboardModifier.ShiftModifier)
        if pan:
            self.camera.pan(d.x(), d.y(), self.size.height())
        elif b & QtCore.Qt.MouseButton.LeftButton and self._pivot is not None:
            self.camera.orbit_about(self._pivot, d.x(), d.y())
        elif b & QtCore.Qt.MouseButton.LeftButton:
            self.camera.orbit(d.x(), d.y())
        self._changed()

    def mouse_release(self, ev: QtGui.QMouseEvent) -> None:
        if self._stroke is not None:
            stroke, self._stroke, self._press, self._last = self._stroke, None, None, None
            if self.tool == "brush":
                self.select_brush(stroke, self._stroke_mode)
            else:
                (x0, y0), (x1, y1) = stroke[0], stroke[-1]
                self.select_box(x0, y0, x1, y1, self._stroke_mode)
            return
        if (self._press is not None and not self._moved and self._drag is None
                and ev.button() == QtCore.Qt.MouseButton.LeftButton):
            self.click(ev.position().x(), ev.position().y())
        dragged = self._drag is not None
        crop_moved = dragged and self._drag_box == "crop" and self._moved and self._crop[0] != self._drag.bounds
        self._press = self._last = self._drag = None
        if crop_moved:
            self.crop_released.emit(self.crop)
        if dragged:
            self.hover_changed.emit(self.active_face)  # the cursor opens (or the handle is left)
        self.hover(ev.position().x(), ev.position().y())

    def click(self, x: float, y: float) -> int | None:
        """Pick the frustum under (x, y) (logical pixels) and look through it."""
        i = pick(self.camera, self.centers, self.size.width(), self.size.height(), x, y)
        if i is not None:
            self.look_through_camera(i)
        return i

    def wheel(self, ev: QtGui.QWheelEvent) -> None:
        """Zoom towards the point under the cursor."""
        self.zoom_at(ev.position().x(), ev.position().y(), ev.angleDelta().y() / 120.0)

    def zoom_at(self, x: float, y: float, steps: float) -> None:
        self.camera.zoom_to(steps, self.point_under(x, y))
        self._changed()

    def key_press(self, ev: QtGui.QKeyEvent) -> bool:
        k = ev.key()
        if k in FLY_KEYS:
            if not ev.isAutoRepeat():
                self._keys.add(k)
                self._t_fly = time.perf_counter()
            return True
        # the window's shortcuts (spirula/app/window.py) answer these first; a native render window
        # whose key events do not reach the shortcut map still gets them here
        if k == QtCore.Qt.Key.Key_F:
            shift = ev.modifiers() & QtCore.Qt.KeyboardModifier.ShiftModifier
            self.frame_all() if shift else self.frame_subject()
            return True
        if k == QtCore.Qt.Key.Key_Home:
            self.reset()
            return True
        return False

    def key_release(self, ev: QtGui.QKeyEvent) -> bool:
        if ev.key() in FLY_KEYS:
            if not ev.isAutoRepeat():
                self._keys.discard(ev.key())
            return True
        return False

    def release_keys(self) -> None:
        self._keys.clear()


class RenderWindow(InputMixin, QtGui.QWindow):
    """The native window the engine's swapchain presents into."""

    resized = QtCore.Signal()
    exposed = QtCore.Signal()

    def __init__(self, controller: ViewController):
        super().__init__()
        self.controller = controller
        self.setSurfaceType(QtGui.QSurface.SurfaceType.VulkanSurface)

    def resizeEvent(self, ev):  # noqa: N802
        self.resized.emit()

    def exposeEvent(self, ev):  # noqa: N802
        if self.isExposed():
            self.exposed.emit()


class Viewport(QtWidgets.QWidget):
    """Swapchain window (in a container) or readback image, chosen automatically."""

    resized = QtCore.Signal(int, int)   # physical pixels

    def __init__(self, controller: ViewController, parent=None):
        super().__init__(parent)
        self.controller = controller
        self.mode = "readback"
        self.reason = "not attached yet"
        self.window_ = RenderWindow(controller)
        self.container = QtWidgets.QWidget.createWindowContainer(self.window_, self)
        self.container.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
        self.container.setMinimumSize(64, 64)
        self.image_view = ImageView(controller, self)
        self.stack = QtWidgets.QStackedLayout(self)
        self.stack.setContentsMargins(0, 0, 0, 0)
        self.stack.addWidget(self.container)
        self.stack.addWidget(self.image_view)
        self.stack.setCurrentWidget(self.image_view)
        self.window_.resized.connect(self._emit_size)
        controller.hover_changed.connect(self._update_cursor)
        self.setMinimumSize(160, 120)

    def physical_size(self) -> tuple[int, int]:
        dpr = self.devicePixelRatioF()
        return max(1, round(self.width() * dpr)), max(1, round(self.height() * dpr))

    def native_handle(self) -> tuple[str, tuple] | tuple[None, str]:
        """(platform, handle) for AttachSurface, or (None, why not)."""
        platform = QtGui.QGuiApplication.platformName()
        app = QtGui.QGuiApplication.instance()
        if platform == "xcb":
            try:
                display = app.nativeInterface().display()
            except Exception as exc:
                return None, f"no X11 display handle from Qt: {exc}"
            return "xcb", (int(display), int(self.window_.winId()))
        if platform == "windows":
            return "windows", (int(self.window_.winId()),)
        if platform == "cocoa":
            return "cocoa", (int(self.window_.winId()),)
        if platform == "wayland":
            return None, ("Wayland: slangpy 0.43.1 creates no Wayland surface; run with QT_QPA_PLATFORM=xcb "
                          "(XWayland) for the Vulkan viewport")
        return None, f"the Qt platform '{platform}' has no native window to present into"

    def use_swapchain(self) -> None:
        self.mode = "swapchain"
        self.stack.setCurrentWidget(self.container)

    def use_readback(self, reason: str) -> None:
        if self.mode != "readback" or reason != self.reason:
            log.warning("viewport: readback to QImage (%s)", reason)
        self.mode, self.reason = "readback", reason
        self.stack.setCurrentWidget(self.image_view)

    def resizeEvent(self, ev):  # noqa: N802
        super().resizeEvent(ev)
        self.controller.size = ev.size()
        self._emit_size()

    def _emit_size(self) -> None:
        self.controller.size = self.size()
        self.resized.emit(*self.physical_size())

    def _update_cursor(self, _face: int = -1) -> None:
        cursor = QtGui.QCursor(self.controller.cursor_shape())
        self.window_.setCursor(cursor)
        self.image_view.setCursor(cursor)

    def take_focus(self) -> None:
        """Keyboard focus to the viewport (its keys: W A S D, F)."""
        (self.container if self.mode == "swapchain" else self.image_view).setFocus()

    def show_frame(self, frame: M.PreviewFrame) -> None:
        self.image_view.set_frame(frame)


def fit_points(eye, center, points, fov_y_deg: float, size, margin: float = 0.9) -> np.ndarray:
    """``eye`` moved back along its line of sight to ``center`` until every point of
    ``points`` [N, 3] lies inside the view (the narrower of the vertical and horizontal
    fields of view, times ``margin``): the start view shows every camera of a wide capture."""
    eye, center = np.asarray(eye, float), np.asarray(center, float)
    d = center - eye
    dist = float(np.linalg.norm(d))
    if dist <= 0 or points is None or len(points) == 0:
        return eye
    d /= dist
    aspect = size.width() / size.height() if size.height() > 0 else 1.0
    half_y = np.radians(fov_y_deg) / 2
    half = min(half_y, np.arctan(np.tan(half_y) * aspect))
    rel = np.asarray(points, float) - center
    along = rel @ d                                          # [N] depth past the centre
    lateral = np.linalg.norm(rel - along[:, None] * d, axis=1)
    need = float(np.max(lateral / np.tan(half * margin) - along))
    return center - d * max(dist, need)
