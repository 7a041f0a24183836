"""`spirula bench studio`: the studio viewport's frame rate while a model trains (issue 25:
"the studio stays interactive (>= 60 fps) while a 6M model trains").

It runs the window's own engine, without Qt: a :class:`spirula.engine.studio.session.Session` with its
viewer and warm-up (spirula/engine/studio/engine_thread.py: each loop turn routes the commands, trains
a slice of steps that yields as soon as a viewer frame or a command is due, then renders the
frame that is due), the training started by the window's StartTraining, the camera moved by
the window's SetView. What differs from the window, and why:

- No window, so no swapchain: the viewer frame is the window's frame less its copy into the
  swapchain image and its present (``Viewer.readback_when_headless`` off, as in `spirula bench
  viewer`): splat render + compose, frames in flight as on the window's device (2 on a GPU,
  1 on software Vulkan), nothing read back. A frame counts as presented when the viewer has
  waited for it and checked it (``Viewer._complete``), where the window presents it.
- The model holds about ``gaussians`` Gaussians from the first step: the dataset's SfM points
  are dropped, so the trainer starts from ``gaussians`` random points (``init_points``, the
  "views" random init of spirula/engine/splat/init.py), and MCMC's budget is the same count (it
  relocates and never grows past it). The dataset is loaded here and handed to the engine as
  the one just reviewed (``Loads.reviewed``, what the window's Review -> Start reuses). A
  real run from SfM points would reach the count only by MCMC's growth (5% per refine).
- No checkpoints and no evaluations during the run (``checkpoint_every`` 0, ``eval_interval``
  0); nothing is saved at the end (the project lives in a temporary folder).

Phases (times in seconds): the engine starts (device, warm-up compiles) while the dataset
loads; StartTraining; once the first step is done, ``still`` seconds of training with the
view still (model frames only, the training's own rate: ``still_steps_per_sec``,
``step_ms`` = the still slices' wall time per step, the GPU waits at their ends included),
then ``seconds`` seconds of orbit: ``view_hz`` SetViews a second (default 120: the window's
camera timer is 16 ms and a drag sends one per tick, but at 60 Hz input no frame rate could
measure over 60) moving the camera around the scene centre at 45 degrees
per second, at the first training camera's distance and height, with its field of view.

Reported for the orbit (JSON; ms are wall-clock milliseconds): ``frames`` presented and
``fps`` (frames / seconds); the intervals between presented frames, ``frame_interval_ms_median``
and ``_p90`` with ``fps_median`` = 1000 / median and ``fps_p10`` = 1000 / p90 (the frame rate
exceeded 90% of the time); ``longest_gap_ms`` (window edges included); training ``steps``
and ``steps_per_sec``; the engine loop's parts, ``slice_ms_median`` and
``steps_per_slice_median`` (the training slices) and ``render_ms_median`` (a
``Viewport.render`` that made a frame) with their shares of the wall time; the model's
Gaussian count, backend, viewport width / height and the viewer's render size and scale
(the adaptive resolution stays on, as in the window).

Input latency (issue 50: under 150 ms while training on a slow device): each SetView of the
orbit is an input event (the window sends one per 16 ms camera tick while a drag moves);
``input_latency_ms_*`` is the wait from its sending to the present of the first frame that
renders it or a later view (:func:`input_latency`). On a slow device no step runs while the
camera moves (``INPUT_LATENCY_MS`` in spirula/engine/studio/training.py) and the moving frames draw
fewer Gaussians and pixels (spirula/engine/studio/adaptive.py), so after the first event (which waits
for the step under way) an input waits for about a frame and a half.

Reading the numbers: while the camera moves, a SetView is queued every 16.7 ms, so a slice
pauses after its first step or two (``pause()`` in spirula/engine/studio/training.py yields when a
command is queued or a frame is due), then waits for those steps on the GPU
(``TrainingRun.settle``) before the frame is recorded. One loop turn is therefore at least a
whole step (recording, GPU, the wait) plus a frame, in series: the frame interval cannot drop
below ``slice_ms_median`` + ``render_ms_median``, and a step longer than 16.7 ms (``step_ms``)
alone rules out 60 fps. MCMC's refine steps (every 100 steps from step 500) wait for the GPU
and show as the longest gaps. So the studio's training yields to a moving camera
(spirula/engine/studio/training.py ``yields_to_view``, ``steps_beside_frame``): while the view moves, a
slice holds only the steps that fit beside a frame in 3/4 of 1/60 s, and none when even one
step does not while a frame alone would, except one slice every 0.25 s; training goes on
0.25 s after the camera stops (``yield_to_camera`` in the JSON; ``SPIRULA_TRAIN_YIELD=0``
turns it off, to measure the loop without it). A redesign could train on while the camera moves: a step recorded as
several command buffers (e.g. forward + loss, then backward + Adam) with a pause check
between them, so a frame waits at most for part of a step.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path

import numpy as np

ORBIT_DEG_PER_S = 45.0   # camera speed of the orbit, degrees per second
VIEW_HZ = 120.0          # SetView commands per second: a fast drag on a 120 Hz display (the window's
                         # camera timer is 16 ms; at 60 Hz input no frame rate could show over 60)


def orbit_w2c(center, up, eye0, angle_rad: float) -> np.ndarray:
    """[4, 4] world-to-camera of ``eye0`` [3] turned by ``angle_rad`` about the axis ``up`` [3]
    through ``center`` [3], looking at ``center`` (Rodrigues' rotation)."""
    from ...pose import look_at

    k = np.asarray(up, np.float64)
    k = k / max(np.linalg.norm(k), 1e-12)
    v = np.asarray(eye0, np.float64) - np.asarray(center, np.float64)
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    rot = v * c + np.cross(k, v) * s + k * np.dot(k, v) * (1 - c)
    return look_at(np.asarray(center, np.float64) + rot, center, k)


class _Record:
    """What the engine thread did, appended there (lists: thread-safe appends), read after."""

    def __init__(self):
        self.slices: list[tuple[float, float, int]] = []   # (start s, end s, steps) per training slice
        self.renders: list[tuple[float, float]] = []       # (start s, end s) per Viewport.render that made a frame
        self.presented: list[float] = []                   # s: a frame waited for and checked (the present)
        self.frames_in_flight = 0
        self.view_of: dict[int, bytes] = {}                # id(submitted frame) -> the view (w2c bytes) it renders
        self.shown: list[tuple[bytes, float]] = []         # (view, s) per present


def _instrument(engine, rec: _Record) -> None:
    """Wrap the engine's training slices and viewport renders to time them, and (on the first
    render with a viewer) its viewer: the frame is not read back, presenting is timed."""
    training, viewport = engine.training, engine.viewport
    slice_, render = training.slice, viewport.render

    def step() -> int:
        sc = training.scene
        return sc.trainer.state.step if sc is not None else 0

    def timed_slice(budget_s: float = 0.1) -> None:
        t, s = time.perf_counter(), step()
        try:
            slice_(budget_s)
        finally:
            rec.slices.append((t, time.perf_counter(), step() - s))

    def timed_render(force_readback: bool = False):
        v = viewport.viewer
        if v is not None and "_complete" not in vars(v):
            v.readback_when_headless = False  # the window's frame: nothing read back
            complete = v._complete

            submit = v._submit_frame

            def submitted(*a, **kw):
                fl = submit(*a, **kw)
                rec.view_of[id(fl)] = np.asarray(v.state.w2c, np.float64).tobytes()
                return fl

            def presented(fl, tex):
                complete(fl, tex)
                now = time.perf_counter()
                rec.presented.append(now)
                rec.shown.append((rec.view_of.pop(id(fl), b""), now))
            v._complete, v._submit_frame = presented, submitted
            rec.frames_in_flight = v.frames_in_flight
        t, frames = time.perf_counter(), v.frames if v is not None else 0
        try:
            return render(force_readback)
        finally:
            if v is not None and v.frames != frames:
                rec.renders.append((t, time.perf_counter()))

    training.slice, viewport.render = timed_slice, timed_render


def _session_class():
    from ...studio.engine_thread import EngineThread
    from ...studio.session import Session, lower_priority

    class BenchSession(Session):
        """The window's Session whose engine thread is kept (``engine``) and timed (``rec``)."""

        engine = None

        def _main(self) -> None:
            lower_priority()
            self.rec = _Record()
            engine = EngineThread(self)
            _instrument(engine, self.rec)
            self.engine = engine
            engine.run()

    return BenchSession


class _Watch:
    """The engine's messages, polled from this thread: an Error or a failed state raises."""

    def __init__(self, session):
        self.s, self.seen = session, []

    def poll(self) -> list:
        from ...errors import SpirulaError
        from ...studio import protocol as M

        new = self.s.poll()
        self.seen += new
        for m in new:
            if isinstance(m, M.Error) or (isinstance(m, M.JobState) and m.state == "failed"):
                raise SpirulaError(f"bench studio: the engine failed: {getattr(m, 'text', '') or m.detail}")
        return new

    def until(self, pred, timeout_s: float, what: str):
        from ...errors import SpirulaError

        t_end = time.perf_counter() + timeout_s
        while time.perf_counter() < t_end:
            for m in self.poll():
                if pred(m):
                    return m
            if not self.s.alive:
                raise SpirulaError(f"bench studio: the engine thread ended while waiting for {what}")
            time.sleep(0.005)
        raise SpirulaError(f"bench studio: no {what} within {timeout_s:.0f} s")


def bench_studio(data, gaussians: int = 6_000_000, max_size: int = 1000, steps: int = 30_000, seconds: float = 20.0,
                 still: float = 3.0, width: int = 1920, height: int = 1080, backend: str | None = None,
                 timeout_s: float = 900.0, view_hz: float = VIEW_HZ, geometry: bool = False) -> dict:
    """Run the protocol of the module docstring on dataset folder ``data``; returns the
    JSON-ready result. ``timeout_s``: the longest wait for each setup phase. ``geometry``: train
    with the geometry phase (the training panel's default), from 60% of ``steps`` on."""
    from ...ingest import load_dataset
    from ...studio import protocol as M

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="spirula-bench-studio-") as tmp:
        session = _session_class()(backend=backend, projects=Path(tmp), warmup=True, viewer=True).start()
        watch = _Watch(session)
        try:
            ds = load_dataset(data, max_size if max_size > 0 else None)  # meanwhile the engine warms up
            t_loaded = time.perf_counter()
            ds.points, ds.colors = None, None  # random init of `gaussians` points (module docstring)
            ready = watch.until(lambda m: isinstance(m, M.EngineReady), timeout_s, "EngineReady")
            t_ready = time.perf_counter()
            eng = session.engine
            eng.loads.reviewed = (str(Path(data).resolve()), max_size, ds)
            session.send(M.ResizeViewport(width, height))
            session.send(M.StartTraining(str(data), steps=steps, max_size=max_size, init_random_points=gaussians,
                                         max_gaussians=gaussians, strategy="mcmc", checkpoint_every=0,
                                         eval_interval=0, geometry=geometry))
            scene = watch.until(lambda m: isinstance(m, M.SceneLoaded), timeout_s, "SceneLoaded")
            trainer = eng.training.scene.trainer
            t_end = time.perf_counter() + timeout_s
            while trainer.state.step < 1 and time.perf_counter() < t_end:
                watch.poll()
                time.sleep(0.01)
            t_started = time.perf_counter()
            first = next((c for c in scene.cameras if c.split == "train"), scene.cameras[0])
            eye0 = np.asarray(first.c2w, np.float64).reshape(4, 4)[:3, 3]
            fov = float(np.degrees(2 * np.arctan(0.5 * first.height / first.fy)))

            sent_views: list[tuple[bytes, float]] = []   # (view, s) per SetView of the orbit: the input events

            def view(angle: float) -> None:
                w2c = tuple(float(x) for x in orbit_w2c(scene.center, scene.up, eye0, angle).reshape(-1))
                sent_views.append((np.asarray(w2c, np.float64).tobytes(), time.perf_counter()))
                session.send(M.SetView(w2c, fov, None))

            view(0.0)
            s_still0, ts0 = trainer.state.step, time.perf_counter()
            while time.perf_counter() < ts0 + still:
                watch.poll()
                time.sleep(0.01)
            s_still1, ts1 = trainer.state.step, time.perf_counter()
            sent_views.clear()
            sent, k = 0, 0
            while (now := time.perf_counter()) < ts1 + seconds and not eng.training.scene.finished:
                view(math.radians(ORBIT_DEG_PER_S) * (now - ts1))
                sent += 1
                watch.poll()
                k += 1
                time.sleep(max(0.0, ts1 + k / view_hz - time.perf_counter()))
            s_orbit1, to1 = trainer.state.step, time.perf_counter()
            finished = eng.training.scene.finished
            n = trainer.model.n
            v = eng.viewport.viewer
            render_scale, render_size = float(v.render_scale), list(v.last_render_size)
            cam = ds.cameras[eng.training.scene.train_idx[0]]
            yield_to_camera = bool(eng.training.yield_to_camera)
        finally:
            closed = session.close(save=False, timeout=300)
        watch.poll() if closed else None
    rec = session.rec
    res = {"bench": "studio", "device": ready.adapter, "backend": ready.backend, "software": ready.software,
           "data": str(data), "max_size": max_size, "image_size": [int(cam.width), int(cam.height)],
           "images": len(ds.cameras), "gaussians_requested": gaussians, "gaussians": int(n), "strategy": "mcmc",
           "init": "random (views), the dataset's points dropped", "width": width, "height": height,
           "render_size": render_size, "render_scale": render_scale, "frames_in_flight": rec.frames_in_flight,
           "frame_path": "render + compose, no swapchain copy or present (headless), nothing read back",
           "seconds": to1 - ts1, "still_seconds": ts1 - ts0, "view_commands": sent,
           "yield_to_camera": yield_to_camera, "view_hz": view_hz, "geometry": geometry,
           "geometry_from_step": trainer.geometry.start if trainer.geometry is not None else None,
           "training_finished_early": bool(finished), "step_start": s_still1, "step_end": s_orbit1,
           "steps": s_orbit1 - s_still1, "steps_per_sec": (s_orbit1 - s_still1) / max(to1 - ts1, 1e-9),
           "still_steps_per_sec": (s_still1 - s_still0) / max(ts1 - ts0, 1e-9),
           "setup_s": {"load_dataset": t_loaded - t0, "engine_ready": t_ready - t0, "warmup": ready.warmup_s,
                       "first_step": t_started - t0}}
    res.update(frame_stats(rec.presented, ts1, to1))
    res["still_fps"] = frame_stats(rec.presented, ts0, ts1)["fps"]
    res.update(loop_stats(rec, ts0, ts1, to1))
    res.update(input_latency(sent_views, rec.shown))
    res["reaches_60fps"] = bool(res["fps_p10"] >= 60.0)
    res["note"] = explain(res)
    return res


