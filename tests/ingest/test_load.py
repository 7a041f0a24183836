"""load_dataset end to end on the four real datasets (max_size 320 to stay fast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spirula.engine.ingest import load_dataset, read_scene
from spirula.engine.ingest.images import fit_size
from spirula.engine.ingest.undistort import make_undistorter

MAX = 320
EXPECTED = {  # dataset: (cameras, has points, warning fragment or None)
    "book": (7, True, None),
    "mouse": (56, True, "3 images in"),
    "fox": (50, False, "17 of 67 frames"),
    "office_chair/reference": (121, True, None),
}


@pytest.fixture(scope="module", params=list(EXPECTED))
def loaded(request, shared_data):
    root = shared_data / request.param
    if not root.is_dir():
        pytest.skip(f"dataset {root} not found")
    return request.param, root, load_dataset(root, max_size=MAX)


def test_counts_and_warnings(loaded):
    name, root, ds = loaded
    n, has_points, note = EXPECTED[name]
    assert len(ds.cameras) == n
    assert (ds.points is not None) == has_points
    if has_points:
        assert ds.points.dtype == np.float32 and ds.colors.dtype == np.uint8 and len(ds.points) == len(ds.colors)
    if note is None:
        assert ds.warnings == []
    else:
        assert len(ds.warnings) == 1 and ds.warnings[0].startswith(note)
    names = [c.name for c in ds.cameras]
    assert names == sorted(names) and len(set(names)) == len(names)


def test_images_and_intrinsics(loaded):
    """Each image is [H, W, 3] uint8 with the longer side 320; intrinsics equal the
    undistorted-and-cropped camera scaled by the per-axis downscale factor."""
    name, root, ds = loaded
    views = {v.name: v for v in read_scene(root).views}
    maps = {}
    for cam in ds.cameras:
        assert cam.image.dtype == np.uint8 and cam.image.shape == (cam.height, cam.width, 3)
        assert max(cam.width, cam.height) == MAX
        src = views[cam.name].camera
        if src not in maps:
            maps[src] = make_undistorter(src).dst
        pin = maps[src]
        assert (cam.width, cam.height) == fit_size(pin.width, pin.height, MAX)
        sx, sy = cam.width / pin.width, cam.height / pin.height
        np.testing.assert_allclose([cam.fx, cam.cx, cam.fy, cam.cy], [pin.fx * sx, pin.cx * sx, pin.fy * sy, pin.cy * sy], rtol=1e-12)
        if src.is_pinhole:
            assert (pin.width, pin.height) == (src.width, src.height)
        else:  # cropped by a few percent at most for these mild lenses
            assert 0.9 < pin.width / src.width < 1.0 and 0.9 < pin.height / src.height < 1.0
        r = cam.w2c[:3, :3]
        np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-9)
        np.testing.assert_array_equal(cam.w2c[3], [0, 0, 0, 1])


def test_no_black_border(loaded):
    """No border row or column of any loaded image is entirely black (an uncropped
    undistortion border would be)."""
    _, _, ds = loaded
    for cam in ds.cameras:
        img = cam.image.astype(np.int32).sum(axis=2)
        for edge in (img[0], img[-1], img[:, 0], img[:, -1]):
            assert (edge > 0).mean() > 0.5, cam.name


def test_progress_and_workers(shared_data):
    root = shared_data / "book"
    if not root.is_dir():
        pytest.skip(f"dataset {root} not found")
    calls = []
    one = load_dataset(root, max_size=160, workers=1, progress=lambda d, t: calls.append((d, t)))
    assert sorted(calls) == [(i, 7) for i in range(1, 8)]
    many = load_dataset(Path(root), max_size=160, workers=3)
    for a, b in zip(one.cameras, many.cameras):
        assert a.name == b.name
        np.testing.assert_array_equal(a.image, b.image)
