"""A 360-degree video dropped on the studio (issue 51's bar: "the studio opens it by drop"),
under Xvfb on software Vulkan: the overlay says it is taken as 360 before the drop, the
drop starts the reconstruction with the panel's dataset settings, SfM runs on the frames'
cube faces (its note kept in the window's notes), and the review shows the frames as
pinhole faces grouped by frame. Tiny: 4 frames of 256 x 128 px."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.studio import protocol as M

from .conftest import spin
from .studio_helpers import drag_and_drop, sent

pytestmark = pytest.mark.timeout(300)


def test_a_dropped_360_video_is_reconstructed_on_its_faces_and_reviewed(studio, tmp_path):
    from tests.ingest.videos import write_video
    from tests.test_pipeline_equirect import _room_video

    app, win = studio
    video = _room_video(tmp_path / "room360.mp4", 4, 256)
    flat = tmp_path / "flat.mp4"  # the same kind of file, not 2:1: an ordinary video to the overlay
    write_video(flat, [np.full((96, 128, 3), 90 + 20 * i, np.uint8) for i in range(3)])
    drag_and_drop(win.viewport.container, [flat], drop=False)
    assert win.drops.text.startswith("Reconstruct the video flat.mp4"), win.drops.text
    drag_and_drop(win.viewport.container, [video], drop=False)
    assert win.drops.text.startswith("Reconstruct the 360-degree video room360.mp4") and "Projection" in \
        win.drops.text, win.drops.text
    e = len(win.errors)
    drag_and_drop(win.viewport.container, [video])
    assert spin(app, 10, lambda: sent(win, M.StartPipeline)), "the drop started nothing"
    cmd = sent(win, M.StartPipeline)[-1]
    assert cmd.source == str(video) and cmd.masks is not None   # the panel's dataset settings go with it
    assert any("360-degree video room360.mp4" in n for n in win.notes), win.notes[-3:]
    assert spin(app, 240, lambda: (win.scene is not None and win.scene.kind == "review") or len(win.errors) > e), \
        (win.notes[-3:], win.errors[e:])
    assert len(win.errors) == e, win.errors[e:]
    assert any("taken as 360-degree equirectangular" in n and "--projection perspective" in n for n in win.notes), \
        win.notes[-6:]
    summary = win.dataset.summary.text()
    assert "4 registered images as 24 pinhole faces" in summary, summary
    # All options > Projection: perspective goes with the next drop, and the note no longer says 360
    win.training.advanced["projection"] = "perspective"
    n = len(sent(win, M.StartPipeline))
    drag_and_drop(win.viewport.container, [video])
    assert spin(app, 10, lambda: len(sent(win, M.StartPipeline)) > n)
    assert sent(win, M.StartPipeline)[-1].projection == "perspective"
    assert win.notes[-1].startswith("Reconstructing the video room360.mp4 (frames, SfM, undistortion)"), win.notes[-1]
    assert spin(app, 30, lambda: win.job_state == "loading")
    win.training.stop_btn.click()
    assert spin(app, 120, lambda: win.job_state in ("idle", "failed")), win.job_state
    win.training.advanced.pop("projection")