def frame_stats(times: list[float], t0: float, t1: float) -> dict:
    """Frame rate of the presents at ``times`` (s) inside [t0, t1] (s): count, fps, interval
    median / p90 (ms), fps_median / fps_p10, the longest gap (ms, the window's edges included)."""
    t = np.array([x for x in times if t0 <= x <= t1])
    iv = np.diff(t) * 1e3
    edges = [(t[0] - t0) * 1e3, (t1 - t[-1]) * 1e3] if len(t) else [(t1 - t0) * 1e3]
    med = float(np.median(iv)) if len(iv) else float("nan")
    p90 = float(np.percentile(iv, 90)) if len(iv) else float("nan")
    return {"frames": int(len(t)), "fps": len(t) / max(t1 - t0, 1e-9), "frame_interval_ms_median": med,
            "frame_interval_ms_p90": p90, "fps_median": 1e3 / med if len(iv) else 0.0,
            "fps_p10": 1e3 / p90 if len(iv) else 0.0, "longest_gap_ms": float(max([*iv.tolist(), *edges])),
            "frame_interval_ms_each": [round(x, 3) for x in iv.tolist()]}


def input_latency(sent: list[tuple[bytes, float]], shown: list[tuple[bytes, float]]) -> dict:
    """Input latency of the camera: for each input event (a SetView sent at s, in ``sent``, in
    order), the wait (ms) until the first present (``shown``: (view, s)) of a frame that renders
    that view or a later one; events no frame answered before the end are counted apart
    (``input_events_unanswered``). The window adds its camera timer (a drag's moves are sent on
    the next 16 ms tick: 8 ms on average) and the compositor's present on top. ``_first``: the
    first event's (the drag starts while a training step runs: it waits for that step, which
    cannot be cut); ``_steady``: the events sent after the first one was answered."""
    n = len(sent)
    lat, answer = latencies(sent, shown)
    t_sent = np.array([t for _, t in sent])
    ok = np.isfinite(lat)
    q = lambda p, m=ok: float(np.percentile(lat[m], p)) if m.any() else None  # noqa: E731
    steady = ok & (t_sent > answer[0]) if n and np.isfinite(answer[0]) else np.zeros(n, bool)
    return {"input_events": n, "input_events_unanswered": int((~ok).sum()),
            "input_latency_ms_median": q(50), "input_latency_ms_p90": q(90), "input_latency_ms_p99": q(99),
            "input_latency_ms_max": float(lat[ok].max()) if ok.any() else None,
            "input_latency_ms_first": float(lat[0]) if n and ok[0] else None,
            "input_latency_ms_steady_median": q(50, steady), "input_latency_ms_steady_p90": q(90, steady),
            "input_latency_ms_steady_max": float(lat[steady].max()) if steady.any() else None}


