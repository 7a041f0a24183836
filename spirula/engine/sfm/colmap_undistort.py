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
