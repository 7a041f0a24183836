#!/usr/bin/env python3
"""The studio window's input latency while a model trains (issue 50 item 2: under 150 ms on
a slow device), measured in the real window on a private Xvfb display: the engine thread
trains while the Qt thread drags the camera as a user does, and each input event (a mouse
move of the drag) is timed to the first paint of the viewport that shows its camera or a
later one (``displayed``: the window's reprojection of the last frame, spirula/app/image_view.py,
or the engine's frame) and to the arrival of the engine's own frame of that camera or a later
one (``rendered``). `spirula bench studio` measures the engine alone (no Qt); this adds the
window: its event loop, the read-back frames, the paint.

    .venv/bin/python benchmarks/studio_input_latency.py --data DIR [--gaussians 150000]
        [--max-size 500] [--drags 3] [--drag-seconds 3] [--still 4] [--json FILE]

Each of ``--drags`` drags starts after ``--still`` seconds of training with the camera still
(so its first event meets a training step under way, as a user's does) and moves the mouse
2 px every 1/120 s for ``--drag-seconds``. ``$SPIRULA_VIEW_WARP=0`` measures without the
reprojection (then ``displayed`` is the engine's frames only). Software Vulkan shows read-back
frames (spirula/app/image_view.py readback_reason); on a GPU the swapchain presents and
nothing is measured here (``--readback`` forces it). Prints a summary on stderr and one JSON
object on stdout. Needs Xvfb, PySide6 and pyqtgraph."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _drag(app, win, seconds: float, hz: float, sent: list) -> None:
    """One left drag across the viewport's readback surface: a press, a move of 2 px every
    1 / ``hz`` s for ``seconds`` (each that turned the camera appended to ``sent`` as (its
    w2c bytes, s)), the release. The moves come from a precise timer
    with the Qt event loop running, so the Qt thread sleeps between them as a user's does."""
    from PySide6 import QtCore, QtGui, QtWidgets

    view, c = win.viewport.image_view, win.controller
    left, none = QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.MouseButton.NoButton
    mods = QtCore.Qt.KeyboardModifier.NoModifier
    p = QtCore.QPointF(view.width() / 2 - 60, view.height() / 2)

    def send(kind, pos, button, buttons):
        QtWidgets.QApplication.sendEvent(view, QtGui.QMouseEvent(kind, pos, view.mapToGlobal(pos), button, buttons,
                                                                 mods))

    k = [0]
    loop = QtCore.QEventLoop()

    def move():
        k[0] += 1
        t = time.perf_counter()  # the input event; its camera is the controller's once handled
        before = np.asarray(c.camera.w2c(), np.float64).tobytes()
        send(QtCore.QEvent.Type.MouseMove, p + QtCore.QPointF(2.0 * k[0], 0.0), none, left)
        after = np.asarray(c.camera.w2c(), np.float64).tobytes()
        if after != before:  # a move under the drag threshold (the first 3 px) turns nothing
            sent.append((after, t))
        if t >= t0 + seconds:
            timer.stop()
            loop.quit()

    timer = QtCore.QTimer()
    timer.setTimerType(QtCore.Qt.TimerType.PreciseTimer)
    timer.setInterval(max(1, round(1000.0 / hz)))
    timer.timeout.connect(move)
    send(QtCore.QEvent.Type.MouseButtonPress, p, left, left)
    t0 = time.perf_counter()
    timer.start()
    loop.exec()
    send(QtCore.QEvent.Type.MouseButtonRelease, p + QtCore.QPointF(2.0 * k[0], 0.0), left, none)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="dataset folder to train (COLMAP, nerfstudio)")
    ap.add_argument("--gaussians", type=int, default=150_000, help="random init and MCMC budget (default 150,000)")
    ap.add_argument("--max-size", type=int, default=500, help="longer image side in px (default 500)")
    ap.add_argument("--drags", type=int, default=3, help="drags measured (default 3)")
    ap.add_argument("--drag-seconds", type=float, default=3.0, help="length of one drag (default 3)")
    ap.add_argument("--still", type=float, default=4.0, help="training with a still camera before each drag (s)")
    ap.add_argument("--hz", type=float, default=120.0, help="mouse moves per second (default 120)")
    ap.add_argument("--size", type=int, nargs=2, default=(1200, 760), help="window size (default 1200 760)")
    ap.add_argument("--readback", action="store_true", help="read-back frames on any device")
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = ap.parse_args(argv)

    from spirula.app.headless import Xvfb

    if not Xvfb.available():
        print("studio_input_latency: Xvfb is not installed (apt-get install xvfb)", file=sys.stderr)
        return 2
    if args.readback:
        os.environ["SPIRULA_VIEWER"] = "readback"
    xvfb = Xvfb(1400, 1000).start()
    try:
        os.environ["QT_QPA_PLATFORM"] = "xcb"
        from spirula.app.startup import prepare_environment

        prepare_environment()
        from spirula.engine.cli.bench.studio_fps import input_latency, latencies
        from tests.app.conftest import spin
        from tests.app.studio_helpers import open_and_start, open_studio, steps_done

        with tempfile.TemporaryDirectory(prefix="spirula-input-latency-") as tmp:
            app, win = open_studio(Path(tmp) / "projects", size=tuple(args.size))
            try:
                if not spin(app, 120, lambda: win.viewer_mode is not None):
                    print("studio_input_latency: the engine never said how it presents", file=sys.stderr)
                    return 2
                if win.viewport.mode != "readback":
                    print("studio_input_latency: the viewport presents through the swapchain (a fast device): "
                          "nothing to measure here (--readback forces read-back frames)", file=sys.stderr)
                    return 2
                t = win.training
                t.strategy.setCurrentIndex(t.strategy.findData("mcmc"))
                t.steps.setValue(30_000)
                t.max_size.setValue(args.max_size)
                t.init_points.setValue(args.gaussians)
                t.max_gaussians.setValue(args.gaussians)
                t.eval_interval.setValue(0)
                open_and_start(app, win, args.data, timeout=600)
                if not spin(app, 900, lambda: steps_done(win) >= 1 or bool(win.errors)) or win.errors:
                    print(f"studio_input_latency: training did not start: {win.errors}", file=sys.stderr)
                    return 2
                view = win.viewport.image_view
                paints: list = []    # (shown w2c bytes, s, reprojected)
                frames: list = []    # (frame w2c bytes, s): the engine's frames as they arrive
                view.painted.connect(lambda: paints.append(
                    (np.asarray(view.shown[0], np.float64).tobytes() if view.shown[0] is not None else b"",
                     time.perf_counter(), view.shown[1], view.paint_ms)))
                set_frame = view.set_frame

                def arrived(frame):
                    frames.append((np.asarray(frame.w2c, np.float64).tobytes() if frame.w2c else b"",
                                   time.perf_counter()))
                    set_frame(frame)
                view.set_frame = arrived
                drags = []
                for _ in range(args.drags):
                    spin(app, args.still)
                    sent: list = []
                    p0, f0, s0 = len(paints), len(frames), steps_done(win)
                    _drag(app, win, args.drag_seconds, args.hz, sent)
                    spin(app, 2.0)  # the last frames of the drag come in
                    shown = [(v, s) for v, s, _, _ in paints[p0:]]
                    disp, rend = input_latency(sent, shown), input_latency(sent, frames[f0:])
                    drags.append({"events": len(sent), "steps_during": steps_done(win) - s0,
                                  "paints": len(shown), "reprojected_paints": sum(r for _, _, r, _ in paints[p0:]),
                                  "paint_ms_median": _q(np.array([m for *_, m in paints[p0:]]), 50),
                                  "frames": len(frames) - f0, "displayed": disp, "rendered": rend,
                                  "lat_displayed": _finite(latencies(sent, shown)[0]),
                                  "lat_rendered": _finite(latencies(sent, frames[f0:])[0])})
                steps = steps_done(win)
                n = next((m.num_gaussians for m in reversed(win.messages) if hasattr(m, "num_gaussians")), None)
            finally:
                win.shutdown(save=False)
                win.close()
    finally:
        xvfb.stop()
    res = {"bench": "studio_input_latency", "data": str(args.data), "gaussians": n, "max_size": args.max_size,
           "window": list(args.size), "viewport": list(win.viewport.physical_size()),
           "warp": os.environ.get("SPIRULA_VIEW_WARP", "1") != "0", "hz": args.hz, "steps": steps,
           "load_avg": list(os.getloadavg())}
    for kind in ("displayed", "rendered"):
        lat = np.concatenate([d[f"lat_{kind}"] for d in drags]) if drags else np.zeros(0)
        firsts = [d[kind]["input_latency_ms_first"] for d in drags]
        res[kind] = {"median_ms": _q(lat, 50), "p90_ms": _q(lat, 90), "max_ms": _q(lat, 100),
                     "first_event_ms": firsts, "unanswered": sum(d[kind]["input_events_unanswered"] for d in drags)}
    for d in drags:
        del d["lat_displayed"], d["lat_rendered"]
    res["drags"] = drags
    for kind in ("displayed", "rendered"):
        r = res[kind]
        print(f"{kind}: median {r['median_ms']:.1f} ms, p90 {r['p90_ms']:.1f} ms, max {r['max_ms']:.1f} ms; first "
              f"event of each drag {', '.join(f'{x:.0f}' if x is not None else '?' for x in r['first_event_ms'])} ms",
              file=sys.stderr)
    for k, d in enumerate(drags, 1):
        r = d["rendered"]
        print(f"drag {k}: {d['events']} events, {d['paints']} paints ({d['reprojected_paints']} reprojected, median "
              f"{d['paint_ms_median'] or 0:.1f} ms), {d['frames']} engine frames; rendered median "
              f"{_ms(r['input_latency_ms_median'])}, first {_ms(r['input_latency_ms_first'])}", file=sys.stderr)
    text = json.dumps(res)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


def _finite(a: np.ndarray) -> np.ndarray:
    return a[np.isfinite(a)]


def _ms(x) -> str:
    return "?" if x is None else f"{x:.0f} ms"


def _q(a: np.ndarray, p: float):
    return float(np.percentile(a, p)) if len(a) else None


if __name__ == "__main__":
    sys.exit(main())
