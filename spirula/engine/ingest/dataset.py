"""Dataset types shared by every reader: pinhole cameras (after undistortion) and images.

Conventions: OpenCV camera axes (x right, y down, z forward); ``w2c`` is world-to-camera;
pixel centres at integer + 0.5 (pixel (0, 0) covers [0, 1) x [0, 1)); intrinsics in pixels
of the stored (downscaled, cropped) image.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DatasetError


@dataclass
class Camera:
    """One registered view, already undistorted to a pinhole camera.

    name: image file name relative to the images folder (used for sorting and the split).
    w2c: [4, 4] float64 world-to-camera rigid transform (OpenCV axes).
    fx, fy, cx, cy: pinhole intrinsics in pixels of ``image`` (after crop and downscale).
    image: [H, W, 3] uint8 RGB, undistorted, cropped to the valid rectangle, downscaled.
    mask: [H, W] uint8 weight of each pixel, 255 = keep, 0 = masked out (the same
    undistortion, crop and downscale as ``image``: fractional at edges), or None = every
    pixel kept (spirula/engine/ingest/masks.py).
    source: for a pinhole face of a wide image (spirula/engine/ingest/faces.py), the name of that
    image ("": the camera is its own image); face: which face ("front", ...; "": none).
    The faces of one image share its appearance slot and its place in the hold-out.
    """

    name: str
    image_path: Path
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    w2c: np.ndarray
    image: np.ndarray
    mask: np.ndarray | None = None
    source: str = ""
    face: str = ""

    @property
    def image_name(self) -> str:
        """The image the pixels come from: ``source`` for a face, else ``name``."""
        return self.source or self.name

    @property
    def c2w(self) -> np.ndarray:
        """[4, 4] float64 camera-to-world."""
        return np.linalg.inv(self.w2c)

    @property
    def center(self) -> np.ndarray:
        """[3] camera centre in world units."""
        r, t = self.w2c[:3, :3], self.w2c[:3, 3]
        return -r.T @ t


@dataclass
class Dataset:
    """Cameras sorted by name, optional SfM points, and what the reader had to skip.

    points: [P, 3] float32 world positions or None (e.g. transforms.json without points).
    colors: [P, 3] uint8 RGB of the points or None.
    warnings: human-readable notes (missing images, unregistered images, ...).
    undistortion: one dict per distorted camera of the dataset: {"camera": the camera
    read (its describe()), "pinhole": the PINHOLE intrinsics its images were undistorted
    and cropped to, at their native size ({"model", "width", "height", "fx", "fy", "cx",
    "cy"}, pixels), "images": how many}; empty when every camera is a pinhole.
    masks: the masks' mode in force, "ignore", "cutout" or "off" (spirula/engine/ingest/masks.py);
    masks_source: where they came from, "folder" or "alpha" ("" when off; with "alpha" the
    images are composited over black, i.e. premultiplied); masks_note: one line saying so
    (with --masks off: the masks folder left unread).
    "cy"}, pixels), "images": how many}; for a wide camera split into faces (spirula/engine/ingest/
    faces.py) {"camera", "faces": [{"face", and the same intrinsics keys}], "images"}; empty
    when every camera is a pinhole.
    """

    root: Path
    cameras: list[Camera]
    points: np.ndarray | None = None
    colors: np.ndarray | None = None
    warnings: list[str] = field(default_factory=list)
    undistortion: list[dict] = field(default_factory=list)
    masks: str = "off"
    masks_source: str = ""
    masks_note: str | None = None

    def split(self, eval_every: int = 8) -> tuple[list[int], list[int]]:
        """(train, test) camera indices by :meth:`holdout`'s rule."""
        train, test, _ = self.holdout(eval_every)
        return train, test

    def holdout(self, eval_every: int = 8) -> tuple[list[int], list[int], str | None]:
        """(train, test, note): every ``eval_every``-th camera by sorted name is held out
        (indices 0, k, 2k, ...); ``eval_every`` <= 0 holds out none. When that would leave
        no training image (a single image, or ``eval_every`` = 1), none is held out and
        every image trains; ``note`` then says so (else None). DatasetError for a single
        image: one view constrains no depth, so there is nothing to reconstruct."""
        if len(self.cameras) == 1:
            raise DatasetError(f"{self.root}: only one image ({self.cameras[0].name}): 3D Gaussian Splatting needs "
                               "several views of the scene from different positions")
        if not any(c.source for c in self.cameras):
            return holdout_split(len(self.cameras), eval_every)
        return holdout_by_image([c.image_name for c in self.cameras], eval_every)

    def appearance_slots(self) -> tuple[list[int], list[str]]:
        """(slot [C] per camera, the slots' image names): one per-image appearance slot per
        source image, so the faces of one wide image share theirs (sorted by image name)."""
        names = sorted({c.image_name for c in self.cameras})
        slot = {n: i for i, n in enumerate(names)}
        return [slot[c.image_name] for c in self.cameras], names

    def scene_extent(self) -> tuple[np.ndarray, float]:
        """(centre [3], radius): centre of the camera centres and 1.1 x the largest
        distance of a camera from it (the 3DGS 'cameras extent' used to scale lrs), over
        the cameras that are not far outliers (:func:`camera_outliers`)."""
        return camera_extent(np.stack([c.center for c in self.cameras]))

    def outlier_cameras(self) -> list[tuple[str, float, float]]:
        """(name, distance, typical distance) of each far outlier camera
        (:func:`camera_outliers`), in world units from the cameras' median centre."""
        centers = np.stack([c.center for c in self.cameras])
        far, dist, typical = camera_outliers(centers)
        return [(self.cameras[i].name, float(dist[i]), typical) for i in np.flatnonzero(far)]


