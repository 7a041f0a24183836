"""Dynamic resolution of the viewport's splat render (engine/studio/viewer.py): the render
scale that keeps a frame near its time target while the view moves, and the sharper scale of
the frame made once the view is still."""

from __future__ import annotations

import math
import os

import numpy as np


class AdaptiveResolution:
    """Mixed into the Viewer: ``render_scale`` (1 = viewport resolution) from the last frames'
    times; ``adaptive`` False (benchmarks, ``$SPIRULA_VIEWER_SCALE``) keeps it fixed."""

    state: object  # the Viewer's ViewState (width, height)

    def init_adaptive(self, software: bool) -> None:
        self.target_ms = 120.0 if software else 12.0
        self.max_scale = 8.0
        self.render_scale = 2.0 if software else 1.0
        self.adaptive = True
        self._samples: list[tuple[float, float]] = []
        self._model: tuple[float, float] | None = None  # frame ms ~ a + b * pixels
        self.refine_ms = 1500.0  # a still view is re-rendered sharper, within this time
        fixed = os.environ.get("SPIRULA_VIEWER_SCALE")
        if fixed:  # a fixed render scale (benchmarks): 1 = full viewport resolution
            self.render_scale, self.adaptive = max(1.0, float(fixed)), False

    def _adapt(self, render_ms: float, pixels: int) -> None:
        """Dynamic resolution of the splat render. Cost is modelled as a + b * pixels from
        the last frames (a: projection, sorts and dispatch overhead; b: per pixel); the next
        scale fits ``target_ms``, or, when the fixed part alone exceeds it, spends no more
        on pixels than on the fixed part (a lower resolution would not be faster)."""
        if not self.adaptive or render_ms <= 0 or pixels <= 0:
            return
        self._samples.append((float(pixels), float(render_ms)))
        del self._samples[:-8]
        p = np.array([q for q, _ in self._samples])
        t = np.array([m for _, m in self._samples])
        if np.ptp(p) > 0.1 * p.max():
            b, a = np.polyfit(p, t, 1)
            if b <= 0:
                a, b = float(t.mean()), 1e-12
        else:
            a, b = 0.0, float(t.mean() / p.mean())
        a, b = max(a, 0.0), max(b, 1e-12)
        self._model = (a, b)
        full = self.state.width * self.state.height
        if a + b * full <= self.target_ms:
            want = 1.0
        else:
            budget = self.target_ms - a if a < 0.5 * self.target_ms else a
            want = math.sqrt(full / max(budget / b, 1.0))
        want = min(max(want, 1.0), self.max_scale)
        # move half way (in log scale) so noisy frames do not make it jump
        self.render_scale = min(max(math.sqrt(self.render_scale * want), 1.0), self.max_scale)
        if abs(self.render_scale - want) < 0.05:
            self.render_scale = want

    def refine_scale(self) -> float:
        """Scale of the sharper frame made once the view is still: full resolution, or as
        close as ``refine_ms`` allows by the cost model."""
        if self._model is None:
            return 1.0
        a, b = self._model
        full = self.state.width * self.state.height
        if a + b * full <= self.refine_ms:
            return 1.0
        pixels = max((self.refine_ms - a) / b, full / self.render_scale ** 2)
        return min(max(math.sqrt(full / max(pixels, 1.0)), 1.0), self.render_scale)
