"""Undistort the SfM images to pinhole cameras (pycolmap) as a COLMAP dataset folder.

``pycolmap.undistort_images`` warps every registered image to a PINHOLE camera whose
frame holds only valid pixels (``blank_pixels = 0``: no black border) and writes
``images/`` and the matching model. The model is moved to ``sparse/0`` (the layout other
tools expect) and COLMAP's dense-stereo scaffolding is removed, so ``out_dir`` is a
dataset folder readable by :func:`engine.ingest.load_dataset`, COLMAP, gsplat, nerfstudio.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def undistort(model_dir: Path, image_dir: Path, out_dir: Path, jpeg_quality: int = 95,
              num_threads: int = -1) -> dict:
    """Write ``out_dir/images`` and ``out_dir/sparse/0`` (binary model) from the
    distorted model in ``model_dir`` and its images in ``image_dir``. Returns a summary."""
    import pycolmap

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
             "cx": c.principal_point_x, "cy": c.principal_point_y} for c in rec.cameras.values()]
    return {"images": rec.num_reg_images(), "points": rec.num_points3D(), "cameras": cams}
