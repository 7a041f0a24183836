"""The viewport's one-submission frames (engine/studio/viewer.py): a frame sized from the
last frame's intersection count shows the same pixels as one counted exactly, and a frame
whose count outgrew that capacity is rendered again before anything shows it."""

import numpy as np
import pytest

from engine.profile.bench_viewer import ball_scene, orbit_w2c
from engine.studio.viewer import Viewer, ViewSource


@pytest.fixture(scope="module")
def scene(gpu):
    rows = ball_scene(20_000, 1, seed=7)
    return ViewSource(gpu.upload(rows, "test.viewer.params"), len(rows), 1, 1)


def _viewer(gpu) -> Viewer:
    v = Viewer(gpu)
    v.adaptive, v.render_scale = False, 1.0
    v.resize(160, 120)
    return v


def test_capacity_frames_match_exact_frames_and_overflow_renders_again(gpu, scene):
    v = _viewer(gpu)
    v.state.w2c = orbit_w2c(1, 12)
    exact = v.render(scene)  # first frame: counted exactly
    r = v.rasterizer(1)
    assert not r.count_on_gpu
    count = v._last_count[1]
    assert count > 8192  # enough intersections that a tiny capacity overflows below

    again = v.render(scene)  # sized from the last count: one submission
    assert r.count_on_gpu and v.overflows == 0
    np.testing.assert_array_equal(again, exact)
    assert v._last_count[1] == count

    v._last_count = (v._last_count[0], 100)  # capacity 4221: far too small
    cut = v.render(scene)
    assert v.overflows == 1
    np.testing.assert_array_equal(cut, exact)

    # a new view, sized from the old view's count, against a fresh viewer's exact frame
    v.state.w2c = orbit_w2c(2, 12)
    moved = v.render(scene)
    fresh = _viewer(gpu)
    fresh.state.w2c = orbit_w2c(2, 12)
    np.testing.assert_array_equal(moved, fresh.render(scene))
    assert (moved != exact).mean() > 0.05  # the view did change
