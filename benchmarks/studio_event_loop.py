#!/usr/bin/env python3
"""The studio window's Qt event loop while a model trains (CPU machine, software Vulkan, a
private Xvfb display): the gaps between the ticks of a 2 ms timer over ``--seconds`` while
the camera orbits every 50 ms. The Qt thread never waits on the GPU, so on an otherwise idle
machine no gap passes ``--max-gap-ms`` (default 50). This is the measured bound; the test
(tests/app/test_window.py::test_event_loop_stays_responsive_while_training) keeps only a
generous one, since a loaded machine preempts the whole process for tens of ms.

    .venv/bin/python benchmarks/studio_event_loop.py [--seconds 6] [--max-gap-ms 50] [--json FILE]

Prints the summary on stderr and one JSON object on stdout; exits 1 when the longest gap
passes the bound (a second window is measured first, as a machine's hiccup can hit one).
Needs Xvfb, PySide6 and pyqtgraph (scripts/setup.sh installs them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=6.0, help="length of one measured window (default 6)")
    ap.add_argument("--max-gap-ms", type=float, default=50.0, help="longest gap allowed between ticks (default 50)")
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = ap.parse_args(argv)

    from spirula.app.headless import Xvfb

    if not Xvfb.available():
        print("studio_event_loop: Xvfb is not installed (apt-get install xvfb)", file=sys.stderr)
        return 2
    xvfb = Xvfb(1400, 1000).start()
    try:
        os.environ["QT_QPA_PLATFORM"] = "xcb"
        from spirula.app.startup import prepare_environment

        prepare_environment()
        from tests.app.conftest import spin
        from tests.app.scene import write_scene
        from tests.app.studio_helpers import measure_event_loop, open_and_start, open_studio, steps_done

        with tempfile.TemporaryDirectory(prefix="spirula-event-loop-") as tmp:
            app, win = open_studio(Path(tmp) / "projects", size=(1100, 720))
            try:
                if not spin(app, 120, lambda: win.viewer_mode is not None):
                    print("studio_event_loop: the engine never said how it presents", file=sys.stderr)
                    return 2
                # the settings of tests/app/test_window.py: a tiny model training on and on
                win.training.steps.setValue(100_000)
                win.training.max_size.setValue(64)
                win.training.init_points.setValue(500)
                win.training.eval_interval.setValue(0)
                open_and_start(app, win, write_scene(Path(tmp) / "ring"))
                if not spin(app, 300, lambda: steps_done(win) >= 25 or bool(win.errors)) or win.errors:
                    print(f"studio_event_loop: training did not start: {win.errors}", file=sys.stderr)
                    return 2
                windows = []
                for _ in range(2):
                    windows.append(measure_event_loop(app, win, seconds=args.seconds))
                    if windows[-1]["gap_max_ms"] <= args.max_gap_ms:
                        break
            finally:
                win.shutdown(save=False)
                win.close()
    finally:
        xvfb.stop()
    best = min(windows, key=lambda r: r["gap_max_ms"])
    res = {"bench": "studio_event_loop", "seconds": args.seconds, "max_gap_ms_bound": args.max_gap_ms,
           "windows": windows, "passed": best["gap_max_ms"] <= args.max_gap_ms}
    for k, r in enumerate(windows, 1):
        print(f"window {k}: {r['ticks']} ticks, gap median {r['gap_median_ms']:.1f} ms, p99 {r['gap_p99_ms']:.1f} ms, "
              f"max {r['gap_max_ms']:.1f} ms; steps {r['steps'][0]} -> {r['steps'][1]}, "
              f"frames {r['frames'][0]} -> {r['frames'][1]}", file=sys.stderr)
    text = json.dumps(res)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
