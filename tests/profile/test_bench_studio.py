"""`spirula bench studio` at a tiny size on software Vulkan (seconds): the studio's engine
thread trains a COLMAP dataset whose model holds the asked Gaussian count (not its SfM
points') while the camera orbits; the JSON has the frame rate, the training's progress and
the step time. And its orbit and frame statistics on their own."""

import json
import math
import os
import subprocess
import sys

import numpy as np

from spirula.engine.cli.bench.studio_fps import frame_stats, input_latency, orbit_w2c
from spirula.engine.studio.training import FRAME_BUDGET_MS, INPUT_LATENCY_MS, TRAIN_SHARE
from tests.mesh import synthetic as S
from tests.mesh.analytic import orbit_cameras
from ..patience import patient

FIELDS = {"bench", "device", "backend", "gaussians", "gaussians_requested", "width", "height", "render_size",
          "frames", "fps", "frame_interval_ms_median", "frame_interval_ms_p90", "fps_median", "fps_p10",
          "longest_gap_ms", "steps", "steps_per_sec", "still_steps_per_sec", "step_ms", "step_start", "step_end",
          "slice_ms_median", "steps_per_slice_median", "render_ms_median", "frames_in_flight", "reaches_60fps",
          "note", "setup_s", "input_events", "input_events_unanswered", "input_latency_ms_median",
          "input_latency_ms_p90", "input_latency_ms_max"}


def _bench(tmp_path, *extra, env=None) -> tuple[dict, str]:
    rng = np.random.default_rng(0)
    verts, faces = S.torus_mesh(48, 16)
    S.write_dataset(tmp_path / "data", orbit_cameras(8, 3.2, 48, 53.0), verts, faces,
                    points=S.sfm_like_points(300, rng))
    out = tmp_path / "studio.json"
    r = subprocess.run([sys.executable, "-m", "spirula.engine.cli", "bench", "studio", "--data", str(tmp_path / "data"),
                        "--gaussians", "2000", "--max-size", "48", "--seconds", "1.5",
                        "--still", "0.5", "--width", "64", "--height", "48", "--json", str(out), *extra],
                       capture_output=True, text=True, timeout=patient(240),
                       env=None if env is None else {**os.environ, **env})
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert json.loads(r.stdout.strip().splitlines()[-1]) == res
    return res, r.stderr


def test_bench_studio_json(tmp_path):
    res, stderr = _bench(tmp_path, "--steps", "5000")
    assert "bench studio on " in stderr and "steps/s" in stderr
    assert FIELDS <= set(res), FIELDS - set(res)
    assert res["bench"] == "studio" and (res["width"], res["height"]) == (64, 48)
    assert res["gaussians"] == res["gaussians_requested"] == 2000  # random init, not the 300 SfM points
    # the camera orbited and frames came (counts, not rates: a loaded machine sends fewer; the
    # rates are the GPU machine's studio protocol, benchmarks/README.md)
    assert res["frames"] > 0 and res["fps"] > 0 and res["view_commands"] >= 3
    assert res["step_start"] >= 1 and res["step_ms"] > 0 and not res["training_finished_early"]
    assert res["yield_to_camera"]
    # every input event but the last few is answered by a presented frame of its view or a later one
    assert res["input_events"] == res["view_commands"] and res["input_events_unanswered"] < res["input_events"]
    assert 0 < res["input_latency_ms_median"] <= res["input_latency_ms_max"]
    # software Vulkan: a frame alone misses 1/60 s, so the training does not wait for the
    # camera for its frame rate (spirula/engine/studio/training.py) and advances while orbiting, unless
    # a step and a frame exceed the input latency bound: then it waits for the camera to stop
    slow = res["step_ms"] + res["render_ms_median"] > INPUT_LATENCY_MS
    if res["render_ms_median"] > TRAIN_SHARE * FRAME_BUDGET_MS and not slow:
        assert res["steps"] > 0 and res["steps_per_slice_median"] >= 1
    assert 1.5 <= res["seconds"] < 1.5 + 60  # the orbit lasts --seconds, then ends (no wall-clock bound)
    assert not res["geometry"] and res["geometry_from_step"] is None


