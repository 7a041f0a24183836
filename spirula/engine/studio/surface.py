"""Presenting the viewport into a window (spirula/engine/studio/viewer.py): the Vulkan surface and its
swapchain, acquiring an image, copying a composed frame into it, presenting it, and the switch
to read-back when any of that fails."""

from __future__ import annotations

import logging

import slangpy as spy

from .polling import wait_polling

log = logging.getLogger("spirula.viewer")


class PresentError(RuntimeError):
    """Presenting into the window's surface failed; the viewer switched to readback."""


class SwapchainPresenter:
    """Mixed into the Viewer (its ``gpu``, ``bufs`` and the ``out<slot>`` buffers it composes
    frames into): ``surface`` None means read-back mode, with ``readback_reason``."""

    def init_surface(self) -> None:
        self.surface: spy.Surface | None = None
        self.surface_size = (0, 0)
        self._present_failures = 0
        self.readback_reason = "no window surface attached"

    @property
    def presenting(self) -> bool:
        return self.surface is not None

    def attach(self, platform: str, handle: tuple, width: int, height: int) -> str | None:
        """Create a swapchain on a native window. Returns None, or why it is not possible
        (the viewer then stays in readback mode)."""
        self.detach()
        try:
            if platform == "xcb":
                wh = spy.WindowHandle(int(handle[0]), int(handle[1]))
            elif platform == "windows":
                wh = spy.WindowHandle(int(handle[0]))  # type: ignore[call-arg]
            elif platform == "cocoa":
                wh = spy.WindowHandle(int(handle[0]))  # type: ignore[call-arg]
            else:
                return f"no Vulkan surface for the Qt platform '{platform}' in slangpy {spy.__version__}"
            surface = self.gpu.device.create_surface(wh)
            info = surface.info
            if spy.Format.bgra8_unorm not in list(info.formats):
                return f"the window surface offers {list(info.formats)}, not bgra8_unorm"
            if not (int(info.supported_usage) & int(spy.TextureUsage.copy_destination)):
                return "the window surface does not accept copies (copy_destination)"
        except Exception as exc:  # driver or platform refuses: readback
            return f"creating a Vulkan surface failed: {exc}".strip()
        self.surface = surface
        self.surface_size = (0, 0)
        try:
            self._configure(width, height)
        except Exception as exc:
            self.surface = None
            return f"configuring the swapchain failed: {exc}".strip()
        self.readback_reason = ""
        return None

    def detach(self) -> None:
        if self.surface is not None:
            wait_polling(self.gpu)
            try:
                self.surface.unconfigure()
            except Exception:  # the window may already be gone
                pass
            self.surface = None
            self.surface_size = (0, 0)

    def _configure(self, width: int, height: int) -> None:
        if self.surface is None or width <= 0 or height <= 0:
            return
        if self.surface_size != (width, height):
            wait_polling(self.gpu)
            self.surface.configure(width=width, height=height, format=spy.Format.bgra8_unorm,
                                   usage=spy.TextureUsage.copy_destination, desired_image_count=3, vsync=False)
            self.surface_size = (width, height)

    def _present(self) -> None:
        try:
            self.surface.present()
            self._present_failures = 0
        except Exception as exc:  # e.g. out of date after a resize: reconfigure next frame
            self._present_failures += 1
            self.surface_size = (0, 0)
            if self._present_failures >= 3:
                self._fail_present(None, exc)

    def _record_present_copy(self, enc, tex, slot: int, w: int, h: int) -> None:
        """Copy output ``slot`` (w x h) into the swapchain image ``tex``, ready to present."""
        try:
            out = self.bufs.get(f"out{slot}", 4 * w * h)
            enc.copy_buffer_to_texture(tex, 0, 0, spy.uint3(0, 0, 0), out, 0, 4 * w * h, 4 * w, spy.uint3(w, h, 1))
            enc.set_texture_state(tex, spy.ResourceState.present)
        except Exception as exc:
            self._fail_present(enc, exc)

    def _submit_present_copy(self, tex, slot: int, w: int, h: int) -> int:
        """Submit the copy of output ``slot`` into ``tex`` on its own; returns the submission."""
        enc = self.gpu.encoder()
        self._record_present_copy(enc, tex, slot, w, h)
        return self.gpu.submit(enc)

    def _acquire(self, w: int, h: int):
        """The next swapchain image at w x h; one retry with a fresh swapchain (a window
        resized under us makes the old one out of date). A second failure switches to
        read-back (PresentError)."""
        for attempt in range(2):
            try:
                if attempt:
                    self.surface_size = (0, 0)
                self._configure(w, h)
                tex = self.surface.acquire_next_image()
                if tex is None or (tex.width, tex.height) != (w, h):
                    raise RuntimeError(f"swapchain image is {None if tex is None else (tex.width, tex.height)}, "
                                       f"expected {(w, h)}")
                return tex
            except Exception as exc:
                if attempt:
                    self._fail_present(None, exc)
        raise AssertionError("unreachable")

    def _fail_present(self, enc, exc: Exception) -> None:
        reason = f"presenting to the window failed: {exc}".strip()
        log.warning("%s; switching the viewport to readback", reason)
        if enc is not None:
            self.gpu.submit(enc)
        wait_polling(self.gpu)
        try:
            if self.surface is not None:
                self.surface.unconfigure()
        except Exception:
            pass
        self.surface = None
        self.readback_reason = reason
        raise PresentError(reason)
