"""The viewport's one-submission frames (spirula/engine/studio/viewer.py): a frame sized from the
last frame's intersection count shows the same pixels as one counted exactly, and a frame
whose count outgrew that capacity is rendered again before anything shows it."""

import numpy as np
import pytest

from spirula.engine.cli.bench.viewer_fps import ball_scene, orbit_w2c
from spirula.engine.studio.viewer import Viewer, ViewSource


@pytest.fixture(scope="module")
def scene(gpu):
    rows = ball_scene(20_000, 1, seed=7)
    return ViewSource(gpu.upload(rows, "test.viewer.params"), len(rows), 1, 1)


def _viewer(gpu, width: int = 160, height: int = 120) -> Viewer:
    v = Viewer(gpu)
    v.adaptive, v.render_scale = False, 1.0
    v.resize(width, height)
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


@pytest.fixture(scope="module")
def opaque_scene(gpu):
    rows = ball_scene(20_000, 1, seed=3)
    rows[:, 10] = 6.0  # opacity logits (spirula/engine/splat/param_layout.py): a ball whose front hides its back
    return ViewSource(gpu.upload(rows, "test.viewer.opaque"), len(rows), 1, 1)


def _exact(gpu, src, w2c, size=(320, 240)) -> tuple[np.ndarray, int]:
    """The frame of a viewer with no occlusion culling, counted exactly, and its intersections."""
    v = _viewer(gpu, *size)
    v.occlusion = None
    v.state.w2c = w2c
    return v.render(src), v.last_intersections


def test_occlusion_cut_bins_less_and_shows_exactly_the_same_frames(gpu, opaque_scene):
    # 20 x 15 tiles: the cut widens each tile's opaque depth over 2 tiles around it, so a
    # smaller view would keep no tile inside the ball's outline
    v = _viewer(gpu, 320, 240)
    for k in range(4):  # frame 0 counts exactly and maps the opaque depths, frames 1-3 cut
        v.state.w2c = orbit_w2c(k, 40)
        img = v.render(opaque_scene)
        exact, uncut = _exact(gpu, opaque_scene, orbit_w2c(k, 40))
        np.testing.assert_array_equal(img, exact)
        assert v.occlusion.use_cut == (k > 0)
        if k > 0:
            assert v.last_intersections < 0.85 * uncut, (k, v.last_intersections, uncut)
    assert v.recuts == 0 and v.overflows == 0


def test_a_cut_too_tight_renders_the_frame_again_without_it(gpu, opaque_scene):
    v = _viewer(gpu, 320, 240)
    for k in range(2):
        v.state.w2c = orbit_w2c(k, 40)
        v.render(opaque_scene)
    occ = v.occlusion
    tx, ty = occ.tiles
    gpu.write(occ.sat, np.full(tx * ty, 1e-3, np.float32))  # "opaque right at the camera": culls nearly all
    v.state.w2c = orbit_w2c(2, 40)
    img = v.render(opaque_scene)
    assert v.recuts == 1
    np.testing.assert_array_equal(img, _exact(gpu, opaque_scene, orbit_w2c(2, 40))[0])


def test_frames_over_the_per_pass_limit_go_in_bands_with_the_same_pixels(gpu, opaque_scene):
    """The large path (tile rows in bands) counts exactly and without a cut; the compacted
    depth order must still serve its band counts."""
    exact, count = _exact(gpu, opaque_scene, orbit_w2c(5, 40))
    v = _viewer(gpu, 320, 240)
    v.rasterizer(1).max_intersections_per_pass = count // 3
    v.state.w2c = orbit_w2c(5, 40)
    for _ in range(2):
        np.testing.assert_array_equal(v.render(opaque_scene), exact)
        assert len(v.rasterizer(1).bands) >= 3 and not v.occlusion.use_cut


def test_occlusion_with_the_anti_aliased_projection_shows_the_same_frames(gpu):
    """A model trained with Mip-Splatting's 3D filter (ViewSource.filter3d) goes through the
    ANTIALIAS and OCCLUSION projection at once."""
    rows = ball_scene(20_000, 1, seed=4)
    rows[:, 10] = 6.0
    filt = np.random.default_rng(4).uniform(1e-5, 1e-4, len(rows)).astype(np.float32)
    src = ViewSource(gpu.upload(rows, "test.viewer.aa"), len(rows), 1, 1, filter3d=gpu.upload(filt, "test.viewer.f3d"))
    v = _viewer(gpu, 320, 240)
    for k in range(3):
        v.state.w2c = orbit_w2c(k, 40)
        img = v.render(src)
        np.testing.assert_array_equal(img, _exact(gpu, src, orbit_w2c(k, 40))[0])
    assert v.occlusion.use_cut and v.recuts == 0



