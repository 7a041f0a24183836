"""Undistortion against independent references.

1. Synthetic: known 3D points are projected with the distortion model written here in
   float64 (not the engine's code), drawn as Gaussian blobs into a distorted image; after
   undistortion each blob's centroid must sit where the pinhole projection of its 3D
   point predicts (< 0.5 px); every output pixel must map inside the source image by the
   reference model, and the crop must be tight (one more row/column would not).
2. Real: book and office_chair images undistorted by the engine are compared with an
   independent resampling (pycolmap's distortion + scipy bilinear) at the engine's
   output intrinsics.
"""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.errors import DatasetError
from spirula.engine.ingest.camera_model import CameraModel
from spirula.engine.ingest.undistort import make_undistorter, undistort_image

BACKGROUND = 100.0


def distort_ref(x, y, k1, k2, p1, p2):
    """OpenCV/COLMAP distortion of normalised coordinates, float64 (test's own copy)."""
    r2 = x * x + y * y
    radial = 1.0 + k1 * r2 + k2 * r2 * r2
    return (
        x * radial + 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x),
        y * radial + p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y,
    )


CAMERAS = [
    CameraModel("SIMPLE_RADIAL", 320, 240, 300.0, 300.0, 165.3, 118.7, (0.12,)),
    CameraModel("RADIAL", 320, 240, 280.0, 280.0, 158.0, 123.2, (-0.18, 0.03)),
    CameraModel("OPENCV", 240, 320, 260.0, 255.0, 118.2, 162.6, (0.0578, -0.0805, -0.00098, 0.00016)),
    CameraModel("OPENCV", 320, 240, 250.0, 262.0, 163.0, 117.0, (-0.25, 0.06, 0.004, -0.003)),
]


def opencv_coeffs(cam):
    """(k1, k2, p1, p2) of a SIMPLE_RADIAL / RADIAL / OPENCV camera."""
    return (*cam.extra, 0.0, 0.0, 0.0)[:4]


@pytest.mark.parametrize("cam", CAMERAS, ids=lambda c: f"{c.model}-k1={c.extra[0]}")
def test_blobs_land_on_pinhole_projection(cam):
    rng = np.random.default_rng(7)
    k = opencv_coeffs(cam)
    # 3D points: a grid of directions (spacing ~25 px) at random depths.
    gx, gy = np.meshgrid(np.arange(-0.6, 0.61, 0.09), np.arange(-0.6, 0.61, 0.09))
    x, y = gx.ravel() + rng.uniform(-0.01, 0.01, gx.size), gy.ravel() + rng.uniform(-0.01, 0.01, gx.size)
    depth = rng.uniform(1.0, 5.0, x.size)
    pts = np.stack([x * depth, y * depth, depth], 1)
    xn, yn = pts[:, 0] / pts[:, 2], pts[:, 1] / pts[:, 2]
    xd, yd = distort_ref(xn, yn, *k)
    ud, vd = cam.fx * xd + cam.cx, cam.fy * yd + cam.cy
    inside = (ud > 6) & (ud < cam.width - 6) & (vd > 6) & (vd < cam.height - 6)

    # Distorted image: background plus one Gaussian blob (sigma 1.3 px) per point.
    sigma = 1.3
    uu = np.arange(cam.width) + 0.5
    vv = np.arange(cam.height) + 0.5
    img = np.full((cam.height, cam.width), BACKGROUND)
    for u0, v0 in zip(ud[inside], vd[inside]):  # loop over ~100 blobs, not pixels
        img += 150.0 * np.exp(-((vv[:, None] - v0) ** 2 + (uu[None, :] - u0) ** 2) / (2 * sigma**2))
    rgb = np.repeat(np.clip(np.rint(img), 0, 255).astype(np.uint8)[:, :, None], 3, axis=2)

    out, pin = undistort_image(rgb, cam)
    assert pin.model == "PINHOLE" and (pin.fx, pin.fy) == (cam.fx, cam.fy)
    assert out.shape == (pin.height, pin.width, 3)
    assert out.min() >= BACKGROUND - 1  # no black / invalid border anywhere

    # Every output pixel centre maps inside the source (reference model), and the crop
    # is tight: one more column/row on any side would have a pixel mapping outside.
    def source(u, v):
        return distort_ref((u - pin.cx) / pin.fx, (v - pin.cy) / pin.fy, *k)

    def inside_src(u, v):
        sx, sy = source(u, v)
        su, sv = cam.fx * sx + cam.cx, cam.fy * sy + cam.cy
        return (su >= 0.5 - 1e-6) & (su <= cam.width - 0.5 + 1e-6) & (sv >= 0.5 - 1e-6) & (sv <= cam.height - 0.5 + 1e-6)

    cu = np.arange(-1, pin.width + 1) + 0.5
    cv = np.arange(-1, pin.height + 1) + 0.5
    ok = inside_src(cu[None, :], cv[:, None])
    assert ok[1:-1, 1:-1].all()
    assert not ok[1:-1, 0].all() and not ok[1:-1, -1].all()
    assert not ok[0, 1:-1].all() and not ok[-1, 1:-1].all()

    # Blob centroids vs pinhole projection in the output camera.
    pu, pv = pin.fx * xn + pin.cx, pin.fy * yn + pin.cy
    usable = inside & (pu > 6) & (pu < pin.width - 6) & (pv > 6) & (pv < pin.height - 6)
    assert usable.sum() > 40
    g = out[:, :, 0].astype(np.float64) - BACKGROUND
    errs = []
    for u0, v0 in zip(pu[usable], pv[usable]):
        c0, r0 = int(u0), int(v0)
        win = np.clip(g[r0 - 5 : r0 + 6, c0 - 5 : c0 + 6], 0, None)
        wr, wc = np.mgrid[r0 - 5 : r0 + 6, c0 - 5 : c0 + 6] + 0.5
        errs.append(np.hypot((win * wc).sum() / win.sum() - u0, (win * wr).sum() / win.sum() - v0))
    errs = np.array(errs)
    assert errs.max() < 0.5, f"max centroid error {errs.max():.3f} px"
    assert np.median(errs) < 0.15


