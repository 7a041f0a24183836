"""Command-line options shared by the `spirula` subcommands, and the argparse types that
refuse a bad number with a one-line message (``spirula train: error: argument --steps:
must be a whole number >= 1, not '0'``, exit code 2) before any work starts."""

from __future__ import annotations

import argparse
import math
import sys

from ..config import (APPEARANCES, MCMC_MIN_STEPS, MCMC_MIN_STEPS_RANDOM, PRESETS, RANDOM_INITS, STRATEGIES,
                      DatasetConfig, TrainConfig, preset_settings)
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


# longer image sides: 0 keeps the size, else at least this many pixels
MIN_IMAGE_SIDE = 8
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


def add_density_options(p, t: TrainConfig) -> None:
    """--strategy, --max-gaussians, --init-random, --antialias (spirula train and spirula run)."""
    p.add_argument("--strategy", choices=STRATEGIES, default=t.strategy,
                   help="densification: adc (3DGS clone/split/prune), mcmc (relocation, an exact Gaussian "
                        "budget; Kheradmand et al. 2024) or auto (mcmc when the run has at least "
                        f"{MCMC_MIN_STEPS} steps on SfM points or {MCMC_MIN_STEPS_RANDOM} from random points, else adc: "
                        "mcmc grows slowly from its small initial splats). "
                        f"Default {t.strategy}")
    p.add_argument("--max-gaussians", type=int_at_least(1), default=None,
                   help=f"adc: the cap densification stops at (default {t.max_gaussians:,}); mcmc: the exact "
                        f"number of Gaussians it grows to (default {t.mcmc_budget:,}); auto: whichever applies")
    p.add_argument("--init-random", choices=RANDOM_INITS, default=t.init_random,
                   help="without SfM points: random points where the training cameras look (views) or in "
                        f"gsplat's cube (box). Default {t.init_random}")
    p.add_argument("--antialias", action="store_true", default=t.antialias,
                   help="anti-aliased training (Mip-Splatting: a 3D smoothing filter from the training cameras' "
                        "sampling rates and the 2D Mip filter); the exported PLY has the 3D filter baked in")


def fraction(text: str) -> float:
    """argparse type: a number in (0, 1]."""
    value = float_range(0.0, inclusive=False)(text)
    if value > 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], not {text!r}")
    return value


def start_fraction(text: str) -> float:
    """argparse type: a number in [0, 1) (a phase starting at 1 would never run)."""
    value = float_range(0.0)(text)
    if value >= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1) (at 1 the phase never starts), not {text!r}")
    return value


def on_off(text: str) -> bool:
    """argparse type: "on" -> True, "off" -> False."""
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"must be on or off, not {text!r}")
    return text == "on"


def add_resolution_options(p, t: TrainConfig) -> None:
    """--res-levels, --res-until: the coarse-to-fine schedule (engine/splat/res_schedule.py)."""
    p.add_argument("--res-levels", type=int_at_least(1), default=t.res_levels, metavar="K",
                   help="coarse-to-fine training: the first steps see the images at 1/2, 1/4, ... of their size "
                        f"(K levels; 1 = always full size). Default {t.res_levels}")
    p.add_argument("--res-until", type=fraction, default=t.res_until, metavar="F",
                   help=f"with --res-levels > 1: full size from this fraction of the steps on (default {t.res_until:g})")


def preset_train_settings(args) -> dict:
    """TrainConfig fields of ``--preset`` with ``--steps`` when given (an option given beside
    a preset wins); always has ``steps``."""
    out = preset_settings(args.preset)
    out["steps"] = args.steps if args.steps is not None else out.get("steps", TrainConfig.steps)
    return out


def resolution_settings(args) -> dict:
    """TrainConfig fields of :func:`add_resolution_options`."""
    return {"res_levels": args.res_levels, "res_until": args.res_until}