def holdout_split(n: int, eval_every: int) -> tuple[list[int], list[int], str | None]:
    """(train, test, note) of ``n`` images sorted by name: :meth:`Dataset.holdout`."""
    idx = list(range(n))
    if eval_every <= 0:
        return idx, [], None
    test = idx[::eval_every]
    train = [i for i in idx if i % eval_every != 0]
    if train or not idx:
        return train, test, None
    what = "the only image" if n == 1 else f"all {n} images"
    return idx, [], (f"--eval-every {eval_every} would hold out {what} and leave none to train on: training on "
                     f"{what}, with no held-out evaluation (no PSNR/SSIM); use more images, or --eval-every 0 "
                     "to say so")


def holdout_by_image(images: list[str], eval_every: int) -> tuple[list[int], list[int], str | None]:
    """(train, test, note) of cameras whose pixels come from ``images`` [C] (a wide image's
    faces share one): :func:`holdout_split`'s rule over the distinct images sorted by name,
    every camera going where its image goes."""
    names = sorted(set(images))
    train_i, test_i, note = holdout_split(len(names), eval_every)
    held = {names[i] for i in test_i}
    train = [k for k, n in enumerate(images) if n not in held]
    test = [k for k, n in enumerate(images) if n in held]
    return train, test, note


# A camera farther from the cameras' median centre than OUTLIER_FACTOR x their robust
# radius (median distance + 3 x 1.4826 x its median absolute deviation, i.e. 3 sigma of
# a normal spread) is a far outlier: on a path, a ring or a cluster every genuine camera
# stays within about 1.5 x that radius.
OUTLIER_FACTOR = 4.0
MIN_CAMERAS_FOR_OUTLIERS = 3


def camera_outliers(centers: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(far [C] bool, distance [C] float64, robust radius) of camera centres [C, 3]: each
    camera's distance from the per-axis median centre, and whether it exceeds
    OUTLIER_FACTOR x the robust radius (median + 3 x 1.4826 x MAD of the distances).
    Fewer than MIN_CAMERAS_FOR_OUTLIERS cameras, or a zero robust radius (cameras at one
    point), flag none. The rule is a robust z-score (Iglewicz & Hoaglin 1993, the MAD
    scaled by 1.4826 to a normal sigma) with a large factor, so only gross pose errors
    (a camera hundreds of times too far) are flagged."""
    c = np.asarray(centers, np.float64)
    dist = np.linalg.norm(c - np.median(c, axis=0), axis=1) if len(c) else np.zeros(0)
    if len(c) < MIN_CAMERAS_FOR_OUTLIERS:
        return np.zeros(len(c), bool), dist, float(dist.max(initial=0.0))
    med = float(np.median(dist))
    radius = med + 3.0 * 1.4826 * float(np.median(np.abs(dist - med)))
    if radius <= 1e-12 * max(1.0, float(np.abs(c).max())):
        return np.zeros(len(c), bool), dist, radius
    return dist > OUTLIER_FACTOR * radius, dist, radius


def camera_extent(centers: np.ndarray) -> tuple[np.ndarray, float]:
    """(centre [3], radius) of camera centres [C, 3] without the far outliers of
    :func:`camera_outliers`: their mean and 1.1 x the largest distance from it (>= 1e-6)."""
    c = np.asarray(centers, np.float64)
    far, _, _ = camera_outliers(c)
    c = c[~far]
    mid = c.mean(axis=0)
    radius = float(np.linalg.norm(c - mid, axis=1).max()) * 1.1
    return mid, max(radius, 1e-6)