def latencies(sent: list[tuple[bytes, float]], shown: list[tuple[bytes, float]]) -> tuple[np.ndarray, np.ndarray]:
    """([n] ms, [n] s) per input event of ``sent`` ((view, s), in order): the wait until the
    first of ``shown`` ((view, s)) that shows its view or a later one, and that time (inf
    for none)."""
    index = {v: i for i, (v, _) in enumerate(sent)}
    n = len(sent)
    first = np.full(n + 1, np.inf)   # per event index: the earliest present of a frame of that view
    for v, t in shown:
        i = index.get(v)
        if i is not None:
            first[i] = min(first[i], t)
    answer = np.minimum.accumulate(first[::-1])[::-1][:n]   # the earliest present of that view or a later one
    return (answer - np.array([t for _, t in sent], np.float64).reshape(-1)) * 1e3, answer


def loop_stats(rec: _Record, ts0: float, ts1: float, to1: float) -> dict:
    """The engine loop's parts: the still phase [ts0, ts1] s gives the step time (wall time of
    its slices per step, ms); the orbit [ts1, to1] s the slices' and frames' medians (ms) and
    shares of the wall time."""
    still = [(a, b, n) for a, b, n in rec.slices if ts0 <= a and b <= ts1]
    orbit = [(a, b, n) for a, b, n in rec.slices if ts1 <= a and b <= to1]
    renders = [(a, b) for a, b in rec.renders if ts1 <= a and b <= to1]
    still_steps = sum(n for _, _, n in still)
    span = max(to1 - ts1, 1e-9)
    return {
        "step_ms": 1e3 * sum(b - a for a, b, _ in still) / still_steps if still_steps else None,
        "still_slices": len(still),
        "slice_ms_median": float(np.median([b - a for a, b, _ in orbit]) * 1e3) if orbit else None,
        "steps_per_slice_median": float(np.median([n for _, _, n in orbit])) if orbit else None,
        "render_ms_median": float(np.median([b - a for a, b in renders]) * 1e3) if renders else None,
        "slices_share": sum(b - a for a, b, _ in orbit) / span,
        "render_share": sum(b - a for a, b in renders) / span,
    }