def add_training_options(p, d: DatasetConfig, t: TrainConfig, checkpoint_help: str,
                         appearance_by_input: bool = False, geometry_with_mesh: bool = False) -> None:
    """The training settings of `spirula train` and `spirula run` (TrainConfig, DatasetConfig);
    ``appearance_by_input``: --appearance defaults by the input kind (spirula run);
    ``geometry_with_mesh``: the geometry phase is on when a mesh stage follows (spirula run)."""
    fast = PRESETS["fast"]["steps"]
    p.add_argument("--preset", choices=list(PRESETS), default="default",
                   help=f"a named set of training settings (engine/config.py PRESETS): default, or fast ({fast:,} "
                        "steps, MCMC's refine ending at 0.8 of them: time to quality); options given beside it win")
    p.add_argument("--steps", type=int_at_least(1), default=None,
                   help=f"training steps (default {t.steps:,}; {fast:,} with --preset fast)")
    p.add_argument("--max-size", type=image_side, default=d.max_size,
                   help=f"longer training image side in px, 0 = as stored (default {d.max_size})")
    p.add_argument("--eval-every", type=int_at_least(0), default=d.eval_every,
                   help=f"hold out every k-th image by name for evaluation, 0 = none (default {d.eval_every}); "
                        "when that would hold out every image, all train and none is held out")
    p.add_argument("--eval-interval", type=int_at_least(0), default=t.eval_interval,
                   help="evaluate the held-out images every k steps (default 0 = at the end only)")
    p.add_argument("--sh-degree", type=int, default=t.sh_degree, choices=range(4),
                   help=f"max spherical-harmonics degree of the colours (default {t.sh_degree})")
    p.add_argument("--seed", type=int_at_least(0), default=t.seed,
                   help=f"random seed of the initial points and the image order (default {t.seed})")
    add_density_options(p, t)
    add_resolution_options(p, t)
    add_appearance_option(p, t, by_input=appearance_by_input)
    p.add_argument("--adam-moments", choices=["fp32", "bf16"], default=t.adam_moments,
                   help="Adam moments in float32 or bfloat16 (half their memory; for very large models). "
                        f"Default {t.adam_moments}")
    p.add_argument("--init-points", type=int_at_least(1), default=t.init_random_points,
                   help=f"random initial points when the dataset has none (default {t.init_random_points:,})")
    p.add_argument("--checkpoint-every", type=int_at_least(0), default=t.checkpoint_every, metavar="K",
                   help=checkpoint_help)
    add_geometry_options(p, t, with_mesh=geometry_with_mesh)
    add_device_option(p)


