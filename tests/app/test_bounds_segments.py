"""The bounds box as the viewer draws it (spirula/engine/studio/overlays.box_segments): twelve edges on
its faces and six face handles, each on its face's centre."""

import numpy as np


def test_the_bounds_box_has_twelve_edges_on_its_faces_and_six_face_handles():
    from spirula.engine.studio.overlays import COLOR_BOUNDS, box_segments

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
    from spirula.engine.studio.overlays import COLOR_HANDLES, COLOR_HOVER, box_segments

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


def test_keyframes_drawn_as_frustums_of_their_fov_and_the_path_as_a_polyline():
    """keyframe_segments: ten segments per keyframe (four rays from its centre, the image
    rectangle, the up mark), the rays' far ends at the fov's half-angle, then the path."""
    from spirula.engine.studio.overlays import COLOR_KEYFRAME, COLOR_PATH, _bgra, keyframe_segments

    c2w = np.eye(4)
    c2w[:3, 3] = (1.0, 2.0, 3.0)                     # looking down +z from (1, 2, 3)
    fov, aspect, size = 60.0, 2.0, 0.5
    points = [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (1.0, 1.0, 0.0)]
    segs, cols = keyframe_segments([(tuple(c2w.ravel()), fov)], points, size, aspect)
    assert segs.shape == (12, 6) and list(cols) == [_bgra(COLOR_KEYFRAME)] * 10 + [_bgra(COLOR_PATH)] * 2
    rays = segs[:4]
    assert np.allclose(rays[:, :3], (1, 2, 3))
    d = rays[:, 3:] - rays[:, :3]
    assert np.allclose(np.linalg.norm(d, axis=1), size, atol=1e-6)                 # the corners at depth size
    assert np.allclose(np.abs(d[:, 1] / d[:, 2]), np.tan(np.radians(fov / 2)), atol=1e-6)  # vertical half fov
    assert np.allclose(np.abs(d[:, 0] / d[:, 1]), aspect, atol=1e-6)               # the image's aspect
    assert np.allclose(segs[10:], [[0, 0, 0, 1, 0, 0], [1, 0, 0, 1, 1, 0]])
    empty, _ = keyframe_segments((), (), size)
    assert empty.shape == (0, 6)


def test_an_oriented_box_is_drawn_at_its_own_corners():
    """The mesh stage proposes an oriented box (spirula/engine/mesh/bounds.py Bounds: frame, lo, hi);
    the viewport draws that box, not the world axis-aligned box around it."""
    from spirula.engine.mesh.bounds import Bounds
    from spirula.engine.studio.overlays import box_segments

    a = np.radians(30)
    frame = np.array([[np.cos(a), np.sin(a), 0], [-np.sin(a), np.cos(a), 0], [0, 0, 1.0]])
    proposal = Bounds("object", frame, np.array([-1.0, -0.5, 0.1]), np.array([1.0, 0.5, 2.0]), "test", floor=0.1)
    segs, _ = box_segments((*proposal.lo, *proposal.hi), -1, tuple(frame.reshape(-1)))
    ends = segs[:12].reshape(-1, 3)
    corners = proposal.corners()
    # every end is one of the proposal's corners, and every corner is the end of three edges
    d = np.linalg.norm(ends[:, None] - corners[None], axis=2)
    assert d.min(axis=1).max() < 1e-6
    assert np.all(np.bincount(d.argmin(axis=1), minlength=8) == 3)
    # not the axis-aligned box around it: its corners are not drawn
    aabb = np.asarray(proposal.aabb()).reshape(2, 3)
    box = np.array([[aabb[(k >> i) & 1, i] for i in range(3)] for k in range(8)])
    assert np.linalg.norm(ends[:, None] - box[None], axis=2).min() > 0.1
    # the handles are on the oriented faces' centres
    handles = segs[12:].reshape(6, 3, 6)
    for f in range(6):
        mid = (handles[f, (f + 1) % 3, :3] + handles[f, (f + 1) % 3, 3:]) / 2
        q = mid @ frame.T
        assert np.isclose(q[f % 3], (*proposal.lo, *proposal.hi)[f])
