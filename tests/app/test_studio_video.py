"""The studio's camera-path video (issue 52, item 1): keyframes added from the viewport's
camera in two views, the keyframe path exported as an H.264 video on the engine thread
(M.RenderVideo) with the right frame count, and Cancel during the render leaving no file.
Under Xvfb on software Vulkan, tiny: 64 x 48 px, 1 s at 8 fps."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.io.ply import write_ply
from spirula.engine.studio import protocol as M
from tests.io.splat_cases import random_gaussians

from .conftest import spin
from .studio_helpers import sent

pytestmark = pytest.mark.timeout(300)


def _open_splats(app, win, folder):
    folder.mkdir()
    g = random_gaussians(np.random.default_rng(52), 400, 1)
    g.means[:] = np.random.default_rng(53).uniform(-1, 1, size=g.means.shape)
    g.scales[:] = np.log(0.05)
    write_ply(folder / "splat.ply", g)
    n0 = len([m for m in win.messages if isinstance(m, M.SceneLoaded)])
    win.open_paths([str(folder / "splat.ply")])
    assert spin(app, 120, lambda: len([m for m in win.messages if isinstance(m, M.SceneLoaded)]) > n0), win.errors
    assert win.video.source == str(folder / "splat.ply")


def _saved_videos(win):
    return [m for m in win.messages if isinstance(m, M.Saved) and m.kind == "video"]


def _tiny(win, seconds: float = 1.0):
    v = win.video
    v.width.setValue(64)
    v.height.setValue(48)
    v.fps.setValue(8)
    v.seconds.setValue(seconds)


def test_keyframes_from_two_views_export_a_video(studio, tmp_path):
    import av

    app, win = studio
    _open_splats(app, win, tmp_path / "a")
    v, cam = win.video, win.controller.camera
    v.clear_keyframes()
    views = []
    for dx in (0.0, 300.0):  # two views: the second orbited about the target
        cam.orbit(dx, 40.0)
        win.controller.push()
        views.append((np.linalg.inv(cam.w2c()), cam.fov_y_deg))
        v.add_btn.click()
    assert len(v.keyframes) == 2 and v.key_list.count() == 2
    for (c2w, fov), (k_c2w, k_fov) in zip(views, v.keyframes):
        np.testing.assert_allclose(np.reshape(k_c2w, (4, 4)), c2w, atol=1e-9)
        assert k_fov == pytest.approx(fov)
    assert np.abs(views[0][0] - views[1][0]).max() > 0.1  # the two views differ
    assert v.path.currentData() == "keyframes" and v.export_btn.isEnabled()
    drawn = sent(win, M.SetPath)[-1]  # the keyframes and the path through them, drawn in the viewport
    assert drawn.keyframes == tuple(v.keyframes) and len(drawn.points) == 64 and drawn.size > 0
    np.testing.assert_allclose(drawn.points[0], views[0][0][:3, 3], atol=1e-6)
    np.testing.assert_allclose(drawn.points[-1], views[1][0][:3, 3], atol=1e-6)

    _tiny(win)
    c2w, _ = v.path_cameras()  # the preview's path: the first and last frames are the keyframes
    assert len(c2w) == 8
    np.testing.assert_allclose(c2w[0], views[0][0], atol=1e-6)
    np.testing.assert_allclose(c2w[-1], views[1][0], atol=1e-6)

    # the preview plays the path in the viewport: one SetView per frame, then the camera back
    k0, restored = len(win.sent), []
    win.controller.view_changed.connect(lambda: restored.append(1))  # its push (not in win.sent: sent directly)
    v.preview_btn.click()
    assert spin(app, 30, lambda: not v.preview_btn.isChecked()), "the preview did not end"
    views_sent = [c for c in win.sent[k0:] if isinstance(c, M.SetView)]
    assert len(views_sent) == 8 and restored  # one per frame, then the viewport's own camera again
    for i in (0, 3, 7):
        np.testing.assert_allclose(np.reshape(views_sent[i].w2c, (4, 4)), np.linalg.inv(c2w[i]), atol=1e-6)

    out = tmp_path / "video.mp4"
    n0 = len(_saved_videos(win))
    win.export_video(str(out))
    assert spin(app, 240, lambda: len(_saved_videos(win)) > n0 or win.errors), win.errors
    assert not win.errors, win.errors
    cmd = sent(win, M.RenderVideo)[-1]
    assert cmd.camera_path == "keyframes" and cmd.keyframes == tuple(v.keyframes)
    assert (cmd.width, cmd.height, cmd.fps, cmd.seconds) == (64, 48, 8, 1.0)
    with av.open(str(out)) as c:
        s = c.streams.video[0]
        frames = sum(1 for _ in c.decode(s))
        assert (s.codec_context.width, s.codec_context.height) == (64, 48)
    assert frames == 8
    progress = [m for m in win.messages if isinstance(m, M.StageProgress) and m.stage == "video"]
    assert progress[-1].done == progress[-1].total == 8
    assert not v.rendering and v.export_btn.isEnabled()
    from spirula.app import remembered

    assert remembered.load_values(f"video/{win.device_kind}") == {"width": 64, "height": 48, "fps": 8, "seconds": 1.0}
    v.remove_keyframe()
    assert len(v.keyframes) == 1 and not v.export_btn.isEnabled()  # the keyframe path needs two
    v.clear_keyframes()
    assert v.keyframes == [] and v.key_list.count() == 0
    cleared = sent(win, M.SetPath)[-1]
    assert cleared.keyframes == () and cleared.points == ()  # nothing drawn
    assert cleared.aspect == pytest.approx(64 / 48)          # the video's frame


def test_cancel_leaves_no_file(studio, tmp_path):
    app, win = studio
    _open_splats(app, win, tmp_path / "b")
    v = win.video
    v.path.setCurrentIndex(v.path.findData("orbit"))
    _tiny(win, seconds=60.0)  # 480 frames: Cancel comes after the first
    out = tmp_path / "cancelled.mp4"
    n0 = len(win.messages)
    win.export_video(str(out))

    def progressed():
        return any(isinstance(m, M.StageProgress) and m.stage == "video" for m in win.messages[n0:])

    assert spin(app, 120, lambda: progressed() or win.errors), win.errors
    assert v.cancel_btn.isEnabled()
    v.cancel_btn.click()
    assert spin(app, 120, lambda: not v.rendering), "the render did not stop"
    last = [m for m in win.messages[n0:] if isinstance(m, M.StageProgress) and m.stage == "video"][-1]
    assert last.done < last.total
    assert not out.exists() and list(tmp_path.glob("*.mp4")) == [] and list(tmp_path.glob(".*partial*")) == []
    assert not _saved_videos(win) or _saved_videos(win)[-1].path != str(out)
    assert "cancelled" in v.status.text()


def test_cancel_sent_before_the_render_starts_stops_it(studio, tmp_path):
    """Cancel right after Export video… (the command still queued) stops the render too."""
    app, win = studio
    _open_splats(app, win, tmp_path / "c")
    v = win.video
    v.path.setCurrentIndex(v.path.findData("orbit"))
    _tiny(win, seconds=60.0)
    out = tmp_path / "never.mp4"
    win.export_video(str(out))
    v.cancel_btn.click()
    assert spin(app, 120, lambda: not v.rendering), "the render did not stop"
    assert not out.exists() and list(tmp_path.glob("*.mp4")) == [] and list(tmp_path.glob(".*partial*")) == []
    assert "cancelled" in v.status.text(), v.status.text()


def test_keyframes_save_and_load_with_their_times(studio, tmp_path):
    """Keyframes saved from the panel are the file `spirula render --keyframes` reads (the
    times the video gives them), a file's own times survive loading and reach the render
    command and the engine's keyframe file; a bad file is one line in the status."""
    from spirula.engine.splat.camera_path import read_keyframes
    from spirula.engine.studio.rendering import write_command_keyframes

    app, win = studio
    v, cam = win.video, win.controller.camera
    v.clear_keyframes()
    v.fps.setValue(10)
    v.seconds.setValue(2.0)
    for dx in (0.0, 150.0, 150.0):
        cam.orbit(dx, 20.0)
        win.controller.push()
        v.add_btn.click()
    saved = tmp_path / "keys.json"
    v.save_keyframes(str(saved))
    c2w, fovs, times = read_keyframes(saved)
    assert len(c2w) == 3
    np.testing.assert_allclose(times, [0.0, 0.95, 1.9])  # 20 frames at 10 fps: the last at 1.9 s
    for m, (k, fov) in zip(c2w, v.keyframes):
        np.testing.assert_allclose(m, np.reshape(k, (4, 4)), atol=1e-12)
    before = v.path_cameras()[0]

    # the same keyframes with other times: loaded, shown, used by the path and the render
    import json

    doc = json.loads(saved.read_text())
    for row, t in zip(doc["keyframes"], (0.0, 0.5, 3.0)):
        row["time"] = t
    timed = tmp_path / "timed.json"
    timed.write_text(json.dumps(doc))
    v.clear_keyframes()
    v.load_keyframes(str(timed))
    assert v.key_times == [0.0, 0.5, 3.0] and v.key_list.count() == 3 and "3.00 s" in v.key_list.item(2).text()
    assert v.seconds.value() >= 3.0 and v.path.currentData() == "keyframes"
    c2w_path, _ = v.path_cameras()
    np.testing.assert_allclose(c2w_path[5], np.reshape(v.keyframes[1][0], (4, 4)), atol=1e-9)  # 0.5 s = frame 5
    assert not np.allclose(c2w_path[5], before[5])
    cmd = v.render_command(str(tmp_path / "out.mp4"))
    assert cmd.times == (0.0, 0.5, 3.0)
    write_command_keyframes(cmd, tmp_path / "engine.json")
    assert read_keyframes(tmp_path / "engine.json")[2].tolist() == [0.0, 0.5, 3.0]

    (tmp_path / "bad.json").write_text("[1, 2")
    v.load_keyframes(str(tmp_path / "bad.json"))
    assert "bad.json" in v.status.text() and "not valid JSON" in v.status.text() and len(v.keyframes) == 3
    v.add_btn.click()  # a new keyframe: spread evenly again
    assert v.key_times is None and len(v.keyframes) == 4