def explain(r: dict) -> str:
    """One paragraph: does the studio hold 60 fps here, and what bounds its frame rate."""
    if r["reaches_60fps"]:
        return (f"holds 60 fps: 90% of the frame intervals are <= 16.7 ms; {r['steps_per_sec']:.1f} training "
                f"steps/s while the camera moved ({r['still_steps_per_sec']:.1f} with it still)")
    step = r["step_ms"]
    parts = [f"below 60 fps (p10 {r['fps_p10']:.1f} fps, median {r['fps_median']:.1f})"]
    if step is not None:
        parts.append(f"one training step takes {step:.1f} ms at {r['gaussians']:,} Gaussians"
                     + (" (> 16.7 ms: a frame cannot come between two steps in time)" if step > 1e3 / 60 else ""))
    if r["slice_ms_median"] is not None:
        parts.append(f"while the camera moves, a slice is {r['steps_per_slice_median']:.0f} step(s) in "
                     f"{r['slice_ms_median']:.1f} ms (the slice ends waiting for its steps) and a frame "
                     f"{r['render_ms_median'] or 0:.1f} ms after it: {r['slices_share']:.0%} of the time trains, "
                     f"{r['render_share']:.0%} renders")
    return "; ".join(parts)


def add_parser(bs) -> None:
    """``spirula bench studio`` (registered by spirula/engine/cli/bench/commands.py)."""
    from ..options import image_side, int_at_least

    p = bs.add_parser("studio", help="studio viewport frame rate while a model trains (the window's engine, no Qt)")
    p.add_argument("--data", type=Path, required=True, help="dataset folder to train (COLMAP, nerfstudio)")
    p.add_argument("--gaussians", type=int_at_least(1), default=6_000_000,
                   help="Gaussians of the model from the first step: random init and MCMC budget (default 6,000,000)")
    p.add_argument("--max-size", type=image_side, default=1000, help="longer image side in px (default 1000)")
    p.add_argument("--steps", type=int_at_least(1), default=30_000,
                   help="steps of the training run (default 30,000; it must outlast the benchmark)")
    p.add_argument("--seconds", type=float, default=20.0, help="seconds of orbiting camera, measured (default 20)")
    p.add_argument("--still", type=float, default=3.0,
                   help="seconds of training with a still view first: the step time (default 3)")
    p.add_argument("--width", type=int_at_least(16), default=1920, help="viewport width in px (default 1920)")
    p.add_argument("--height", type=int_at_least(16), default=1080, help="viewport height in px (default 1080)")
    p.add_argument("--view-hz", type=float, default=VIEW_HZ,
                   help=f"camera changes sent per second while orbiting (default {VIEW_HZ:g})")
    p.add_argument("--geometry", action="store_true",
                   help="train with the geometry phase, as the training panel does by default; it starts at 60%% "
                        "of --steps (e.g. --steps 300: from step 180, before a 3 s still phase ends on a GPU)")


