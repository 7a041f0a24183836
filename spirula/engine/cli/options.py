"""Command-line options shared by the `spirula` subcommands, and the argparse types that
refuse a bad number with a one-line message (``spirula train: error: argument --steps:
must be a whole number >= 1, not '0'``, exit code 2) before any work starts."""

from __future__ import annotations

import argparse
import math
import os
import sys

from .. import settings as table
from ..settings import MIN_IMAGE_SIDE, PRESETS
from ..errors import CPU_REFUSAL

BACKEND_CHOICES = ("vulkan", "cuda")



def int_at_least(minimum: int, zero_means: str | None = None):
    """argparse type: a whole number >= ``minimum`` (or 0 when ``zero_means`` names what
    0 stands for, e.g. "as stored")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
        if value >= minimum or (zero_means and value == 0):
            return value
        also = f" (or 0 = {zero_means})" if zero_means else ""
        raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}{also}, not {text!r}")

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def float_range(minimum: float, *, inclusive: bool = True):
    """argparse type: a finite number >= ``minimum`` (> when not ``inclusive``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
        ok = math.isfinite(value) and (value >= minimum if inclusive else value > minimum)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be a finite number {'>=' if inclusive else '>'} {minimum:g}, "
                                             f"not {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def finite_float(text: str) -> float:
    """argparse type: any finite number (NaN and Inf refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def backend(text: str) -> str:
    """argparse type of --device: vulkan or cuda; cpu is refused with the reason."""
    value = text.strip().lower()
    if value == "cpu":
        raise argparse.ArgumentTypeError(CPU_REFUSAL)
    if value not in BACKEND_CHOICES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(BACKEND_CHOICES)}, not {text!r}")
    return value


def add_device_option(p, default: str | None = "vulkan", help: str | None = None) -> None:
    """--device vulkan|cuda (``cpu`` refused with the reason, see :data:`CPU_REFUSAL`)."""
    p.add_argument("--device", type=backend, default=default, metavar="{vulkan,cuda}",
                   help=help or "GPU backend: vulkan (any GPU, or software Vulkan without one) or cuda (NVIDIA); "
                                "default vulkan")


# longer image sides: 0 keeps the size, else at least this many pixels (MIN_IMAGE_SIDE)
image_side = int_at_least(MIN_IMAGE_SIDE, zero_means="as stored")


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the reason and where the help is),
    not argparse's usage block first; its subcommands' parsers are of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows '(default: X)' only where there is a default to show: not for required
    options, flags, options whose default is None or empty (absent), or whose help
    already gives it."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or default is None or default is False or default == ""
                or default is argparse.SUPPRESS or action.required or not action.option_strings):
            return text
        return text + " (default: %(default)s)"


# --- the training settings: one option per setting of the table (spirula/engine/settings.py) -------------

def _arg_type(s: table.Setting):
    """argparse type of setting ``s``: its own check, with the reason as argparse's message."""

    def parse(text: str):
        try:
            return s.parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = {int: "integer", float: "number", bool: "on|off"}.get(s.type, "value")
    return parse


def _default_text(s: table.Setting, command: str) -> str:
    """The default of ``s`` as --help says it, with the presets' values and the defaults by context."""
    if s.name == "appearance":
        base = "exposure for a video input, off otherwise" if command == "run" else s.text(s.default)
    elif s.name == "geometry":
        base = "on when the mesh stage runs" if command == "run" else "off"
    elif s.name == "init_file":
        return ""
    elif s.type is int:
        base = f"{s.default:,}"
    elif s.type is float:
        base = f"{s.default:g}"
    else:
        base = s.text(s.default)
    by_preset = [f"{s.text(v) if s.type not in (int, float) else format(v, ',' if s.type is int else 'g')} with "
                 f"--preset {name}" for name, over in PRESETS.items() for k, v in over.items()
                if k == s.name and v != s.default]  # a preset that keeps the default changes nothing
    return " (default " + "; ".join([base, *by_preset]) + ")"


# switches (--x / --no-x) rather than a value on|off
SWITCHES = ("antialias", "geometry")


def add_settings_options(p, command: str, basic_group=None, exclude: tuple = ()) -> None:
    """One option per setting of the table (spirula/engine/settings.py) for ``command`` ("train",
    "run" or "partition"): the basic group into ``basic_group`` (default ``p``), the others
    into an "advanced training settings" group, and --preset. Every default is None (unset):
    :func:`settings_of_args` gives what was set, spirula/engine/settings.py resolve the rest."""
    g = basic_group if basic_group is not None else p
    names = ", ".join(f"{k} ({', '.join(f'{n}={v}' for n, v in over.items())})" for k, over in PRESETS.items() if over)
    g.add_argument("--preset", choices=list(PRESETS), default=None,
                   help=f"a named set of training settings (spirula/engine/settings.py PRESETS): default, {names}; options "
                        "given beside it win. Default: software on a software Vulkan device (no GPU), else default")
    adv = p.add_argument_group("advanced training settings", "(spirula/engine/settings.py; the studio's All options)")
    for s in table.SETTINGS:
        if s.name in exclude or (s.name in table.RECONSTRUCTION_ONLY and command != "run"):
            continue  # a dataset's cameras say what a reconstruction-only setting would
        into = g if s.group == "basic" else adv
        text = (s.help + _default_text(s, command)).replace("%", "%%")
        if s.name in SWITCHES:
            m = into.add_mutually_exclusive_group()
            m.add_argument(s.option, dest=s.name, action="store_true", default=None, help=text)
            m.add_argument("--no-" + s.option[2:], dest=s.name, action="store_false", default=None,
                           help=f"without {s.option} (its default: {_default_text(s, command)[10:-1]})")
        elif s.type is tuple:
            into.add_argument(s.option, dest=s.name, type=float, nargs=3, default=None, metavar=("R", "G", "B"),
                              help=text)
        elif s.choices and s.type is str:
            into.add_argument(s.option, dest=s.name, choices=s.choices, default=None, help=text)
        elif s.choices:
            into.add_argument(s.option, dest=s.name, type=s.type, choices=s.choices, default=None, help=text)
        else:
            into.add_argument(s.option, dest=s.name, type=_arg_type(s), default=None,
                              metavar=s.metavar or {bool: "on|off", int: "N", float: "X"}.get(s.type), help=text)


def settings_of_args(args, exclude: tuple = ()) -> dict:
    """The settings the command line set (name -> value; unset ones left out)."""
    out = {}
    for s in table.SETTINGS:
        v = getattr(args, s.name, None) if s.name not in exclude else None
        if v is not None:
            out[s.name] = tuple(v) if s.type is tuple else v
    return out


def check_needs(given: dict, resolved: dict, command: str, why_off: str) -> None:
    """Exit with code 2 (as argparse does) when a setting is given whose ``needs`` setting is
    off: it would do nothing. ``why_off``: why that one is off when the user did not say."""
    for need in sorted({s.needs for s in table.SETTINGS if s.needs}):
        flags = [table.BY_NAME[k].option for k in given if table.BY_NAME[k].needs == need]
        if flags and not resolved[need]:
            opt = table.BY_NAME[need].option
            why = f"--no-{opt[2:]}" if given.get(need) is False else why_off
            print(f"{command}: error: {', '.join(flags)} {'needs' if len(flags) == 1 else 'need'} the {need} phase, "
                  f"which is off ({why}): add {opt}", file=sys.stderr)
            raise SystemExit(2)


def choose_preset(args, is_software, say=None, given: dict | None = None) -> str:
    """The preset of a command: --preset when given, else $SPIRULA_PRESET, else ``software``
    when ``is_software()`` (a software Vulkan device: every kernel on the CPU), said in one
    line through ``say`` (default: stderr) with the steps, size and random points that apply
    (``given``: the settings the command line set, which win over the preset's), else
    ``default``."""
    if getattr(args, "preset", None):
        return args.preset
    env = os.environ.get("SPIRULA_PRESET", "").strip()
    if env:
        table.preset_settings(env)  # an unknown name fails here
        return env
    if is_software():
        sw = {**PRESETS["software"], **(given or {})}
        size = f"{sw['max_size']} px" if sw["max_size"] else "the images' stored size"
        (say or (lambda t: print(t, file=sys.stderr)))(
            f"note: software Vulkan device (no GPU): the software preset, {sw['steps']:,} steps at {size}, "
            f"{sw['init_random_points']:,} random points without SfM points (options given win; --preset default "
            f"for the full {table.BY_NAME['steps'].default:,}-step schedule)")
        return "software"
    return "default"


def software_device(backend: str):
    """A callable: whether ``backend``'s device is a software one (the device is made once,
    spirula/engine/device.py get_gpu; a device that cannot be made counts as not software, and its
    error comes where the run makes it)."""

    def check() -> bool:
        from ..device import get_gpu
        from ..errors import SpirulaError

        try:
            return bool(get_gpu(backend).software)
        except (SpirulaError, RuntimeError):
            return False

    return check


def train_config_of_args(args, command: str, input_kind: str = "dataset", mesh_follows: bool = False,
                         why_off: str = "", exclude: tuple = (), fixed: dict | None = None):
    """The RunConfig of a command line's training settings (``command``: "train", "run" or
    "partition"): what it set, the preset's overlay on the rest (:func:`choose_preset`: on a
    software device the ``software`` preset, with a note), the defaults by context; ``fixed``:
    settings the command decides itself. Exits with code 2 for a setting that would do nothing."""
    from ..config import run_config

    given = settings_of_args(args, exclude)
    preset = choose_preset(args, software_device(args.device), given=given)
    cfg = run_config({**given, **(fixed or {})}, device=args.device, preset=preset, input_kind=input_kind,
                     mesh_follows=mesh_follows)
    check_needs(given, {**vars(cfg.dataset), **vars(cfg.train)}, f"spirula {command}",
                why_off or f"off by default in spirula {command}")
    return cfg
