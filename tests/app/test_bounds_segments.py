"""The bounds box as the viewer draws it (engine/studio/overlays.box_segments): twelve edges on
its faces and six face handles, each on its face's centre."""

import numpy as np


def test_the_bounds_box_has_twelve_edges_on_its_faces_and_six_face_handles():
    from engine.studio.overlays import COLOR_BOUNDS, box_segments

    allsegs, cols = box_segments((-1, -2, -3, 1, 2, 3))
    assert allsegs.shape == (30, 6) and len(cols) == 30 and len(set(cols[:12])) == 1 and cols[12] != cols[0]
    assert cols[0] & 0xFF == COLOR_BOUNDS[2]
    segs, handles = allsegs[:12], allsegs[12:].reshape(6, 3, 6)
    # each handle sits on its face's centre: x faces at x = -1 / +1, middle of the others
    for f in range(6):
        axis, value = f % 3, (-1, -2, -3, 1, 2, 3)[f]
        mids = (handles[f, :, :3] + handles[f, :, 3:]) / 2
        cross = [k for k in range(3) if k != axis]
        assert np.allclose(mids[cross, axis], value) and np.allclose(mids[cross][:, cross], 0)
        stub = handles[f, axis]
        assert np.isclose(stub[axis], value) and np.sign(stub[3 + axis] - stub[axis]) == np.sign(value)
    ends = segs.reshape(-1, 3)
    assert np.allclose(np.abs(ends), [1, 2, 3])  # every end is a corner
    lengths = sorted(np.linalg.norm(segs[:, 3:] - segs[:, :3], axis=1).round(6))
    assert lengths == [2.0] * 4 + [4.0] * 4 + [6.0] * 4


def test_the_highlighted_handle_is_larger_and_in_the_hover_colour():
    from engine.studio.overlays import COLOR_HANDLES, COLOR_HOVER, box_segments

    rng = np.random.default_rng(4)
    lo = rng.normal(size=3)
    bounds = tuple(lo) + tuple(lo + rng.uniform(0.5, 2.0, 3))
    plain, pcols = box_segments(bounds)
    for face in range(6):
        segs, cols = box_segments(bounds, highlight=face)
        mine = slice(12 + 3 * face, 15 + 3 * face)
        others = np.ones(30, bool)
        others[mine] = False
        assert np.array_equal(segs[others], plain[others]) and np.array_equal(cols[others], pcols[others])
        assert set(cols[mine]) == {0xFF000000 | COLOR_HOVER[2] | COLOR_HOVER[1] << 8 | COLOR_HOVER[0] << 16}
        assert set(pcols[mine]) == {0xFF000000 | COLOR_HANDLES[2] | COLOR_HANDLES[1] << 8 | COLOR_HANDLES[0] << 16}
        length = lambda s: np.linalg.norm(s[:, 3:] - s[:, :3], axis=1)  # noqa: E731
        assert np.all(length(segs[mine]) > 1.5 * length(plain[mine]))
        # the same centre: the cross's midpoints do not move
        mid = lambda s: (s[:, 3:] + s[:, :3]) / 2  # noqa: E731
        cross = [k for k in range(3) if k != face % 3]
        assert np.allclose(mid(segs[mine])[cross], mid(plain[mine])[cross], atol=1e-6)
