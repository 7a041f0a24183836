#!/usr/bin/env python3
"""Screenshots of the studio window for docs/screenshots/, one per screen, on the embedded
fox sample, as a user goes through them:

    studio-empty.png      nothing open: the viewport's drop target and the recent projects (the fox
                          sample opened before, as a returning user sees it)
    studio-drag.png       a dataset dragged over the viewport: the overlay says what the drop will do
    studio-review.png     the dataset opened for review (cameras, thumbnails, split, settings)
    studio-bounds.png     the mesh bounds box (Export panel) drawn in the viewport, with its face handles
    studio.png            training, live (Training panel)
    studio-profiler.png   training, the Profiler panel
    studio-done.png       training finished
    studio-error.png      a held-out camera's error view
    studio-mesh.png       the textured mesh made from the Export panel, in the viewport, beside the
                          Export panel's list of what was saved (a PLY export and the mesh's files)

Runs on a private Xvfb display unless --display is given, so the picture is the real window
with its viewport as a user sees it (software Vulkan works: there the window shows the frames
the engine read back, spirula/app/image_view.py).

    .venv/bin/python scripts/screenshots.py [--steps 600] [--at 250] [--out docs/screenshots]
                                            [--until bounds]   (the screens before training only)
                                            [--mesh-from PROJECT] (only the mesh screen, meshed in the
                                                                   Export panel from a trained project)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str(REPO / "resources" / "sample" / "fox"))
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--at", type=int, default=250, help="step of the during-training screenshots")
    ap.add_argument("--max-size", type=int, default=240)
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    ap.add_argument("--display", action="store_true", help="use $DISPLAY instead of a private Xvfb")
    ap.add_argument("--size", default="1440x900")
    ap.add_argument("--no-mesh", action="store_true", help="skip the mesh screen")
    ap.add_argument("--until", choices=["bounds"], help="stop after this screen (no training)")
    ap.add_argument("--mesh-from", type=Path, metavar="PROJECT",
                    help="only studio-mesh.png: open PROJECT's splat.ply and make its mesh from the Export panel")
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))

    xvfb = None
    if not args.display:
        from spirula.app.headless import Xvfb

        xvfb = Xvfb(width + 40, height + 40).start()
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    from PySide6 import QtCore

    from spirula.app.startup import create_studio
    from spirula.engine.studio import protocol as M

    args.out.mkdir(parents=True, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="spirula-shots-")
    for fmt in (QtCore.QSettings.Format.NativeFormat, QtCore.QSettings.Format.IniFormat):
        QtCore.QSettings.setPath(fmt, QtCore.QSettings.Scope.UserScope, scratch)  # a first launch's memory
    from spirula.app import remembered

    remembered.add_recent(args.dataset)  # the empty window's recent projects: the fox opened before
    app, win, session = create_studio(None, dialogs=False, projects=Path(scratch) / "projects", splash=False,
                                      size=(width, height))
    win.move(0, 0)

    def spin(seconds: float, until=None) -> bool:
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 20)
            if until is not None and until():
                return True
            time.sleep(0.005)
        return until is None

    def step() -> int:
        return max((m.step for m in win.messages if isinstance(m, M.TrainMetrics)), default=0)

    def grab(name: str) -> None:
        spin(1.5)  # let the next frames present
        g = win.frameGeometry()
        shot = app.primaryScreen().grabWindow(0, g.x(), g.y(), g.width(), g.height())
        path = args.out / name
        shot.save(str(path))
        print(f"wrote {path} ({shot.width()}x{shot.height()}), viewport: "
              f"{win.viewer_mode.mode if win.viewer_mode else '?'}")

    def failed(what: str) -> int:
        print(f"{what}; errors: {win.errors}", file=sys.stderr)
        win.shutdown(save=False)
        return 1

    def close() -> int:
        win.shutdown(save=False)
        win.close()
        if xvfb is not None:
            xvfb.stop()
        return 0

    def mesh_screen() -> int:
        win.docks["Export"].raise_()
        win.export.mesh_btn.click()
        if not spin(1800, lambda: any(isinstance(m, M.MeshExported) for m in win.messages) or win.errors):
            return failed("the mesh was not made")
        if not spin(120, lambda: win.scene is not None and win.scene.kind == "mesh"):
            return failed("the mesh did not open in the viewport")
        win.controller.reset()
        grab("studio-mesh.png")
        return 0

    if args.mesh_from is not None:
        win.open_paths([str(args.mesh_from / "splat.ply")])
        if not spin(300, lambda: (win.scene is not None and win.scene.kind == "ply") or win.errors):
            return failed(f"{args.mesh_from / 'splat.ply'} did not open")
        return mesh_screen() or close()

    # the empty window: its viewport's drop target and recent projects; then the overlay a drag
    # of the dataset over the viewport shows (what the README's step 1 says)
    from spirula.app.drops import classify_many, describe_many

    if not spin(10, lambda: win.start_page.isVisible()):
        return failed("the empty window's start page is not shown")
    grab("studio-empty.png")
    win.drops.overlay.show_over(win.viewport, describe_many(classify_many([args.dataset])), True)
    grab("studio-drag.png")
    win.drops.overlay.hide()
    win.training.steps.setValue(args.steps)
    win.training.max_size.setValue(args.max_size)
    win.training.eval_interval.setValue(max(args.steps // 4, 1))
    win.profiler.enable.setChecked(True)  # per-kernel timestamps for the profiler screen
    win.open_paths([args.dataset])
    if not spin(300, lambda: (win.scene is not None and win.scene.kind == "review") or win.errors):
        return failed("the dataset did not open for review")
    grab("studio-review.png")
    win.docks["Export"].raise_()
    win.export.bounds_group.setChecked(True)   # around the scene; pulled in a little, as a user crops
    spins = win.export.bound_spins
    for k in range(3):
        lo, hi = spins[k].value(), spins[k + 3].value()
        spins[k].setValue(lo + 0.2 * (hi - lo))
        spins[k + 3].setValue(hi - 0.2 * (hi - lo))
    grab("studio-bounds.png")
    win.export.bounds_group.setChecked(False)
    win.docks["Dataset"].raise_()
    if args.until == "bounds":
        return close()
    win.dataset.start_btn.click()
    if not spin(900, lambda: step() >= args.at or win.errors) or win.errors:
        return failed("training did not reach the screenshot step")
    win.docks["Training"].raise_()
    grab("studio.png")
    win.docks["Profiler"].raise_()
    spin(3.0)
    grab("studio-profiler.png")
    spin(3600, lambda: any(isinstance(m, M.Done) for m in win.messages))
    win.docks["Training"].raise_()
    grab("studio-done.png")
    exported = Path(win.scene.project) / "exports" / "fox.ply"   # a PLY export, listed in the Export panel
    session.send(M.ExportPly(str(exported), "ply"))
    if not spin(300, lambda: any(isinstance(m, M.Saved) and m.path.endswith("fox.ply") for m in win.messages) or win.errors):
        return failed("the PLY export did not finish")
    win.controller.look_through_camera(next(i for i, c in enumerate(win.scene.cameras) if c.split == "test"))
    win.set_view_mode("error")
    win.docks["Dataset"].raise_()
    grab("studio-error.png")
    win.set_view_mode("splats")
    if not args.no_mesh and mesh_screen():
        return 1
    return close()


if __name__ == "__main__":
    sys.exit(main())
