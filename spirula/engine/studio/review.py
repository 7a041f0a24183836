"""Review before training: a dataset opened in the studio is shown first (its cameras and
thumbnails, its notes, the held-out split, its SfM points as small splats), and trains
when the window sends StartTraining. The split the user chose travels in that command:
``held_out`` (image names evaluated, never trained on) and ``excluded`` (names neither
trained on nor evaluated); without them every ``eval_every``-th image is held out.
Masks (spirula/engine/ingest/masks.py) show in the images seen through a camera: the masked-out
pixels darkened and tinted red (spirula/engine/splat/mask_targets.py mask_overlay); the notes say which
masks were found and the mode "auto" takes (the Training panel's Masks picks another)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .scenes import Scene, camera_info, up_vector
from ..jobs.train import training_split as choose_split

POINT_OPACITY = 0.9
POINT_SCALE = 0.5     # x the RMS distance to the 3 nearest points


def camera_infos(dataset, train_idx, test_idx) -> tuple:
    split = {i: "train" for i in train_idx} | {i: "test" for i in test_idx}
    return tuple(camera_info(c, split.get(i, "excluded")) for i, c in enumerate(dataset.cameras))


class ReviewScene(Scene):
    """A dataset on show before its training: the cameras and the SfM points."""

    kind = "review"

    def __init__(self, gpu, dataset, path: str, eval_every: int):
        from ..splat.camera_table import camera_table
        from ..splat.init import gaussians_from_points
        from ..splat.trainer import pack_rgba8

        self.gpu, self.dataset, self.path = gpu, dataset, str(path)
        self.name = Path(path).name
        self.train_idx, self.test_idx, note = choose_split(dataset, eval_every)
        self.notes = list(dataset.warnings) + ([note] if note else []) + \
            ([dataset.masks_note] if getattr(dataset, "masks_note", None) else [])
        pts = dataset.points
        self.n = 0 if pts is None else len(pts)
        self.params = None
        if self.n:
            cols = dataset.colors if dataset.colors is not None else np.full((self.n, 3), 160, np.uint8)
            rows = gaussians_from_points(pts, cols, 0, POINT_OPACITY, POINT_SCALE)
            self.params = gpu.upload(rows, "review.points")
        self.cams = gpu.upload(camera_table(dataset.cameras), "review.cameras")
        self._pack = pack_rgba8
        self._gt: dict = {}

    def set_split(self, held_out, excluded) -> None:
        """The split the Dataset panel shows (``choose_split``'s rules; DatasetError names a bad one)."""
        self.train_idx, self.test_idx, _ = choose_split(self.dataset, 0, tuple(held_out), tuple(excluded))
        names = set(excluded)
        self.excluded_idx = [i for i, c in enumerate(self.dataset.cameras) if c.name in names]

    def gt(self, i: int):
        if i not in self._gt:
            from ..splat.mask_targets import mask_overlay

            cam = self.dataset.cameras[i]
            self._gt[i] = self.gpu.upload(self._pack(mask_overlay(cam.image, cam.mask)), f"review.gt.{i}")
        return self._gt[i]

    def source(self):
        from .viewer import ViewSource

        return ViewSource(params=self.params, n=self.n, max_sh_degree=0, sh_degree=0, cams=self.cams,
                          cameras=self.dataset.cameras, gt=self.gt)

    def scene_message(self, project: str = ""):
        from ..splat.init import scene_bounds
        from . import protocol as M
        from .framing import camera_centers, framing

        center, _ = scene_bounds(self.dataset)
        _, radius = self.dataset.scene_extent()
        return M.SceneLoaded("review", self.name, self.path, self.n, tuple(float(x) for x in center), float(radius),
                             tuple(float(x) for x in up_vector(self.dataset.cameras)),
                             camera_infos(self.dataset, self.train_idx, self.test_idx), project, tuple(self.notes),
                             **framing(self.dataset.points, center, radius, camera_centers(self.dataset.cameras)))