def add_geometry_options(p, t: TrainConfig, with_mesh: bool = False) -> None:
    """--geometry, --geometry-from, --lambda-normal, --lambda-flat, --geometry-alpha-grad: the geometry phase
    (engine/splat/geometry.py). ``with_mesh`` (spirula run): on unless --no-geometry or --no-mesh."""
    what = ("the geometry phase (from --geometry-from of the steps on): flattened Gaussians and depth-normal "
            "consistency, for splats whose depth a mesh can be made from (2DGS / PGSR)")
    # default None: neither flag given (spirula run: on when the mesh stage runs; spirula train: off)
    g = p.add_mutually_exclusive_group()
    if with_mesh:
        g.add_argument("--geometry", dest="geometry", action="store_true", default=None,
                       help=f"{what}; on by default when the mesh stage runs (not with --no-mesh or an --until "
                            "before mesh; turning it on or off later trains again)")
        g.add_argument("--no-geometry", dest="geometry", action="store_false", default=None,
                       help="train without the geometry phase (default: with it when the mesh stage runs)")
    else:
        g.add_argument("--geometry", dest="geometry", action="store_true", default=None,
                       help=f"{what}; off by default in `spirula train` (`spirula run` turns it on for its mesh; "
                            "at 7k steps and 1000 px it changed held-out PSNR by +0.06 dB on office_chair and "
                            "+0.59 on mouse, BENCHMARKS.md)")
        g.add_argument("--no-geometry", dest="geometry", action="store_false", default=None,
                       help="train without the geometry phase (the default in `spirula train`; `spirula run` "
                            "has the same flag)")
    # default None: given without --geometry they are refused (geometry_settings), not ignored
    p.add_argument("--geometry-from", type=start_fraction, default=None, metavar="F",
                   help=f"with --geometry: the phase starts at this fraction of the steps (default {t.geometry_from:g})")
    p.add_argument("--lambda-normal", type=float_range(0.0), default=None, metavar="W",
                   help=f"with --geometry: depth-normal consistency weight (default {t.lambda_normal:g})")
    p.add_argument("--lambda-multiview", type=float_range(0.0), default=None, metavar="W",
                   help="with --geometry: multi-view geometric consistency weight (PGSR's term: each step also "
                        "renders a neighbouring view's depth and penalises the forward-backward reprojection "
                        f"error; PGSR uses 0.03), 0 = off (default {t.lambda_multiview:g})")
    p.add_argument("--lambda-mvrgb", type=float_range(0.0), default=None, metavar="W",
                   help="with --geometry: multi-view photometric consistency weight (PGSR's term: 7x7 patches of "
                        "the training image warped by the rendered plane into a neighbouring view's training "
                        f"image, 1 - NCC; no extra render; PGSR uses 0.2), 0 = off (default {t.lambda_mvrgb:g})")
    p.add_argument("--lambda-flat", type=float_range(0.0), default=None, metavar="W",
                   help=f"with --geometry: flattening (shortest scale) weight, 0 = none (default {t.lambda_flat:g})")
    p.add_argument("--geometry-alpha-grad", type=on_off, default=None, metavar="on|off",
                   help="with --geometry: whether the depth-normal loss also changes the splats' opacities and "
                        "footprints (on), or only turns and moves them (off) (default "
                        f"{'on' if t.geometry_alpha_grad else 'off'})")


GEOMETRY_TUNING = (("geometry_from", "--geometry-from"), ("lambda_normal", "--lambda-normal"),
                   ("lambda_multiview", "--lambda-multiview"), ("lambda_mvrgb", "--lambda-mvrgb"),
                   ("lambda_flat", "--lambda-flat"), ("geometry_alpha_grad", "--geometry-alpha-grad"))


def geometry_settings(args, mesh_follows: bool = False, command: str = "spirula train") -> dict:
    """TrainConfig fields of :func:`add_geometry_options`; with neither --geometry nor
    --no-geometry (spirula run) the phase is on when ``mesh_follows``. Exits with code 2 (as
    argparse does) when a setting of the phase is given while it is off: it would do nothing."""
    given = [flag for field, flag in GEOMETRY_TUNING if getattr(args, field) is not None]
    on = args.geometry if args.geometry is not None else mesh_follows
    if given and not on:
        why = ("--no-geometry" if args.geometry is False else
               "no mesh stage follows" if command == "spirula run" else f"off by default in {command}")
        print(f"{command}: error: {', '.join(given)} {'needs' if len(given) == 1 else 'need'} the geometry phase, "
              f"which is off ({why}): add --geometry", file=sys.stderr)
        raise SystemExit(2)
    out = {"geometry": bool(on)}
    out.update({field: getattr(args, field) for field, _ in GEOMETRY_TUNING if getattr(args, field) is not None})
    return out


def add_appearance_option(p, t: TrainConfig, by_input: bool = False) -> None:
    """--appearance (spirula train; spirula run with ``by_input``: no default, the input
    kind decides, engine/config.py default_appearance)."""
    default = "exposure for a video input, off otherwise" if by_input else t.appearance
    p.add_argument("--appearance", choices=APPEARANCES, default=None if by_input else t.appearance,
                   help="per-image colour learned beside the splats, so exposure / white-balance changes between "
                        "images are not baked into them: exposure (a gain per colour channel and image), affine "
                        "(a 3x4 colour matrix per image) or bilagrid (a bilateral grid per image, Wang et al. 2024); "
                        f"held-out views use none. Default {default}")