def run(args) -> tuple[dict, list[str]]:
    res = bench_studio(args.data, args.gaussians, args.max_size, args.steps, args.seconds, args.still, args.width,
                       args.height, args.device, view_hz=args.view_hz, geometry=args.geometry)
    lines = [f"bench studio on {res['device']}: {res['gaussians']:,} Gaussians training on {Path(res['data']).name} "
             f"({res['image_size'][0]}x{res['image_size'][1]}), viewport {res['width']}x{res['height']} "
             f"(render {res['render_size'][0]}x{res['render_size'][1]}), camera orbiting {res['seconds']:.1f} s",
             f"  frames: {res['frames']} ({res['fps']:.1f} fps), interval median {res['frame_interval_ms_median']:.1f} ms "
             f"({res['fps_median']:.1f} fps), p90 {res['frame_interval_ms_p90']:.1f} ms ({res['fps_p10']:.1f} fps), "
             f"longest gap {res['longest_gap_ms']:.1f} ms",
             f"  input latency (SetView sent -> its frame presented, {res['input_events']} events): median "
             f"{_ms(res['input_latency_ms_median'])}, p90 {_ms(res['input_latency_ms_p90'])}, max "
             f"{_ms(res['input_latency_ms_max'])}; the first {_ms(res['input_latency_ms_first'])} (the step under "
             f"way); after it median {_ms(res['input_latency_ms_steady_median'])}, p90 "
             f"{_ms(res['input_latency_ms_steady_p90'])}, max {_ms(res['input_latency_ms_steady_max'])}",
             f"  training: {res['steps']} steps ({res['steps_per_sec']:.1f} steps/s; with a still view "
             f"{res['still_steps_per_sec']:.1f} steps/s, {_ms(res['step_ms'])} per step); waits for a moving "
             f"camera: {_waiting(res)}" + _geometry_phase(res),
             f"  {res['note']}"]
    if res["training_finished_early"]:
        lines.append(f"  the training ended at step {res['step_end']} (--steps) before the orbit did: "
                     "the numbers cover less than --seconds; raise --steps")
    return res, lines


