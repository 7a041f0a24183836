"""The viewport's moving frames on a slow device (spirula/engine/studio/adaptive.py): when a frame's
fixed part (per Gaussian) alone misses the target, the moving view draws fewer Gaussians and
pixels until its frames fit, and steps back up when they are fast; a still view draws all.
No GPU: the frame time is a stand-in cost model."""

from types import SimpleNamespace

import pytest

from spirula.engine.studio.adaptive import MIN_SHARE_STEPS, AdaptiveResolution


def _adaptive(width=960, height=600):
    a = AdaptiveResolution()
    a.state = SimpleNamespace(width=width, height=height)
    a.init_adaptive(software=True)
    return a


def _moving_frames(a, cost, frames=30):
    """Frames of a moving view: ``cost(share, pixels)`` ms each; the last frame's ms."""
    ms = None
    for _ in range(frames):
        k = min(a.render_scale * a.move_scale, a.max_scale)
        pixels = (a.state.width / k) * (a.state.height / k)
        ms = cost(a.splat_share, pixels)
        a._adapt_moving(ms)
    return ms


def test_a_fixed_part_over_the_target_thins_the_moving_view_until_it_fits():
    a = _adaptive()
    a.render_scale = 1.0
    cost = lambda share, pixels: 600.0 * share + 1e-4 * pixels   # noqa: E731 (software: 150k Gaussians)
    assert cost(1.0, 960 * 600) > 5 * a.target_ms
    ms = _moving_frames(a, cost)
    assert ms <= a.target_ms and a.move_level > 0 and a.splat_share < 0.2
    # fast frames step back up: a cheap scene at the end goes back to every Gaussian
    ms = _moving_frames(a, lambda share, pixels: 1.0 + 1e-6 * pixels, frames=2 * 2 * MIN_SHARE_STEPS)
    assert a.move_level == 0 and a.splat_share == 1.0 and a.move_scale == 1.0


def test_a_frame_already_fast_stays_whole():
    a = _adaptive()
    _moving_frames(a, lambda share, pixels: 20.0 * share + 1e-5 * pixels)
    assert a.move_level == 0


@pytest.mark.parametrize("level, share, scale", [(0, 1.0, 1.0), (1, 0.5 ** 0.5, 1.0), (2, 0.5 ** 0.5, 2 ** 0.5),
                                                 (3, 0.5, 2 ** 0.5), (16, 1 / 16, 16.0)])
def test_levels_alternate_share_and_pixels(level, share, scale):
    a = _adaptive()
    a.move_level = level
    assert a.splat_share == pytest.approx(share) and a.move_scale == pytest.approx(scale)


def test_a_drag_starts_at_the_level_the_still_frames_predict():
    a = _adaptive()
    a.render_scale = 1.0
    for pixels in (960 * 600, 480 * 300, 960 * 600, 240 * 150):   # still frames: 500 ms fixed + per pixel
        a._adapt(500.0 + 1e-4 * pixels, pixels)
    a.render_scale = 1.0
    a.start_moving()
    # 500 + 57.6 ms predicted against 60 ms: about 9.3x, 2 log2 9.3 = 6.4 -> level 6
    assert a.move_level == 6
    a.move_level = 9
    a.start_moving()
    assert a.move_level == 9      # never back up from a lower level the last drag found
    fast = _adaptive()
    for pixels in (960 * 600, 480 * 300):
        fast._adapt(5.0 + 1e-6 * pixels, pixels)
    fast.start_moving()
    assert fast.move_level == 0