def test_pinhole_is_identity():
    cam = CameraModel("PINHOLE", 30, 20, 25.0, 26.0, 14.0, 9.0)
    img = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    out, pin = undistort_image(img, cam)
    assert out is img and (pin.width, pin.height, pin.fx, pin.fy, pin.cx, pin.cy) == (30, 20, 25.0, 26.0, 14.0, 9.0)


def test_not_invertible_is_refused():
    cam = CameraModel("RADIAL", 320, 240, 150.0, 150.0, 160.0, 120.0, (-0.9, 0.0))
    with pytest.raises(DatasetError, match="cannot be inverted"):
        make_undistorter(cam)


def test_undistort_normalized_roundtrip():
    cam = CAMERAS[3]
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-0.6, 0.6, 1000), rng.uniform(-0.5, 0.5, 1000)
    xd, yd = distort_ref(x, y, *opencv_coeffs(cam))
    xu, yu, ok = cam.undistort_normalized(xd, yd)
    assert ok.all()
    np.testing.assert_allclose(xu, x, atol=1e-10)
    np.testing.assert_allclose(yu, y, atol=1e-10)


@pytest.mark.parametrize("name", ["book", "office_chair/reference"])
def test_real_images_match_pycolmap_resampling(shared_data, name):
    pycolmap = pytest.importorskip("pycolmap")
    from scipy.ndimage import map_coordinates

    from spirula.engine.ingest.colmap import read_colmap
    from spirula.engine.ingest.images import read_image

    root = shared_data / name
    if not root.is_dir():
        pytest.skip(f"dataset {root} not found")
    view = read_colmap(root).views[0]
    rec = pycolmap.Reconstruction(str(root / "sparse" / "0"))  # keep alive: cameras point into it
    ref_cam = rec.cameras[rec.find_image_with_name(view.name).camera_id]
    img = read_image(view.image_path)
    u = make_undistorter(view.camera)
    out, pin = u(img), u.dst

    # Reference: for every 3rd output pixel, pycolmap's distorted position, scipy bilinear.
    rows, cols = np.mgrid[0 : pin.height : 3, 0 : pin.width : 3]
    norm = np.stack([(cols.ravel() + 0.5 - pin.cx) / pin.fx, (rows.ravel() + 0.5 - pin.cy) / pin.fy, np.ones(cols.size)], 1)
    src = ref_cam.img_from_cam(norm) - 0.5  # pixel-centre -> array index coordinates
    h, w = img.shape[:2]
    assert (src >= -1e-6).all() and (src[:, 0] <= w - 1 + 1e-6).all() and (src[:, 1] <= h - 1 + 1e-6).all()
    ref = np.stack(
        [map_coordinates(img[:, :, c].astype(np.float64), [src[:, 1], src[:, 0]], order=1, mode="nearest") for c in range(3)], 1
    )
    diff = np.abs(out[rows.ravel(), cols.ravel()].astype(np.float64) - ref)
    assert diff.max() <= 1.0 + 1e-6
    # and the crop is the "valid" one: it is at most a few pixels smaller than the image
    assert pin.width > 0.9 * w and pin.height > 0.9 * h
