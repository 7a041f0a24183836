"""The `spirula` command (no Qt at import): `spirula train <dataset> -o <project>`,
`spirula --selftest` (spirula/engine/jobs/selftest.py), and `spirula` / `spirula gui [path]`, which
open the studio window its caller passes in (spirula/app/launch.py: the engine never imports the app)."""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from pathlib import Path

from ..errors import SpirulaError
from .options import OneLineParser, add_device_option, add_settings_options, train_config_of_args
from . import stopping


def _train_parser(sub) -> None:
    p = sub.add_parser("train", help="train 3D Gaussians on a COLMAP or transforms.json dataset")
    p.add_argument("dataset", type=Path, help="dataset folder (COLMAP sparse model + images, or transforms.json)")
    p.add_argument("-o", "--output", type=Path, required=True, help="project folder for splat.ply, metrics.json, eval/")
    add_settings_options(p, "train")  # the settings table's (spirula/engine/settings.py)
    add_device_option(p)
    p.add_argument("--resume", action="store_true",
                   help="continue from <output>/checkpoints/train.npz (or an older project's <output>/checkpoint.npz; "
                        "same dataset; same settings give the same result)")


def _progress_bar(total: int):
    from tqdm import tqdm

    bar = tqdm(total=total, unit="step", dynamic_ncols=True)

    def update(p) -> None:
        bar.update(p.step - bar.n)
        bar.set_postfix_str(f"loss {p.loss:.4f}  gaussians {p.num_gaussians:,}  {p.steps_per_sec:.1f} steps/s")

    return bar, update


def cmd_train(args) -> int:
    from ..fileio import check_writable
    from ..jobs.train import run_training

    check_writable(args.output)  # fail before loading anything
    if args.init_file:
        from ..io.formats import detect

        detect(args.init_file)  # a missing or unknown --init file fails here, not after the dataset is loaded
    from ..jobs.lock import project_lock

    stop = stopping.current()
    with project_lock(args.output, "spirula train", on_note=_note):
        cfg = train_config_of_args(args, "train")  # its preset note only once the project is ours (one line if not)
        bar, update = _progress_bar(cfg.train.steps)
        try:
            with stop.between_steps(bar.write):
                metrics = run_training(args.dataset, args.output, cfg, on_progress=update,
                                       on_message=lambda m: bar.write(m), should_stop=stop,
                                       resume="require" if args.resume else "never")
        finally:
            bar.close()
    if metrics["stopped_early"]:
        print(stopping.stopped_line(stop, metrics["step"], metrics.get("checkpoint"), metrics.get("checkpoint_step"),
                                    f"the model so far is in {args.output / 'splat.ply'}; rerun the same command "
                                    "with --resume to continue", "rerun the same command to start again"))
        return stop.exit_code
    return 0


def _note(text: str) -> None:
    print(text, file=sys.stderr)


def _gui_parser(sub) -> None:
    p = sub.add_parser("gui", help="open the studio window (also: `spirula` with no arguments)")
    p.add_argument("path", nargs="?", type=Path,
                   help="open this at start: a dataset folder (trains), a splat file (.ply .spz .sog .splat: views), "
                        "a video or photo folder")
    add_device_option(p, None)


def cmd_gui(args, open_window=None) -> int:
    """The studio window. The engine never imports Qt or the app: the window comes from the
    caller (``open_window(path, device) -> exit code``; spirula/app/launch.py, the `spirula` command's
    entry point, passes the PySide6 one); ``python -m spirula.engine.cli`` has none."""
    import os

    if open_window is None:
        print("error: this entry point has no studio window: run the `spirula` command "
              "(or `python -m spirula.app`) for it", file=sys.stderr)
        return 2
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                                                  or os.environ.get("QT_QPA_PLATFORM")):
        print("error: no display for the studio window ($DISPLAY / $WAYLAND_DISPLAY unset); "
              "use `spirula train` / `spirula run` headless, or run under Xvfb (xvfb-run spirula gui)", file=sys.stderr)
        return 2
    return open_window(getattr(args, "path", None), getattr(args, "device", None))


def _hoist_profile_options(argv: list[str]) -> list[str]:
    """Accept --profile / --profile-json FILE anywhere on the line (they are global)."""
    front, rest, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest += argv[i:]
            break
        if a == "--profile" or a.startswith("--profile-json="):
            front.append(a)
        elif a == "--profile-json" and i + 1 < len(argv):
            front += argv[i:i + 2]
            i += 1
        else:
            rest.append(a)
        i += 1
    return front + rest


