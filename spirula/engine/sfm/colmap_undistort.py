"""Undistort the SfM images to pinhole cameras (pycolmap) as a COLMAP dataset folder.

``pycolmap.undistort_images`` warps every registered image to a PINHOLE camera whose
frame holds only valid pixels (``blank_pixels = 0``: no black border) and writes
``images/`` and the matching model. The model is moved to ``sparse/0`` (the layout other
tools expect) and COLMAP's dense-stereo scaffolding is removed, so ``out_dir`` is a
dataset folder readable by :func:`spirula.engine.ingest.load_dataset`, COLMAP, gsplat, nerfstudio.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ..optional import need


def undistort(model_dir: Path, image_dir: Path, out_dir: Path, jpeg_quality: int = 95,
              num_threads: int = -1) -> dict:
    """Write ``out_dir/images`` and ``out_dir/sparse/0`` (binary model) from the
    distorted model in ``model_dir`` and its images in ``image_dir``. Returns a summary:
    images, points, ``cameras`` (the pinhole intrinsics written, pixels) and
    ``cameras_before`` (the distorted cameras they replace: model, size, params; the
    same order, by camera id)."""
    pycolmap = need("pycolmap")

    before = pycolmap.Reconstruction(str(model_dir))
    cams_before = [{"model": c.model.name, "width": c.width, "height": c.height,
                    "params": [float(v) for v in c.params]} for _, c in sorted(before.cameras.items())]
    out_dir.mkdir(parents=True, exist_ok=True)
    opts = pycolmap.UndistortCameraOptions()
    opts.blank_pixels = 0.0
    pycolmap.undistort_images(out_dir, model_dir, image_dir, output_type="COLMAP",
                              copy_policy=pycolmap.FileCopyType.copy, undistort_options=opts,
                              jpeg_quality=jpeg_quality, num_threads=num_threads)
    sparse = out_dir / "sparse"
    model0 = out_dir / "sparse.0"
    sparse.rename(model0)
    sparse.mkdir()
    model0.rename(sparse / "0")
    for extra in ("stereo", "run-colmap-geometric.sh", "run-colmap-photometric.sh"):
        p = out_dir / extra
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    rec = pycolmap.Reconstruction(str(sparse / "0"))
    cams = [{"width": c.width, "height": c.height, "fx": c.focal_length_x, "fy": c.focal_length_y,
             "cx": c.principal_point_x, "cy": c.principal_point_y} for _, c in sorted(rec.cameras.items())]
    return {"images": rec.num_reg_images(), "points": rec.num_points3D(), "cameras": cams,
            "cameras_before": cams_before}


def k_change_notes(summary: dict) -> list[str]:
    """One line per camera of an :func:`undistort` summary: the camera before and the
    pinhole intrinsics after (K changes: the crop moves cx, cy and sets the size)."""
    out = []
    for b, a in zip(summary.get("cameras_before", []), summary.get("cameras", [])):
        params = " ".join(f"{v:.6g}" for v in b["params"])
        out.append(f"undistorted {b['model']} {b['width']}x{b['height']} ({params}) to PINHOLE "
                   f"{a['width']}x{a['height']} fx={a['fx']:.6g} fy={a['fy']:.6g} cx={a['cx']:.6g} cy={a['cy']:.6g}")
    return out


def undistort_masks(model_dir: Path, undistorted_dir: Path, mask_dir: Path, out_dir: Path) -> list[str]:
    """The masks of the images :func:`undistort` wrote, undistorted the same way: for each
    image of the pinhole model in ``undistorted_dir`` whose mask ``mask_dir/<name>.png``
    exists ([H, W] 8-bit, 255 = keep, the distorted image's size), ``out_dir/<name>.png`` of
    the pinhole image's size, sampled nearest through the distorted camera of ``model_dir``
    (pixel centres at +0.5, COLMAP's convention); pixels outside the distorted image are
    masked out (0). Returns the names written."""
    from PIL import Image

    pycolmap = need("pycolmap")
    before = pycolmap.Reconstruction(str(model_dir))
    after = pycolmap.Reconstruction(str(undistorted_dir))
    cam_before = {im.name: before.cameras[im.camera_id] for im in before.images.values()}
    written = []
    for im in sorted(after.images.values(), key=lambda i: i.name):
        src = mask_dir / f"{im.name}.png"
        if not src.is_file() or im.name not in cam_before:
            continue
        cam, dist = after.cameras[im.camera_id], cam_before[im.name]
        v, u = np.mgrid[0:cam.height, 0:cam.width].astype(np.float64)
        rays = cam.cam_from_img(np.stack([u.ravel() + 0.5, v.ravel() + 0.5], axis=1))
        xy = dist.img_from_cam(np.concatenate([rays, np.ones((len(rays), 1))], axis=1), False)
        mask = np.asarray(Image.open(src).convert("L"))
        x, y = np.floor(xy[:, 0]).astype(np.int64), np.floor(xy[:, 1]).astype(np.int64)
        inside = (x >= 0) & (y >= 0) & (x < mask.shape[1]) & (y < mask.shape[0])
        out = np.zeros(len(xy), np.uint8)
        out[inside] = mask[y[inside], x[inside]]
        dst = out_dir / f"{im.name}.png"
        dst.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(out.reshape(cam.height, cam.width)).save(dst)
        written.append(im.name)
    return written
