"""Real drops of the inputs that reconstruct (issue 27): a video and a photo folder of the
office chair dropped on the viewport's native render window, under Xvfb on software
Vulkan. Nothing is stood in for: the drag events carry file URLs, the overlay says what
the drop will do, and the real pipeline (decode or import, pycolmap SfM, undistortion)
runs until the review screen shows the reconstructed cameras. (Splat files, project and
dataset folders dropped on the viewport: tests/app/test_studio_drops.py; a drag from
another application through the X server: tests/app/test_studio_xdnd.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import drag_and_drop, sent

pytestmark = pytest.mark.timeout(300)
N_FRAMES = 14


def _chair_frames(shared_data) -> list[np.ndarray]:
    """Every 2nd reference frame of the chair at 320 px wide (even sizes, for the encoder)."""
    from PIL import Image

    frames = []
    for i in range(1, 2 * N_FRAMES + 1, 2):
        with Image.open(shared_data / "office_chair" / "reference" / "images" / f"{i:04d}.jpg") as im:
            h = round(im.height * 320 / im.width) // 2 * 2
            frames.append(np.asarray(im.convert("RGB").resize((320, h), Image.Resampling.LANCZOS)))
    return frames


def _drop_and_review(app, win, path: Path, overlay: str) -> Path:
    """Drag ``path`` over the viewport, check the overlay, drop it; wait for the review of
    its reconstruction. Returns the project folder."""
    vp = win.viewport
    assert drag_and_drop(vp.window_, [path], drop=False) == [True, True], "the viewport refused the drag"
    assert win.drops.overlay.isVisible() and win.drops.text == overlay
    n, e = len(sent(win, M.StartPipeline)), len(win.errors)
    drag_and_drop(vp.window_, [path])
    assert spin(app, 10, lambda: len(sent(win, M.StartPipeline)) > n), "the drop started nothing"
    assert not win.drops.overlay.isVisible()
    assert sent(win, M.StartPipeline)[-1].source == str(path)
    assert spin(app, 240, lambda: (win.scene is not None and win.scene.kind == "review") or len(win.errors) > e), \
        win.notes[-3:]
    assert len(win.errors) == e, win.errors[e:]
    assert len(win.scene.cameras) >= N_FRAMES - 1          # the reconstructed views, on the review screen
    assert win.dataset.list.count() == len(win.scene.cameras)
    return Path(win.scene.path)


def test_a_video_dropped_on_the_viewport_is_reconstructed_and_reviewed(studio, shared_data, tmp_path):
    from tests.ingest.videos import write_video

    app, win = studio
    win.training.max_size.setValue(160)
    video = write_video(tmp_path / "chair clip.mp4", _chair_frames(shared_data),
                        pts_ms=[i * 400 for i in range(N_FRAMES)])   # 2.5 frames/s: one kept per window
    project = _drop_and_review(app, win, video, "Reconstruct the video chair clip.mp4 (frames, SfM), then review it")
    assert len(list((project / "frames").glob("*.jpg"))) >= N_FRAMES - 1
    assert (project / "cache" / "sfm" / "database.db").is_file() and (project / "sparse" / "0").is_dir()


def test_a_photo_folder_dropped_on_the_viewport_is_reconstructed_and_reviewed(studio, shared_data, tmp_path):
    from PIL import Image

    app, win = studio
    win.training.max_size.setValue(160)
    photos = tmp_path / "chair photos"
    photos.mkdir()
    for k, f in enumerate(_chair_frames(shared_data)):
        Image.fromarray(f).save(photos / f"IMG_{k:04d}.jpg", quality=95)
    project = _drop_and_review(app, win, photos, "Reconstruct the photos of chair photos (SfM), then review them")
    assert len(list((project / "frames").iterdir())) >= N_FRAMES
