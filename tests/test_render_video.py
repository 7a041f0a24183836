"""`spirula render` (spirula/engine/jobs/render_video.py, spirula/engine/splat/camera_path.py): frame count and
duration exact, decoded frames against our rasterizer's renders of the same cameras
(PSNR >= 40 dB at the default quality), the camera paths' geometry, cancelling and bad
settings leaving no file. Software Vulkan at a tiny size."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spirula.engine.errors import SpirulaError
from spirula.engine.io.ply import write_ply
from spirula.engine.splat import camera_path as cp
from tests.io.splat_cases import random_gaussians
from tests.splat.reference import SH_C0

W, H, FPS, SECONDS = 160, 120, 10, 1.0


def _scene(seed=0, n=4000):
    """Gaussians whose colour varies smoothly in space (as a capture's do), sizes 0.06-0.25
    in a cube of half size 1."""
    rng = np.random.default_rng(seed)
    g = random_gaussians(rng, n, 1, extent=1.0)
    g.scales = np.log(rng.uniform(0.06, 0.25, (n, 3))).astype(np.float32)
    m = g.means.astype(np.float64)
    rgb = 0.5 + 0.35 * np.stack([np.sin(2 * m[:, 0] + 1), np.sin(1.7 * m[:, 1] + 2), np.cos(2.3 * m[:, 2])], 1)
    g.sh0 = ((rgb - 0.5) / SH_C0).astype(np.float32)
    g.shN = (g.shN * 0.1).astype(np.float32)
    g.opacities = rng.uniform(0.0, 4.0, n).astype(np.float32)
    return g


def _psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0 ** 2 / mse)


def test_video_frames_duration_and_quality(gpu, tmp_path, monkeypatch, capsys):
    av = pytest.importorskip("av")
    from spirula.engine.cli.main import main
    from spirula.engine.jobs.render_video import VideoSettings, load_source, plan_cameras
    from spirula.engine.splat.camera_table import View, camera_row
    from spirula.engine.splat.param_layout import pack
    from spirula.engine.splat.render import Rasterizer

    monkeypatch.setattr("spirula.engine.device.get_gpu", lambda *a, **k: gpu)
    write_ply(tmp_path / "s.ply", _scene())
    out = tmp_path / "out.mp4"
    assert main(["render", str(tmp_path / "s.ply"), "-o", str(out), "--width", str(W), "--height", str(H),
                 "--fps", str(FPS), "--seconds", str(SECONDS)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4", "s.ply"]   # no temporary left
    # the size said exactly (a small video read "0.0 MB" on 85b3bc0)
    assert capsys.readouterr().out.strip().endswith(f"{out.stat().st_size:,} bytes")
    with av.open(str(out)) as c:
        st = c.streams.video[0]
        assert st.codec_context.name == "h264" and (st.width, st.height) == (W, H)
        assert st.frames == FPS * SECONDS and st.duration * st.time_base == SECONDS
        decoded = [f.reformat(format="rgb24", src_colorspace="itu709").to_ndarray() for f in c.decode(video=0)]
    assert len(decoded) == FPS * SECONDS
    # our renderer, called here directly, for the cameras of the path
    src = load_source(tmp_path / "s.ply")
    c2w, fovs = plan_cameras(src, VideoSettings(width=W, height=H, fps=FPS, seconds=SECONDS))
    g = src.gaussians
    params = gpu.upload(pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, g.sh_degree))
    raster = Rasterizer(gpu, g.sh_degree)
    psnrs = []
    for i, frame in enumerate(decoded):
        f = 0.5 * H / np.tan(np.radians(fovs[i]) / 2)
        cams = gpu.upload(camera_row(np.linalg.inv(c2w[i]), f, f, W / 2, H / 2, W, H)[None])
        ref = raster.render(params, len(g), cams, View(0, W, H), g.sh_degree)
        ref = (np.clip(ref, 0, 1) * 255 + 0.5).astype(np.uint8)
        assert ref.mean() > 20                         # the subject is in view
        psnrs.append(_psnr(frame, ref))
    assert min(psnrs) >= 40.0, psnrs


def test_cancel_and_bad_settings_leave_no_file(gpu, tmp_path):
    from spirula.engine.jobs.render_video import VideoSettings, render_video

    write_ply(tmp_path / "s.ply", _scene(1, 500))
    out = tmp_path / "out.mp4"
    out.write_bytes(b"an older video")
    calls = []
    r = render_video(tmp_path / "s.ply", out, VideoSettings(width=32, height=32, fps=10, seconds=1.0), gpu=gpu,
                     progress=lambda d, t: calls.append(d), should_stop=lambda: len(calls) >= 3)
    assert r["stopped"] and calls == [1, 2, 3]
    assert out.read_bytes() == b"an older video"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4", "s.ply"]
    for s, words in [(VideoSettings(width=33, height=32), "must be even"),
                     (VideoSettings(fps=30, seconds=1.01), "whole number of frames"),
                     (VideoSettings(crf=60), "0..51"),
                     (VideoSettings(path="keyframes"), "needs a keyframe file")]:
        with pytest.raises(SpirulaError, match=words):
            render_video(tmp_path / "s.ply", out, s, gpu=gpu)
    assert out.read_bytes() == b"an older video"


def test_cli_refuses_in_one_line(tmp_path, capsys):
    from spirula.engine.cli.main import main

    write_ply(tmp_path / "s.ply", _scene(2, 50))
    assert main(["render", str(tmp_path / "s.ply"), "-o", str(tmp_path / "o.mp4"), "--seconds", "0.51"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --seconds 0.51 at --fps 30 is 15.3 frames") and "\n" not in err
    assert not (tmp_path / "o.mp4").exists()


def test_cli_says_when_keyframes_would_be_ignored_or_missed(tmp_path, capsys):
    """A keyframe file with another --path is refused (it was ignored without a word); a
    keyframe past the video's end is named with the --seconds that reaches it; a bad
    keyframe is counted from 1."""
    from spirula.engine.cli.main import main

    write_ply(tmp_path / "s.ply", _scene(2, 50))
    a, b = np.eye(4), np.eye(4)
    b[:3, 3] = [0.5, 0.0, 0.0]
    keys = tmp_path / "k.json"
    keys.write_text(json.dumps([{"c2w": a.tolist(), "fov": 40, "time": 0.0},
                                {"c2w": b.tolist(), "fov": 40, "time": 5.0}]))
    out = tmp_path / "o.mp4"
    assert main(["render", str(tmp_path / "s.ply"), "-o", str(out), "--keyframes", str(keys), "--path", "orbit"]) == 1
    err = capsys.readouterr().err
    assert "--keyframes" in err and "--path orbit" in err and not out.exists()
    with pytest.raises(SpirulaError, match="keyframe 2's c2w"):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps([{"c2w": a.tolist(), "fov": 40}, {"c2w": (2 * a).tolist(), "fov": 40}]))
        cp.read_keyframes(bad)
    # past the end: warned before any frame renders (then the render is refused for its size here)
    main(["render", str(tmp_path / "s.ply"), "-o", str(out), "--keyframes", str(keys), "--seconds", "0.51"])
    err = capsys.readouterr().err
    assert "error: --seconds 0.51" in err   # bad settings first: no warning needed
    main(["render", str(tmp_path / "missing.ply"), "-o", str(out), "--keyframes", str(keys), "--seconds", "1"])
    err = capsys.readouterr().err
    assert "1 keyframe of" in err and "--seconds 5.03333" in err, err


# ------------------------------------------------------------------ camera paths (NumPy)

def _ring(rng, k, centre, radius, height, noise=0.0):
    """Cameras on a ring about ``centre`` (up = -y), each looking at it, centres jittered."""
    theta = np.linspace(0, 2 * np.pi, k, endpoint=False)
    eyes = centre + np.stack([radius * np.cos(theta), -height * np.ones(k), radius * np.sin(theta)], 1)
    eyes = eyes + rng.normal(0, noise, eyes.shape)
    return np.stack([cp.look_at(e, centre, np.array([0.0, -1.0, 0.0])) for e in eyes]), eyes


def test_orbit_from_training_cameras_finds_the_subject():
    rng = np.random.default_rng(4)
    centre = np.array([0.3, -0.2, 4.0])
    c2w, _ = _ring(rng, 40, centre, 3.0, 1.0)
    path, fov = cp.orbit_from_cameras(c2w, np.full(40, 42.0), 24)
    eyes, fwd = path[:, :3, 3], path[:, :3, 2]
    assert fov == 42.0 and len(path) == 24
    horiz = eyes - centre
    assert np.allclose(np.linalg.norm(horiz[:, [0, 2]], axis=1), 3.0, atol=1e-6)
    assert np.allclose(horiz[:, 1], -1.0, atol=1e-6)
    to_centre = (centre - eyes) / np.linalg.norm(centre - eyes, axis=1, keepdims=True)
    assert np.allclose(np.sum(fwd * to_centre, 1), 1.0, atol=1e-9)
    r = path[:, :3, :3]
    assert np.allclose(np.einsum("kji,kjl->kil", r, r), np.eye(3), atol=1e-9) and np.allclose(np.linalg.det(r), 1)
    assert np.allclose(path[0, :3, 3], c2w[0, :3, 3], atol=1e-6)          # starts at the first camera
    assert np.all(np.diff(np.unwrap(np.arctan2(horiz[:, 2], horiz[:, 0]))) > 0)   # one way round, evenly
    assert np.ptp(np.diff(np.unwrap(np.arctan2(horiz[:, 2], horiz[:, 0])))) < 1e-9


def test_smoothed_training_path_is_closer_to_the_true_path():
    rng = np.random.default_rng(5)
    centre = np.array([0.0, 0.0, 0.0])
    noisy, eyes = _ring(rng, 300, centre, 2.0, 0.5, noise=0.05)      # a video's frames: 1.2 degrees apart
    path, fovs = cp.smoothed_path(noisy[:225], np.full(225, 50.0), 90, smooth=3)
    assert path.shape == (90, 4, 4) and np.allclose(fovs, 50.0)
    off = lambda p: np.linalg.norm(np.stack([np.linalg.norm(p[:, [0, 2]], axis=1) - 2.0, p[:, 1] + 0.5], 1),
                                   axis=1)   # noqa: E731 - distance from the ring
    assert off(path[:, :3, 3]).mean() < 0.5 * off(eyes[:225]).mean()
    steps = np.linalg.norm(np.diff(path[:, :3, 3], axis=0), axis=1)
    assert steps.max() < 2 * np.median(steps)                           # even, no jumps
    fwd = path[:, :3, 2]
    to_centre = -path[:, :3, 3] / np.linalg.norm(path[:, :3, 3], axis=1, keepdims=True)
    assert np.degrees(np.arccos(np.clip(np.sum(fwd * to_centre, 1), -1, 1))).max() < 3   # still looking in


def test_keyframes_interpolated(tmp_path):
    a = cp.look_at(np.array([0.0, 0.0, -3.0]), np.zeros(3), np.array([0.0, -1.0, 0.0]))
    b = cp.look_at(np.array([3.0, 0.0, 0.0]), np.zeros(3), np.array([0.0, -1.0, 0.0]))
    f = tmp_path / "keys.json"
    f.write_text(json.dumps({"keyframes": [{"c2w": a.tolist(), "fov": 40, "time": 0.0},
                                           {"c2w": b.tolist(), "fov": 60, "time": 1.0}]}))
    c2w, fovs, times = cp.read_keyframes(f)
    path, fov = cp.keyframe_path(c2w, fovs, times, 21, 10)       # 2 s: the second second holds b
    assert np.allclose(path[0], a) and np.allclose(path[10], b) and np.allclose(path[20], b)
    assert np.allclose(fov[[0, 5, 10, 15]], [40, 50, 60, 60])
    assert np.allclose(path[5, :3, 3], (a[:3, 3] + b[:3, 3]) / 2)
    # the rotation halfway is the half turn: 45 degrees from each (a and b are 90 apart about y)
    cos = lambda r1, r2: (np.trace(r1.T @ r2) - 1) / 2            # noqa: E731
    assert np.isclose(cos(path[5, :3, :3], a[:3, :3]), np.cos(np.pi / 4)) and \
        np.isclose(cos(path[5, :3, :3], b[:3, :3]), np.cos(np.pi / 4))
    for doc, words in [([], "no keyframes"), ([{"c2w": [[1, 0], [0, 1]], "fov": 40}], "not a 4 x 4"),
                       ([{"c2w": (2 * np.eye(4)).tolist(), "fov": 40}], "not a rigid transform"),
                       ([{"c2w": a.tolist(), "fov": 190}], "fov is 190"),
                       ([{"c2w": a.tolist(), "fov": 40, "time": 1}, {"c2w": b.tolist(), "fov": 40, "time": 0.5}],
                        "increase")]:
        f.write_text(json.dumps(doc))
        with pytest.raises(SpirulaError) as e:
            cp.read_keyframes(f)
        assert str(e.value).startswith(f"{f}: keyframe file: ") and words in str(e.value), str(e.value)


def _project(tmp_path):
    """A `spirula train` project (splat.ply, train.json) whose dataset is a COLMAP text model
    of 12 cameras on a ring of radius 3 about the origin, 1 above it, looking at it."""
    from PIL import Image

    data = tmp_path / "data"
    (data / "sparse" / "0").mkdir(parents=True)
    (data / "images").mkdir()
    lines = []
    for i, t in enumerate(np.linspace(0, 2 * np.pi, 12, endpoint=False)):
        m = cp.look_at(np.array([3 * np.cos(t), -1.0, 3 * np.sin(t)]), np.zeros(3), np.array([0.0, -1.0, 0.0]))
        w2c = np.linalg.inv(m)
        q = cp.rot_to_quat(w2c[None, :3, :3])[0]
        pose = " ".join(repr(float(v)) for v in (*q, *w2c[:3, 3]))
        lines.append(f"{i + 1} {pose} 1 f{i:03d}.png\n\n")
        Image.fromarray(np.zeros((24, 32, 3), np.uint8)).save(data / "images" / f"f{i:03d}.png")
    (data / "sparse" / "0" / "cameras.txt").write_text("1 PINHOLE 32 24 30 30 16 12\n")
    (data / "sparse" / "0" / "images.txt").write_text("".join(lines))
    (data / "sparse" / "0" / "points3D.txt").write_text("")
    proj = tmp_path / "proj"
    proj.mkdir()
    write_ply(proj / "splat.ply", _scene(3, 300))
    (proj / "train.json").write_text(json.dumps({"dataset": str(data)}))
    return proj


def test_project_orbit_and_training_path_follow_its_cameras(tmp_path):
    from spirula.engine.jobs.render_video import VideoSettings, load_source, plan_cameras

    src = load_source(_project(tmp_path))
    assert src.c2w is not None and len(src.c2w) == 12
    fov_train = np.degrees(2 * np.arctan(12 / 30))
    c2w, fovs = plan_cameras(src, VideoSettings(fps=10, seconds=2.0))
    eyes = c2w[:, :3, 3]
    assert len(c2w) == 20 and np.allclose(fovs, fov_train)
    assert np.allclose(np.linalg.norm(eyes[:, [0, 2]], axis=1), 3.0, atol=1e-6) and np.allclose(eyes[:, 1], -1.0)
    assert np.allclose(eyes[0], [3.0, -1.0, 0.0], atol=1e-6)            # from the first camera (by name)
    c2w, fovs = plan_cameras(src, VideoSettings(fps=10, seconds=2.2, path="training"))
    assert len(c2w) == 22 and np.allclose(fovs, fov_train)
    # smoothed over one camera: it starts and ends at the first and last cameras, passing each in turn
    assert np.allclose(c2w[0, :3, 3], src.c2w[0, :3, 3], atol=1e-4) and \
        np.allclose(c2w[-1, :3, 3], src.c2w[-1, :3, 3], atol=1e-4)
    nearest = np.argmin(np.linalg.norm(c2w[:, None, :3, 3] - src.c2w[None, :, :3, 3], axis=2), axis=1)
    assert np.all(np.diff(nearest) >= 0) and set(nearest) == set(range(12))
    # a splat file has no cameras: the training path is refused in one line naming it
    with pytest.raises(SpirulaError, match="the training path needs a project"):
        plan_cameras(load_source(tmp_path / "proj" / "splat.ply"), VideoSettings(path="training"))


def test_crop_renders_only_the_box(gpu, tmp_path, monkeypatch):
    """--crop keeps the Gaussians whose centres lie in the box: the frames are our renders of
    that subset (and differ from the whole scene's); a box holding none is refused."""
    av = pytest.importorskip("av")
    from spirula.engine.cli.main import main
    from spirula.engine.jobs.render_video import FrameRenderer, VideoSettings, crop_source, load_source, plan_cameras

    monkeypatch.setattr("spirula.engine.device.get_gpu", lambda *a, **k: gpu)
    g = _scene(6, 1500)
    write_ply(tmp_path / "s.ply", g)
    box = (-1.5, -1.5, -1.5, 0.0, 1.5, 1.5)                           # the x < 0 half
    out = tmp_path / "crop.mp4"
    assert main(["render", str(tmp_path / "s.ply"), "-o", str(out), "--width", "64", "--height", "48", "--fps", "2",
                 "--seconds", "1", "--crop", *map(str, box)]) == 0
    with av.open(str(out)) as c:
        frames = [f.reformat(format="rgb24", src_colorspace="itu709").to_ndarray() for f in c.decode(video=0)]
    src = crop_source(load_source(tmp_path / "s.ply"), box)
    assert len(src.gaussians) == int(np.sum(g.means[:, 0] <= 0))
    c2w, fovs = plan_cameras(src, VideoSettings(width=64, height=48, fps=2, seconds=1))
    mine, whole = FrameRenderer(gpu, src.gaussians, 64, 48), FrameRenderer(gpu, g, 64, 48)
    for i, frame in enumerate(frames):
        assert _psnr(frame, mine.render(c2w[i], fovs[i])) >= 35
        assert _psnr(frame, whole.render(c2w[i], fovs[i])) < 30
    with pytest.raises(SpirulaError, match="no Gaussian's centre lies inside the crop box"):
        crop_source(src, (5, 5, 5, 6, 6, 6))
    with pytest.raises(SpirulaError, match="each min below its max"):
        VideoSettings(crop=(0, 0, 0, 0, 1, 1)).frames()


def _decoded(path):
    import av

    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])])