def _waiting(res: dict) -> str:
    """Whether training waited for the moving camera (spirula/engine/studio/training.py's rules)."""
    from ...studio.training import FRAME_BUDGET_MS, INPUT_LATENCY_MS, TRAIN_SHARE

    if not res["yield_to_camera"]:
        return "off (SPIRULA_TRAIN_YIELD=0)"
    frame = res["render_ms_median"]
    if res["step_ms"] is not None and frame is not None and res["step_ms"] + frame > INPUT_LATENCY_MS:
        return (f"yes, for the whole orbit: a step and a frame ({res['step_ms']:.0f} + {frame:.0f} ms) exceed the "
                f"{INPUT_LATENCY_MS:.0f} ms input latency bound")
    if frame is not None and frame > TRAIN_SHARE * FRAME_BUDGET_MS:
        return (f"on, but never here: a frame alone takes {frame:.1f} ms, over "
                f"{TRAIN_SHARE * FRAME_BUDGET_MS:.1f} ms (3/4 of 1/60 s)")
    return "on"


def _geometry_phase(res: dict) -> str:
    if not res["geometry"]:
        return ""
    start = res["geometry_from_step"]
    reached = ("" if res["step_end"] > start else
               f", not reached (the orbit ended at step {res['step_end']}: a smaller --steps puts it in the phase)")
    return f"; geometry phase from step {start}{reached}"


def _ms(x) -> str:
    return "?" if x is None else f"{x:.1f} ms"
