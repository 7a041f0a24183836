"""The viewport's input handlers, shared by its two surfaces, and its readback surface: a
widget painting the newest frame the engine read back.

On a slow device (software Vulkan: a training step takes seconds, a frame a tenth of one)
the window shows the frames itself (:func:`readback_reason`), so that it can answer a camera
move at once, whatever the engine thread is doing: each paint shows the last frame
reprojected for the camera the user has moved to since it was rendered
(spirula/app/view_warp.py), until the engine's own render of a newer camera arrives and
replaces it; once the camera stops, the engine's frame of that camera is shown as it is,
pixel for pixel. ``$SPIRULA_VIEW_WARP=0`` turns the reprojection off (to measure without it);
``$SPIRULA_VIEWER`` = ``readback`` / ``swapchain`` forces either surface on any device."""

from __future__ import annotations

import os
import time

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from spirula.engine.studio import protocol as M
from spirula.engine.studio.overlays import BG_BOTTOM, BG_TOP

from .view_warp import free_intrinsics, maps_in_front, plane_homography, same_view

PAINT_HZ = 60.0  # the most paints a second the camera's moves cause (the engine's frames are painted as they come)
SLOW_DEVICE = ("software Vulkan: the window shows the frames itself, so a camera move is answered at once "
               "(the last frame reprojected) while the engine trains or renders")


def readback_reason(software: bool) -> str | None:
    """Why the viewport shows read-back frames rather than presenting into its native window
    (``$SPIRULA_VIEWER``, or a slow device: ``software``), or None: present."""
    forced = os.environ.get("SPIRULA_VIEWER", "").lower()
    if forced == "readback":
        return "SPIRULA_VIEWER=readback"
    return SLOW_DEVICE if software and forced != "swapchain" else None


class InputMixin:
    """Mouse, wheel and keys of a viewport surface go to its ``controller`` (ViewController)."""

    controller: object

    def mousePressEvent(self, ev):  # noqa: N802 (Qt names)
        self.controller.mouse_press(ev)

    def mouseMoveEvent(self, ev):  # noqa: N802
        self.controller.mouse_move(ev)

    def mouseReleaseEvent(self, ev):  # noqa: N802
        self.controller.mouse_release(ev)

    def wheelEvent(self, ev):  # noqa: N802
        self.controller.wheel(ev)

    def keyPressEvent(self, ev):  # noqa: N802
        if not self.controller.key_press(ev):
            super().keyPressEvent(ev)

    def keyReleaseEvent(self, ev):  # noqa: N802
        if not self.controller.key_release(ev):
            super().keyReleaseEvent(ev)

    def focusOutEvent(self, ev):  # noqa: N802
        self.controller.release_keys()
        super().focusOutEvent(ev)

    def event(self, ev):
        # Leave reaches QWindow.event but not a QWindow subclass's leaveEvent (PySide6 6.x)
        if ev.type() == QtCore.QEvent.Type.Leave:
            self.controller.leave()
        return super().event(ev)


def _qcolor(rgb) -> QtGui.QColor:
    return QtGui.QColor(*(int(round(255 * c)) for c in rgb))


class ImageView(InputMixin, QtWidgets.QWidget):
    """Readback surface: paints the newest frame the engine read back, reprojected for the
    controller's camera when that has moved on since (the module docstring). ``shown``:
    (w2c [4, 4] of the camera the last paint showed or None, whether it was reprojected),
    ``paint_ms`` its time;
    ``painted`` is emitted after each paint (tests, benchmarks/studio_input_latency.py)."""

    painted = QtCore.Signal()

    def __init__(self, controller, parent=None):
        super().__init__(parent)
        self.controller = controller
        self.image: QtGui.QImage | None = None
        self.frame_camera: tuple | None = None   # (w2c [4, 4], (fx, fy, cx, cy)) of image; None: not a free view
        self.warp = os.environ.get("SPIRULA_VIEW_WARP", "1") != "0"
        self.shown: tuple = (None, False)
        self.paint_ms = 0.0                      # the last paint's time (ms)
        self.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
        self.setMouseTracking(True)  # moves without a button: the bounds handles' hover
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self._painted_at = float("-inf")         # perf_counter() of the last paint
        self._repaint = QtCore.QTimer(self)
        self._repaint.setSingleShot(True)
        self._repaint.timeout.connect(self.update)
        controller.view_changed.connect(self._camera_moved)

    def _camera_moved(self) -> None:
        """A camera move is painted at once, not when the engine answers; at most at
        PAINT_HZ (a display shows no more, and on a slow device the paints share its CPU)."""
        wait = self._painted_at + 1.0 / PAINT_HZ - time.perf_counter()
        if wait <= 0:
            self.update()
        elif not self._repaint.isActive():
            self._repaint.start(max(1, int(1000 * wait)))

    def set_frame(self, frame: M.PreviewFrame) -> None:
        img = QtGui.QImage(frame.data, frame.width, frame.height, 4 * frame.width, QtGui.QImage.Format.Format_RGB32)
        self.image = img.copy()  # own the pixels (the bytes object may go)
        self.image.setDevicePixelRatio(self.devicePixelRatioF())
        free = len(frame.w2c) == 16 and len(frame.intrinsics) == 4
        self.frame_camera = (np.asarray(frame.w2c, np.float64).reshape(4, 4), tuple(frame.intrinsics)) if free else None
        self.update()

    def homography(self) -> np.ndarray | None:
        """[3, 3] from the frame's pixels to this widget's physical pixels for the controller's
        camera, or None: the frame is shown as it is (the same camera, no free camera, the
        reprojection off or impossible)."""
        c = self.controller
        if not self.warp or self.image is None or self.frame_camera is None or c.look_through is not None:
            return None
        dpr = self.devicePixelRatioF()
        k = free_intrinsics(c.camera.fov_y_deg, self.width() * dpr, self.height() * dpr)
        w2c = c.camera.w2c()
        fw2c, fk = self.frame_camera
        if same_view(fw2c, fk, w2c, k):
            return None
        h = plane_homography(fw2c, fk, w2c, k, c.pivot())
        return h if h is not None and maps_in_front(h, self.image.width(), self.image.height()) else None

    def paintEvent(self, ev):  # noqa: N802
        t0 = time.perf_counter()
        p = QtGui.QPainter(self)
        h = self.homography()
        if self.image is None or h is not None:  # the background shows where the frame does not reach
            g = QtGui.QLinearGradient(0, 0, 0, max(self.height(), 1))
            g.setColorAt(0.0, _qcolor(BG_TOP))
            g.setColorAt(1.0, _qcolor(BG_BOTTOM))
            p.fillRect(self.rect(), g)
        if self.image is not None:
            if h is not None:
                d = self.image.devicePixelRatio()
                # nearest pixel: a projective bilinear draw costs 3x (8 against 2.7 ms at 660 x 670 px
                # on the 2-core machine), CPU the engine's software device shares
                p.setRenderHint(QtGui.QPainter.RenderHint.SmoothPixmapTransform, False)
                p.setTransform(QtGui.QTransform.fromScale(d, d) * QtGui.QTransform(*h.T.reshape(-1))
                               * QtGui.QTransform.fromScale(1 / d, 1 / d))
            p.drawImage(QtCore.QPointF(0, 0), self.image)
        p.end()
        if self.image is None:
            self.shown = (None, False)
        elif h is not None:
            self.shown = (self.controller.camera.w2c(), True)
        else:
            self.shown = (self.frame_camera[0] if self.frame_camera is not None else None, False)
        self._painted_at = time.perf_counter()
        self.paint_ms = 1000.0 * (self._painted_at - t0)
        self.painted.emit()