def test_saved_edit_applied_when_asked(gpu, tmp_path):
    """apply_edit (the studio's export): the video of a splat file with a saved edit equals
    the video of the kept Gaussians written as a file of their own; without it, the whole."""
    from spirula.engine.jobs.render_video import VideoSettings, render_video

    ply = _edited_scene(tmp_path, 3)
    cams = VideoSettings(width=32, height=32, fps=4, seconds=1.0, path="keyframes", keyframes=str(tmp_path / "k.json"))
    eye = [np.array([0.0, -0.5, -4.0]), np.array([2.0, -0.5, -3.5])]
    (tmp_path / "k.json").write_text(json.dumps([{"c2w": cp.look_at(e, np.zeros(3), np.array([0.0, -1.0, 0.0]))
                                                  .tolist(), "fov": 50.0} for e in eye]))
    edited = _decoded(render_video(ply, tmp_path / "e.mp4", cams, gpu=gpu, apply_edit=True)["output"])
    kept = _decoded(render_video(tmp_path / "b" / "splat.ply", tmp_path / "k.mp4", cams, gpu=gpu)["output"])
    whole = _decoded(render_video(ply, tmp_path / "w.mp4", cams, gpu=gpu)["output"])
    assert len(edited) == len(kept) == len(whole) == 4
    np.testing.assert_array_equal(edited, kept)                     # the same Gaussians, the same encode
    assert np.abs(edited.astype(int) - whole.astype(int)).mean() > 1.0  # the edit removed something seen


