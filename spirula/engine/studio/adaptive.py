"""Dynamic resolution of the viewport's splat render (spirula/engine/studio/viewer.py): the render
scale that keeps a frame near its time target while the view moves, and the sharper scale of
the frame made once the view is still.

On a slow device the fixed part of a frame (projection and sorting, per Gaussian) alone can
miss the target at any resolution (software Vulkan: 0.6 s for 150k Gaussians at 960x600).
While the view moves, frames step down a ``move_level`` (0 .. 2 x MIN_SHARE_STEPS): each odd
step cuts the share of the Gaussians drawn by sqrt(2) (``splat_share``, taken as the first
``n x splat_share`` of the model, whose order is the init's and MCMC's, unrelated to position:
a thinned, fainter preview), each even step the pixels by 2 (``move_scale``, on top of
``render_scale``); a frame over ``target_ms`` steps down by its overshoot, one under half of it
steps back up; a drag's first frame starts at the level the cost model of the still frames
predicts (``start_moving``), not at the top. Steady levels keep the last frame's intersection
count usable. The frames of
a still view draw every Gaussian at the adaptive resolution; only those feed the cost model."""

from __future__ import annotations

import math
import os

import numpy as np

MIN_SHARE_STEPS = 12  # splat_share goes down to sqrt(1/2) ** 12 = 1/64 of the Gaussians


class AdaptiveResolution:
    """Mixed into the Viewer: ``render_scale`` (1 = viewport resolution) from the last frames'
    times; ``adaptive`` False (benchmarks, ``$SPIRULA_VIEWER_SCALE``) keeps it fixed."""

    state: object  # the Viewer's ViewState (width, height)

    def init_adaptive(self, software: bool) -> None:
        # software Vulkan: a moving view's input waits about a frame and a half (the frame under
        # way, then its own), so 60 ms keeps it near 100 ms, under 150 ms (issue 50)
        self.target_ms = 60.0 if software else 12.0
        self.move_level = 0   # moving frames: fewer Gaussians and pixels (the module docstring)
        self.was_moving = False
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

    @property
    def splat_share(self) -> float:
        """The share of the Gaussians a moving view's frame draws (1: all)."""
        return 0.5 ** (0.5 * ((self.move_level + 1) // 2))

    @property
    def move_scale(self) -> float:
        """The factor on ``render_scale`` of a moving view's frame (1: none)."""
        return 2.0 ** (0.5 * (self.move_level // 2))

    def start_moving(self) -> None:
        """The view starts moving: step down at once to the level the cost model (the still
        frames', a + b x pixels at ``render_scale``) needs to fit ``target_ms``, if lower."""
        if not self.adaptive or self._model is None:
            return
        a, b = self._model
        pixels = self.state.width * self.state.height / self.render_scale ** 2
        predicted = a + b * pixels
        if predicted > self.target_ms:
            need = round(2.0 * math.log2(predicted / self.target_ms))
            self.move_level = min(max(self.move_level, need), 2 * MIN_SHARE_STEPS)

    def _adapt_moving(self, render_ms: float) -> None:
        """After a moving frame: over ``target_ms`` step down by the overshoot (a step ~ a
        factor sqrt(2) of cost), under half of it one step back up."""
        if not self.adaptive or render_ms <= 0:
            return
        if render_ms > self.target_ms:
            k = max(1, round(2.0 * math.log2(render_ms / self.target_ms)))
            self.move_level = min(self.move_level + k, 2 * MIN_SHARE_STEPS)
        elif render_ms < 0.5 * self.target_ms:
            self.move_level = max(self.move_level - 1, 0)

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
