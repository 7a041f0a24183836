"""SIFT features into a COLMAP database (pycolmap), one camera per image group.

A group is a set of images that share intrinsics: all frames of a video, or the photos
of one source folder with one image size. Each group gets one camera, written to the
database first (initial focal from EXIF when present, else 1.2 x the longer side, as
COLMAP does); the images of the group are then imported with that camera id, so
COLMAP never splits or merges cameras on its own. Extraction runs in chunks so that
progress can be reported and cancellation checked between chunks; an extraction
continued in a database that already holds some of the images (cancelled earlier, see
:mod:`spirula.engine.sfm.cache`) reuses their cameras and skips them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import SpirulaError
from .sfm_config import SfmConfig
from ..optional import need


class SfmError(SpirulaError):
    """Structure from motion failed; the message names the input and suggests a fix."""


CAPTURE_ADVICE = ("Try: a capture with slower camera motion and more overlap between views, more texture and "
                  "light in the scene, more frames (--frames), or the other mapper (--mapper)")


def device(cfg: SfmConfig):
    pycolmap = need("pycolmap")

    if cfg.device == "cuda":
        if not pycolmap.has_cuda:
            raise SfmError("--sfm-device cuda: this pycolmap is built without CUDA")
        return pycolmap.Device.cuda
    if cfg.device == "cpu" or not pycolmap.has_cuda:
        return pycolmap.Device.cpu
    return pycolmap.Device.auto


def extraction_options(cfg: SfmConfig, longest_side: int):
    """pycolmap FeatureExtractionOptions: SIFT on images downscaled to cfg.max_image_size;
    first octave -1 (upsampled: about 3x more keypoints, 4x slower) for images whose
    working size is at most 1000 px when cfg.upsample is "auto"."""
    pycolmap = need("pycolmap")

    o = pycolmap.FeatureExtractionOptions()
    o.max_image_size = cfg.max_image_size
    o.num_threads = cfg.num_threads
    o.use_gpu = device(cfg) != pycolmap.Device.cpu
    o.sift.max_num_features = cfg.max_features
    working = min(longest_side, cfg.max_image_size) if cfg.max_image_size > 0 else longest_side
    up = cfg.upsample == "yes" or (cfg.upsample == "auto" and working <= 1000)
    o.sift.first_octave = -1 if up else 0
    return o


def extract(database: Path, image_dir: Path, groups: dict[str, list[str]], sizes: dict[str, tuple[int, int]],
            model: str, cfg: SfmConfig, progress: Callable[[int, int], None] | None = None,
            should_stop: Callable[[], bool] | None = None, cameras: dict[str, int] | None = None,
            on_chunk: Callable[[], None] | None = None,
            camera_params: dict[str, list[float]] | None = None) -> dict[str, int]:
    """Create cameras and extract features of every image of ``groups`` (group key ->
    image names relative to ``image_dir``; ``sizes``: group key -> (width, height)).
    Returns group key -> camera id, which is also filled into ``cameras`` (a group found
    there keeps its camera). ``progress(done, total)`` and ``on_chunk()`` after each chunk.
    ``camera_params``: group key -> the model's exact parameters (known intrinsics, e.g. the
    cube faces of a 360-degree frame), written as the camera with a focal prior."""
    pycolmap = need("pycolmap")

    total = sum(len(v) for v in groups.values())
    cameras = {} if cameras is None else cameras
    present = set()
    if Path(database).exists():
        with pycolmap.Database.open(database) as db:
            present = {im.name for im in db.read_all_images() if db.exists_keypoints(im.image_id)}
    done = sum(n in present for v in groups.values() for n in v)
    if progress is not None and done:
        progress(done, total)
    longest = max((max(s) for s in sizes.values()), default=0)
    options = extraction_options(cfg, longest)
    chunk = max(4, min(32, total // 20 or 1))
    for key, names in groups.items():
        if not names:
            continue
        reader = pycolmap.ImageReaderOptions()
        reader.camera_model = model
        cam = pycolmap.infer_camera_from_image(image_dir / names[0], reader)
        if camera_params and key in camera_params:
            cam.params = list(camera_params[key])
            cam.has_prior_focal_length = True
        if (cam.width, cam.height) != tuple(sizes[key]):
            raise SfmError(f"{image_dir / names[0]}: image is {cam.width}x{cam.height}, expected {sizes[key]}")
        if key not in cameras:
            with pycolmap.Database.open(database) as db:
                cameras[key] = db.write_camera(cam)
            if on_chunk is not None:
                on_chunk()
        reader.existing_camera_id = cameras[key]
        names = [n for n in names if n not in present]
        for start in range(0, len(names), chunk):
            if should_stop is not None and should_stop():
                raise KeyboardInterrupt
            part = names[start:start + chunk]
            pycolmap.extract_features(database, image_dir, image_names=part, camera_mode=pycolmap.CameraMode.SINGLE,
                                      reader_options=reader, extraction_options=options, device=device(cfg))
            done += len(part)
            if on_chunk is not None:
                on_chunk()
            if progress is not None:
                progress(done, total)
    with pycolmap.Database.open(database) as db:
        n_images = db.num_images()
    if n_images < total:
        raise SfmError(f"{image_dir}: features were extracted from {n_images} of {total} images "
                       "(COLMAP could not read the others; see the log with -v)")
    return cameras