def test_spirula_render_applies_the_saved_edit_unless_told_not_to(gpu, tmp_path):
    """`spirula render` applies a source's saved studio edit by default, as `spirula export`
    does; --no-edit renders the splats as trained."""
    from spirula.engine.cli.main import main

    ply = _edited_scene(tmp_path, 4)
    eye = [np.array([0.0, -0.5, -4.0]), np.array([2.0, -0.5, -3.5])]
    (tmp_path / "k.json").write_text(json.dumps([{"c2w": cp.look_at(e, np.zeros(3), np.array([0.0, -1.0, 0.0]))
                                                  .tolist(), "fov": 50.0} for e in eye]))
    size = ["--width", "32", "--height", "32", "--fps", "4", "--seconds", "1", "--keyframes", str(tmp_path / "k.json")]
    assert main(["render", str(ply), "-o", str(tmp_path / "e.mp4"), *size]) == 0
    assert main(["render", str(tmp_path / "b" / "splat.ply"), "-o", str(tmp_path / "k.mp4"), *size]) == 0
    assert main(["render", str(ply), "-o", str(tmp_path / "w.mp4"), "--no-edit", *size]) == 0
    edited, kept, whole = (_decoded(tmp_path / f"{n}.mp4") for n in ("e", "k", "w"))
    np.testing.assert_array_equal(edited, kept)
    assert np.abs(edited.astype(int) - whole.astype(int)).mean() > 1.0


def _edited_scene(tmp_path, seed: int):
    """a/splat.ply with a saved edit deleting the Gaussians at x >= 0.2, and b/splat.ply
    holding only the kept ones; returns a's path."""
    from spirula.engine.io.splat_edit import SplatEdit, edit_file_for, file_sha256

    g = _scene(seed, 600)
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    ply = tmp_path / "a" / "splat.ply"
    write_ply(ply, g)
    edit = SplatEdit(g.means, sha256=file_sha256(ply), name=ply.name)
    keep = g.means[:, 0] < 0.2
    edit.deleted = ~keep
    edit.save(edit_file_for(ply))
    write_ply(tmp_path / "b" / "splat.ply", g.subset(keep))
    return ply