def test_bench_studio_trains_the_geometry_phase_when_asked(tmp_path):
    """--geometry: the training panel's default; the phase starts at 60% of --steps (12 of 20
    here), and the run trains into it. The orbit's --seconds is a deadline here, not a
    length: the bench stops when the 20 steps are done, however long a loaded machine takes
    (a 1.5 s orbit reached only step 12 under load)."""
    # training on while the camera moves (a loaded machine's steps would otherwise wait for the orbit to end)
    res, stderr = _bench(tmp_path, "--steps", "20", "--geometry", "--seconds", f"{patient(60):.0f}",
                         env={"SPIRULA_TRAIN_YIELD": "0"})
    assert res["geometry"] and res["geometry_from_step"] == 12
    assert res["step_end"] > 12, res["step_end"]
    assert "geometry phase from step 12" in stderr


def test_orbit_keeps_distance_and_height_and_looks_at_the_centre():
    center, up, eye0 = np.array([1.0, -2.0, 0.5]), np.array([0.0, 0.0, 2.0]), np.array([4.0, -2.0, 1.5])
    for a in np.linspace(0.0, 2 * math.pi, 7):
        w2c = orbit_w2c(center, up, eye0, a)
        eye = -w2c[:3, :3].T @ w2c[:3, 3]
        assert abs(np.linalg.norm(eye - center) - np.linalg.norm(eye0 - center)) < 1e-9
        assert abs(eye[2] - eye0[2]) < 1e-9  # turned about the up axis
        fwd = (center - eye) / np.linalg.norm(center - eye)
        assert w2c[2, :3] @ fwd > 1 - 1e-9
    assert np.allclose(orbit_w2c(center, up, eye0, math.pi / 2)[:3, 3],
                       orbit_w2c(center, up, eye0, math.pi / 2 + 2 * math.pi)[:3, 3])


def test_frame_stats_of_known_presents():
    t = [10.0 + 0.02 * k for k in range(50)] + [11.5]  # 50 frames 20 ms apart, then a 520 ms gap
    s = frame_stats([9.0, *t, 13.0], 10.0, 12.0)  # presents outside the window are left out
    assert s["frames"] == 51 and abs(s["fps"] - 25.5) < 1e-9
    assert abs(s["frame_interval_ms_median"] - 20.0) < 1e-6 and abs(s["fps_median"] - 50.0) < 1e-4
    assert abs(s["longest_gap_ms"] - 520.0) < 1e-6  # (the window's end is 500 ms after the last)
    assert s["fps_p10"] <= s["fps_median"] and len(s["frame_interval_ms_each"]) == 50
    empty = frame_stats([], 0.0, 1.0)
    assert empty["frames"] == 0 and empty["fps_p10"] == 0.0 and empty["longest_gap_ms"] == 1000.0


def test_input_latency_counts_each_event_until_a_frame_of_it_or_a_later_one_shows():
    # events a..e sent at 0, 10, 20, 30, 40 ms; frames of b (at 25 ms), d (at 45 ms), c (at 50 ms: late, stale)
    sent = [(b"a", 0.000), (b"b", 0.010), (b"c", 0.020), (b"d", 0.030), (b"e", 0.040)]
    shown = [(b"x", 0.005), (b"b", 0.025), (b"d", 0.045), (b"c", 0.050)]
    r = input_latency(sent, shown)
    # a and b: b's frame at 25 ms; c and d: d's frame at 45 ms; e: never shown
    lat = np.array([25.0, 15.0, 25.0, 15.0])
    assert r["input_events"] == 5 and r["input_events_unanswered"] == 1
    assert math.isclose(r["input_latency_ms_median"], float(np.median(lat)), abs_tol=1e-6)
    assert math.isclose(r["input_latency_ms_max"], 25.0, abs_tol=1e-6)
    # the first event waited 25 ms; after its answer (25 ms) came d's (sent at 30 ms: 15 ms)
    assert math.isclose(r["input_latency_ms_first"], 25.0, abs_tol=1e-6)
    assert math.isclose(r["input_latency_ms_steady_max"], 15.0, abs_tol=1e-6)