def test_the_early_cull_rule_drops_only_splats_the_full_test_leaves_without_a_tile(gpu):
    """The projection's early cull (shaders/project/project.slang behind_cut_early) bounds a
    splat's rectangle by its largest scale and drops it when every tile of the bound is cut in
    front of it (reading a coarse map of the deepest cut per block of tiles first: checked here
    against NumPy maxima). Replayed in NumPy (float64) from the splats' parameters and the frame's cut
    map: it must cover a good share of this ball's hidden splats, and only splats the full test
    (the rasterizer's tile counts) leaves with no tile."""
    from spirula.engine.splat.occlusion import CUT_BLOCK

    rows = ball_scene(100_000, 1, seed=3)  # splats a few tiles wide, as in a trained model's view
    rows[:, 10] = 6.0
    src = ViewSource(gpu.upload(rows, "test.viewer.early"), len(rows), 1, 1)
    v = _viewer(gpu, 640, 480)
    for k in range(3):
        v.state.w2c = orbit_w2c(k, 40)
        img = v.render(src)
    occ, r = v.occlusion, v.rasterizer(1)
    assert occ.use_cut and v.recuts == 0
    np.testing.assert_array_equal(img, _exact(gpu, src, orbit_w2c(2, 40), (640, 480))[0])
    tx, ty = occ.tiles
    cut = gpu.read(occ.cut, np.float32, tx * ty).reshape(ty, tx).astype(np.float64)
    # the coarse map: the deepest cut of each CUT_BLOCK x CUT_BLOCK tiles (edge blocks: those there are)
    b = CUT_BLOCK
    bw, bh = -(-tx // b), -(-ty // b)
    padded = np.zeros((bh * b, bw * b))
    padded[:ty, :tx] = cut
    blocks = gpu.read(occ.block_cut, np.float32, bw * bh).reshape(bh, bw)
    np.testing.assert_array_equal(blocks, padded.reshape(bh, b, bw, b).max(axis=(1, 3)).astype(np.float32))
    cam = gpu.read(v.cam, np.float32).reshape(-1, 32)[1].astype(np.float64)  # the render camera's row
    R, t, (fx, fy, cx, cy) = cam[:9].reshape(3, 3), cam[9:12], cam[12:16]
    pc = rows[:, :3].astype(np.float64) @ R.T + t
    z = pc[:, 2]
    u, w = pc[:, 0] / z, pc[:, 1] / z
    # the 2D covariance's largest eigenvalue <= |J|_F^2 s_max^2 + 0.3 px^2; 3.33 sigma; +2 px
    j2 = (fx * fx * (1 + u * u) + fy * fy * (1 + w * w)) / (z * z)
    rad = 3.33 * np.sqrt(j2 * np.exp(2.0 * rows[:, 3:6].max(axis=1)) + 0.3) + 2.0
    mx, my = fx * u + cx, fy * w + cy
    x0, x1 = (np.clip(np.floor((mx + s * rad) / 16), 0, tx - 1).astype(int) for s in (-1, 1))
    y0, y1 = (np.clip(np.floor((my + s * rad) / 16), 0, ty - 1).astype(int) for s in (-1, 1))
    early = np.zeros(len(rows), bool)
    for i in np.flatnonzero((z > 0.01) & (x1 - x0 < 5) & (y1 - y0 < 5)):
        early[i] = z[i] > cut[y0[i]:y1[i] + 1, x0[i]:x1[i] + 1].max() * (1 + 1e-6)
    # the splats left with a tile: the compaction's list (the depth sort's input), kept[0] long
    n_kept = int(gpu.read(occ.kept, np.uint32, 1)[0])
    ids = r.read("kept_ids", np.uint32, n_kept)
    kept = np.zeros(len(rows), bool)
    kept[ids] = True
    assert np.all(np.diff(ids.astype(np.int64)) > 0)  # in index order, each once
    assert np.all(r.read("tiles_touched", np.uint32, len(rows))[ids] > 0)
    print(f"early cull: {early.mean():.1%} of the splats; no tile after the full test: {1 - kept.mean():.1%}")
    assert early.mean() > 0.15
    assert not kept[early].any()


def test_frames_in_flight_show_each_view_exactly_and_a_cut_frame_is_redone_before_it_shows(gpu, opaque_scene):
    """With nothing read back (the studio presenting, the benchmark), a steady frame is
    submitted before the one before it is finished: each finished frame's output must be the
    exact frame of its own view, also when its lists outgrew the capacity and it was redone
    after a later frame had uploaded its own camera."""
    v = _viewer(gpu, 320, 240)
    v.readback_when_headless, v.frames_in_flight = False, 2  # 2: the hardware default (software: 1)
    w2cs = [orbit_w2c(k, 40) for k in range(5)]
    finished = []  # (view index, its output) in the order frames finish

    def out_of(slot):
        return gpu.read(v.bufs.get(f"out{slot}", 4 * 320 * 240), np.uint32, count=320 * 240).reshape(240, 320)

    for k, w2c in enumerate(w2cs):
        if k == 3:  # frame 3 gets a far too small capacity: it overflows, and is redone at its finish
            v._last_count = (v._last_count[0], 100)
        before = v._in_flight
        v.state.w2c = w2c
        assert v.render(opaque_scene) is None
        if before is not None:  # render() finished the frame submitted by the call before
            finished.append((k - 1, out_of(before.slot)))
        assert k == 0 or v.in_flight  # frame 0 (counted exactly) is not in flight
    last = v._in_flight
    v.finish_frame()
    finished.append((4, out_of(last.slot)))
    # frame 3 overflowed; frame 4 may too: it was cut with frame 3's map, whose cut lists left
    # tiles short of opaque (so frame 4 binned more than its capacity from frame 2 allowed)
    assert not v.in_flight and v.overflows in (1, 2)
    assert [k for k, _ in finished] == [1, 2, 3, 4]
    for k, pixels in finished:
        ref = _viewer(gpu, 320, 240)
        ref.state.w2c = w2cs[k]
        np.testing.assert_array_equal(pixels, ref.render(opaque_scene), err_msg=f"view {k}")


def test_frames_in_flight_setting_takes_1_or_2_and_names_anything_else(gpu, monkeypatch):
    from spirula.engine.errors import SpirulaError

    for text, want in (("1", 1), ("2", 2)):
        monkeypatch.setenv("SPIRULA_VIEWER_FRAMES", text)
        assert Viewer(gpu).frames_in_flight == want
    for text in ("0", "3", "abc"):
        monkeypatch.setenv("SPIRULA_VIEWER_FRAMES", text)
        with pytest.raises(SpirulaError, match=f"SPIRULA_VIEWER_FRAMES='{text}'"):
            Viewer(gpu)


def test_a_moving_view_on_a_slow_device_draws_the_first_share_of_the_splats_smaller(gpu, scene):
    """spirula/engine/studio/adaptive.py move_level: a moving frame at level 3 draws the first half of
    the Gaussians at 1/sqrt(2) of the size, exactly the frame of that half at that scale; a
    still frame (or a screenshot) draws them all at the viewport's size."""
    import dataclasses
    import math

    v = _viewer(gpu)
    v.adaptive, v.move_level = True, 3
    v.state.w2c = orbit_w2c(1, 12)
    moving = v.render(scene, moving=True)
    assert v.last_render_size == (round(160 / math.sqrt(2)), round(120 / math.sqrt(2)))
    assert not v.last_full_res   # a sharp frame is owed once the view is still
    ref = _viewer(gpu)
    ref.render_scale = math.sqrt(2)
    ref.state.w2c = orbit_w2c(1, 12)
    np.testing.assert_array_equal(moving, ref.render(dataclasses.replace(scene, n=scene.n // 2)))
    v.move_level = 3
    still = v.render(scene, moving=False)
    whole = _viewer(gpu)
    whole.state.w2c = orbit_w2c(1, 12)
    np.testing.assert_array_equal(still, whole.render(scene))
    assert (still != moving).mean() > 0.05