def build_parser() -> argparse.ArgumentParser:
    """The `spirula` argument parser with every subcommand."""
    from .run_command import add_parser as _run_parser
    from .clean_command import add_parser as _clean_parser
    from .mesh_command import add_parser as _mesh_parser
    from .partition_command import add_parser as _partition_parser
    from ..io.export_command import add_parser as _export_parser
    from .bench.commands import add_parser as _bench_parser
    from .render_command import add_parser as _render_parser

    parser = OneLineParser(prog="spirula", description="Spirula Studio: 3D Gaussian Splatting on any GPU")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every engine detail (debug level)")
    parser.add_argument("--profile", action="store_true",
                        help="profile (same as SPIRULA_PROFILE=1): timing, GPU time per kernel and VRAM on stderr at exit")
    parser.add_argument("--profile-json", metavar="FILE", type=Path, help="profile and write the report as JSON to FILE")
    parser.add_argument("--selftest", action="store_true",
                        help="check this installation: create the GPU device, train a few hundred steps on the "
                             "embedded sample, render, export a PLY; prints PASS or FAIL with the reason "
                             "(exit code 0 / 1; the backend follows $SPIRULA_DEVICE, default vulkan)")
    sub = parser.add_subparsers(dest="command")
    _train_parser(sub)
    _run_parser(sub)
    _bench_parser(sub)
    _mesh_parser(sub)
    _partition_parser(sub)
    _export_parser(sub)
    _render_parser(sub)
    _clean_parser(sub)
    _gui_parser(sub)
    return parser


def main(argv: list[str] | None = None, open_window=None) -> int:
    """The `spirula` command; ``open_window(path, device)`` opens the studio (see :func:`cmd_gui`)."""
    from .run_command import run as cmd_run
    from .clean_command import run as cmd_clean
    from .mesh_command import cmd_mesh
    from .partition_command import run as cmd_partition
    from ..io.export_command import cmd_export
    from .bench.commands import run as cmd_bench
    from .render_command import cmd_render

    parser = build_parser()
    args = parser.parse_args(_hoist_profile_options(list(sys.argv[1:] if argv is None else argv)))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.ERROR, format="%(levelname)s %(message)s")
    if args.profile or args.profile_json:
        from .. import profile

        profile.enable(text=args.profile, json_path=args.profile_json)
    if args.selftest:
        from ..jobs.selftest import main as selftest

        return selftest(verbose=args.verbose)
    if args.command is None:  # `spirula` alone opens the studio
        return cmd_gui(args, open_window)
    command = {"train": cmd_train, "bench": cmd_bench, "run": cmd_run, "mesh": cmd_mesh, "export": cmd_export,
               "render": cmd_render, "partition": cmd_partition, "clean": cmd_clean, "gui": lambda a: cmd_gui(a, open_window)}[args.command]
    if args.command == "gui":  # the window has its own event loop (and Cancel)
        return _dispatch(args, command, stopping.StopRequest())
    with stopping.handle_signals() as stop:  # Ctrl-C and SIGTERM: spirula/engine/cli/stopping.py
        return _dispatch(args, command, stop)


def _dispatch(args, command, stop) -> int:
    from ..fileio import is_refused_write

    try:
        return command(args)
    except SpirulaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"stopped ({stop.name}): spirula {args.command} interrupted; the outputs finished before are kept",
              file=sys.stderr)
        return stop.exit_code
    except Exception as e:  # a bug: one clear line, the traceback with -v (earlier stages' results stay)
        if is_refused_write(e):  # the file system's refusal, not a bug
            print(f"error: {refused_write_line(args.command, e)}", file=sys.stderr)
            return 1
        if args.verbose:
            raise
        print(f"error: spirula {args.command} failed unexpectedly: {type(e).__name__}: {e} (a bug: `spirula -v "
              f"{args.command} ...` shows where; results of finished stages are kept)", file=sys.stderr)
        return 1


def refused_write_line(command: str, e: OSError) -> str:
    """One line for an OSError of a refused write that no writer named (full disk,
    read-only, permission): the path and the reason."""
    reason = (e.strerror or str(e))
    reason = reason[:1].lower() + reason[1:]
    path = e.filename2 if getattr(e, "filename2", None) else e.filename
    if path is not None:  # a writer's temporary (".NAME.XXXXXXXX.tmp"): name the file it was for
        import re

        m = re.fullmatch(r"\.(.+)\.[a-z0-9_]{8}\.tmp", Path(path).name)
        path = Path(path).with_name(m.group(1)) if m else path
    if path is None:
        return f"spirula {command} could not write its outputs: {reason} (the outputs finished before are kept)"
    verb = "access" if e.errno in (errno.EACCES, errno.EPERM) else "write"
    return f"cannot {verb} {path}: {reason} (spirula {command}; the outputs finished before are kept)"


if __name__ == "__main__":
    sys.exit(main())
