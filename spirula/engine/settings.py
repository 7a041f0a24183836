"""The settings table: every setting of the dataset and training stages declared once, with
its name, type, default, range, help, group (``basic``: the studio's Training panel;
``advanced``: its "All options" editor and the CLI's advanced group), the stages it affects
and whether changing it trains again.

Everything else is derived from :data:`SETTINGS`:

- ``DatasetConfig`` and ``TrainConfig`` (spirula/engine/config.py), their fields in this order;
- the training options of ``spirula train``, ``spirula run`` and ``spirula partition train``
  and their ``--help`` (spirula/engine/cli/options.py :func:`add_settings_options`);
- the studio's StartTraining / StartPipeline fields (spirula/engine/studio/protocol.py) and the
  "All options" editor (spirula/app/settings_editor.py);
- the saved settings of a project (train.json's "config", run.json's) and what Resume /
  Restart restore from them (:func:`from_saved`).

A value the user set is never overridden: a preset (:data:`PRESETS`, named overlays) and the
defaults by context (per-image appearance by input kind, the geometry phase when a mesh
follows) apply only to the settings left unset (None). :func:`resolve` is the one place
that turns what was set into the run's configs; ``--max-gaussians``' meaning (ADC's cap or
MCMC's budget) is derived there, in :func:`density`, and nowhere else.

Units: sizes in px, step counts in steps, fractions of the run's steps in [0, 1], learning
rates per step (``lr_means`` x the scene extent), lengths x the scene extent unless a
setting says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

STRATEGIES = ("auto", "adc", "mcmc")  # resolve_strategy (spirula/engine/config.py)
RANDOM_INITS = ("views", "box")       # spirula/engine/splat/init.py
APPEARANCES = ("off", "exposure", "affine", "bilagrid")  # spirula/engine/splat/appearance.py
MASK_MODES = ("auto", "cutout", "ignore", "off")  # spirula/engine/ingest/masks.py
WIDE_LENS_MODES = ("faces", "crop")   # spirula/engine/ingest/faces.py, spirula/engine/ingest/load.py
PROJECTIONS = ("auto", "equirect", "perspective")  # spirula/engine/jobs/stages.py equirect_frames
# settings only a reconstruction reads (a video or photo folder before SfM): not options of
# `spirula train` / `partition train`, whose dataset's cameras say it themselves
RECONSTRUCTION_ONLY = ("projection",)
MCMC_MIN_STEPS = 500                  # "auto" picks MCMC from this many steps on SfM points (resolve_strategy)
MCMC_MIN_STEPS_RANDOM = 7_000         # ... and from this many from random points
MIN_IMAGE_SIDE = 8                    # max_size: 0 keeps the stored size, else at least this many px
TRAIN_STAGES = ("train", "export", "mesh")   # a training setting changes these `spirula run` stages


@dataclass(frozen=True)
class Setting:
    """One setting. ``low``/``high``: the allowed range (``open_low``/``open_high``: the bound
    itself excluded); ``zero``: what 0 stands for when 0 lies below ``low``; ``choices``: the
    allowed values; ``needs``: a bool setting that must be on for this one to do anything;
    ``stages``: the `spirula run` stages a change redoes; ``retrains`` / ``resume``: what a
    changed value does to a finished training (spirula/engine/jobs/pipeline.py) and to a resumed one
    (spirula/engine/checkpoint.py compare)."""

    name: str                 # the field of DatasetConfig / TrainConfig
    section: str              # "dataset" or "train"
    type: type                # int, float, str, bool or tuple (3 floats)
    default: Any
    help: str
    group: str = "advanced"   # "basic" or "advanced"
    label: str = ""           # the studio's label ("" = from the name)
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    zero: str = ""
    stages: tuple = TRAIN_STAGES
    retrains: bool = True     # a changed value trains again (`spirula run`'s train stage key)
    resume: str = "changes"   # a checkpoint resumed with another value: "changes" the run from there
                              # (said), "blocking" (the state cannot be used), "neutral" (nothing to say)
    flag: str = ""            # the CLI option ("" = --name-with-dashes)
    metavar: str = ""
    needs: str = ""

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-").lower()

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ").capitalize()

    def check(self, value):
        """``value`` as this setting's type, or ValueError saying why not (a one-line
        reason, e.g. "must be a whole number >= 1, not 0")."""
        if self.type is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("on", "true", "1", "off", "false", "0"):
                return value.lower() in ("on", "true", "1")
            raise ValueError(f"must be on or off, not {value!r}")
        if self.type is tuple:
            try:
                out = tuple(float(v) for v in value)
            except (TypeError, ValueError):
                raise ValueError(f"must be 3 numbers, not {value!r}") from None
            if len(out) != 3 or not all(math.isfinite(v) for v in out):
                raise ValueError(f"must be 3 finite numbers, not {value!r}")
            return out
        if self.type is str:
            if not isinstance(value, str):
                raise ValueError(f"must be text, not {value!r}")
            if self.choices and value not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}, not {value!r}")
            return value
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ValueError(f"must be a whole number, not {value!r}")
            try:
                out = int(value) if not isinstance(value, float) or value.is_integer() else None
            except ValueError:
                out = None
            if out is None:
                raise ValueError(f"must be a whole number, not {value!r}")
            if self.choices and out not in self.choices:
                raise ValueError(f"must be one of {', '.join(map(str, self.choices))}, not {value!r}")
        else:
            try:
                out = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"must be a number, not {value!r}") from None
            if not math.isfinite(out):
                raise ValueError(f"must be a finite number, not {value!r}")
        if out == 0 and self.zero:
            return out
        low_ok = self.low is None or (out > self.low if self.open_low else out >= self.low)
        high_ok = self.high is None or (out < self.high if self.open_high else out <= self.high)
        if not (low_ok and high_ok):
            raise ValueError(f"must be {self.range_text()}, not {value!r}")
        return out

    def range_text(self) -> str:
        kind = "a whole number" if self.type is int else "a number"
        if self.low is not None and self.high is not None:
            return (f"in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}{')' if self.open_high else ']'}"
                    + (f" (or 0 = {self.zero})" if self.zero else ""))
        if self.low is not None:
            return f"{kind} {'>' if self.open_low else '>='} {self.low:g}" + (f" (or 0 = {self.zero})" if self.zero else "")
        return kind

    def parse(self, text: str):
        """A value from the command line or an editor's text (ValueError when bad)."""
        if self.type in (int, float) and isinstance(text, str):
            text = text.strip().replace(",", "").replace("_", "")
        return self.check(text)

    def text(self, value) -> str:
        """``value`` as text that :meth:`parse` reads back to the same value (floats exactly)."""
        if self.type is bool:
            return "on" if value else "off"
        if self.type is tuple:
            return " ".join(repr(float(v)) for v in value)
        if self.type is float:
            return repr(float(value))
        return str(value)


def _s(name, section, type_, default, help_, **kw) -> Setting:
    return Setting(name, section, type_, default, help_, **kw)


D, T = "dataset", "train"
SETTINGS: tuple[Setting, ...] = (
    # --- the dataset stage (DatasetConfig)
    _s("max_size", D, int, 1600, "longer training image side in px after downscaling, 0 = as stored",
       group="basic", label="Image size", low=MIN_IMAGE_SIDE, zero="as stored", metavar="PX"),
    _s("wide_lens", D, str, "faces", "fisheye, FOV and 360-degree (equirectangular) images: 'faces' splits each "
       "into up to 6 pinhole cube faces cropped to the lens footprint (sharing the image's appearance); 'crop' "
       "undistorts to one pinhole image cropped to its largest valid rectangle (360-degree images refused)",
       choices=WIDE_LENS_MODES),
    _s("projection", D, str, "auto", "what a video's frames (or a photo folder's images) are before SfM: auto "
       "takes 2:1 frames for a 360-degree equirectangular capture (SfM and training on their cube faces) and any "
       "other size for a perspective one; equirect insists on 360 (2:1 frames needed); perspective takes 2:1 "
       "frames as an ordinary wide camera (a cropped panorama, a cinema aspect). A dataset's cameras say it "
       "themselves", choices=PROJECTIONS, stages=("sfm", "undistort") + TRAIN_STAGES),
    _s("face_size", D, int, 0, "side of a wide image's cube face in px before its crop and the downscale; 0 = per "
       "face, matching the source's resolution", low=16, zero="per face", metavar="PX"),
    _s("eval_every", D, int, 8, "hold out every k-th image by sorted name for evaluation, 0 = none; when that "
       "would hold out every image, all train and none is held out", low=0, metavar="K", resume="blocking"),
    _s("masks", D, str, "auto", "per-image masks from a masks/ folder beside images/ (<name>.png or <name without "
       "extension>.png, white = keep) or the images' alpha channel: ignore (masked-out pixels take no part in the "
       "loss or the mesh texture; for a tripod, a person, the operator), cutout (they are empty space: trained to "
       "show the background colour; for an object cut from its background), off; auto: ignore for a masks "
       "folder, cutout for an alpha channel (what alpha always did), off when there is neither",
       group="basic", label="Masks", choices=MASK_MODES),
    # --- training (TrainConfig); defaults follow Kerbl et al. 2023 (the reference implementation's
    # learning rates and density-control schedule)
    _s("steps", T, int, 30_000, "training steps", group="basic", low=1),
    _s("seed", T, int, 0, "random seed of the initial points and the image order", low=0),
    _s("sh_degree", T, int, 3, "max spherical-harmonics degree of the colours", choices=(0, 1, 2, 3),
       label="SH degree", resume="blocking"),
    _s("sh_degree_interval", T, int, 1000, "the SH degree grows by one every this many steps", low=1),
    _s("lr_means", T, float, 1.6e-4, "means' learning rate (x the scene extent), decays exponentially to "
       "lr_means_final", low=0),
    _s("lr_means_final", T, float, 1.6e-6, "ADC: where the means' learning rate decays to (3DGS's 100x); MCMC "
       "has its own, mcmc_lr_means_final", low=0),
    _s("lr_scales", T, float, 5e-3, "scales' learning rate", low=0),
    _s("lr_quats", T, float, 1e-3, "rotations' learning rate", low=0),
    _s("lr_opacities", T, float, 5e-2, "opacities' learning rate", low=0),
    _s("lr_sh0", T, float, 2.5e-3, "base colours' learning rate", low=0),
    _s("lr_shN", T, float, 2.5e-3 / 20, "higher SH coefficients' learning rate", low=0, label="Lr shN"),
    _s("lambda_dssim", T, float, 0.2, "D-SSIM weight of the loss (L1 the rest)", low=0, high=1),
    _s("ssim_padding", T, str, "zero", "the loss's SSIM windows: zero (3DGS: every pixel, zero-padded) or valid "
       "(gsplat: windows inside the image)", choices=("zero", "valid")),
    _s("densify_from", T, int, 500, "the first densification (ADC's clone / split, MCMC's growth) after this step",
       group="basic", label="Densify from step", low=0),
    _s("densify_until", T, int, 15_000, "ADC: no densification from this step on", low=0),
    _s("densify_interval", T, int, 100, "densify every this many steps", low=1),
    _s("grad_threshold", T, float, 2e-4, "ADC: densify where the mean |dL/d mean2d| (NDC units) passes this",
       low=0),
    _s("clone_scale", T, float, 0.01, "ADC: below this scale (x extent) clone, above it split", low=0),
    _s("prune_opacity", T, float, 0.005, "ADC: prune Gaussians below this opacity", low=0, high=1),
    _s("prune_scale", T, float, 0.1, "ADC: prune Gaussians larger than this (x extent) after the first opacity "
       "reset", low=0),
    _s("opacity_reset_interval", T, int, 3000, "ADC: reset the opacities every this many steps", low=1),
    _s("max_gaussians", T, int, 6_000_000, "adc: the cap densification stops at; mcmc: the exact number of "
       "Gaussians it grows to (its budget, default mcmc_budget); auto: whichever applies",
       group="basic", label="Max Gaussians", low=1),
    _s("strategy", T, str, "auto", "densification: adc (3DGS clone/split/prune), mcmc (relocation, an exact "
       f"Gaussian budget; Kheradmand et al. 2024) or auto (mcmc when the run has at least {MCMC_MIN_STEPS} steps "
       f"on SfM points or {MCMC_MIN_STEPS_RANDOM} from random points, else adc: mcmc grows slowly from its "
       "small initial splats)", group="basic", label="Densification", choices=STRATEGIES),
    _s("mcmc_budget", T, int, 200_000, "mcmc: the exact Gaussian count it grows to (at most max_gaussians)",
       label="MCMC budget", low=1),
    _s("mcmc_init_opacity", T, float, 0.5, "mcmc: the initial opacity (gsplat's MCMC preset, init_opa)",
       low=0, high=1, open_low=True, resume="neutral"),
    _s("mcmc_init_scale", T, float, 0.1, "mcmc: initial scale x the RMS distance to the 3 nearest points", low=0,
       resume="neutral"),
    _s("mcmc_noise_lr", T, float, 0.0, "mcmc: position noise x the means' lr; 0: by the start "
       "(spirula/engine/splat/mcmc.py noise_lr_for)", low=0),
    _s("mcmc_lr_means_final", T, float, 0.0, "mcmc: where the means' lr decays to (x extent); 0: by the start "
       "(spirula/engine/splat/mcmc.py lr_means_final_for)", low=0),
    _s("mcmc_scale_reg", T, float, 0.01, "mcmc: L1 regulariser on the scales (cameras' distance = 1)", low=0),
    _s("mcmc_refine_until", T, float, 0.0, "mcmc: no relocation or growth from this fraction of the steps on; "
       "0: from step 25,000 (gsplat's refine_stop_iter, whatever the run's length)", low=0, high=1),
    _s("adam_moments", T, str, "fp32", "Adam moments in float32 or bfloat16 (half their memory, stochastic "
       "rounding; for very large models)", group="basic", label="Adam moments", choices=("fp32", "bf16")),
    _s("init_random_points", T, int, 100_000, "random initial points when the dataset has no SfM points",
       group="basic", label="Random init points", low=1, flag="--init-points"),
    _s("init_random", T, str, "views", "without SfM points: random points where the training cameras look "
       "(views) or in gsplat's cube (box)", choices=RANDOM_INITS, resume="neutral"),
    _s("init_opacity", T, float, 0.1, "initial opacity of SfM or random points (ADC)", low=0, high=1,
       open_low=True),
    _s("init_file", T, str, "", "start from these Gaussians (.ply, .compressed.ply, .spz, .sog, .splat) instead "
       "of the SfM points or a random start: fine-tune a model made elsewhere on this dataset",
       flag="--init", metavar="SPLAT_FILE"),
    _s("antialias", T, bool, False, "anti-aliased training (Mip-Splatting: a 3D smoothing filter from the "
       "training cameras' sampling rates and the 2D Mip filter); the exported PLY has the 3D filter baked in",
       group="basic", label="Anti-aliasing"),
    _s("res_levels", T, int, 1, "coarse-to-fine training: the first steps see the images at 1/2, 1/4, ... of "
       "their size (K levels; 1 = always full size)", low=1, metavar="K"),
    _s("res_until", T, float, 0.5, "with res_levels > 1: full size from this fraction of the steps on",
       low=0, high=1, open_low=True, metavar="F"),
    _s("appearance", T, str, "off", "per-image colour learned beside the splats, so exposure / white-balance "
       "changes between images are not baked into them: exposure (a gain per colour channel and image), affine "
       "(a 3x4 colour matrix per image) or bilagrid (a bilateral grid per image, Wang et al. 2024); held-out "
       "views use none; unset: by the input (exposure for a video)",
       group="basic", label="Per-image appearance", choices=APPEARANCES),
    _s("geometry", T, bool, False, "the geometry phase (from geometry_from of the steps on): flattened Gaussians "
       "and depth-normal consistency, for splats whose depth a mesh can be made from (2DGS / PGSR); unset: on when "
       "a mesh stage follows", group="basic", label="Geometry for meshing"),
    # geometry defaults: the variant within 0.3 dB of held-out PSNR at 7k / 1000 px (BENCHMARKS.md;
    # from 0.25 with lambda 0.05 and the alpha gradient on, office_chair lost 1.07 dB)
    _s("geometry_from", T, float, 0.6, "geometry: the phase starts at this fraction of the steps (2DGS: 7k of "
       "30k)", low=0, high=1, open_high=True, metavar="F", needs="geometry"),
    _s("lambda_normal", T, float, 0.02, "geometry: depth-normal consistency weight", low=0, metavar="W",
       needs="geometry"),
    _s("lambda_multiview", T, float, 0.0, "geometry: multi-view geometric consistency weight (PGSR's term: each "
       "step also renders a neighbouring view's depth and penalises the forward-backward reprojection error; PGSR "
       "uses 0.03), 0 = off", low=0, metavar="W", needs="geometry"),
    _s("lambda_mvrgb", T, float, 0.0, "geometry: multi-view photometric consistency weight (PGSR's term: 7x7 "
       "patches of the training image warped by the rendered plane into a neighbouring view's training image, "
       "1 - NCC; no extra render; PGSR uses 0.2), 0 = off", low=0, metavar="W", needs="geometry"),
    _s("lambda_flat", T, float, 100.0, "geometry: flattening (shortest scale) weight, 0 = none, cameras' "
       "distance = 1", low=0, metavar="W", needs="geometry"),
    _s("geometry_alpha_grad", T, bool, False, "geometry: whether the depth-normal loss also changes the splats' "
       "opacities and footprints (on), or only turns and moves them (off)", needs="geometry"),
    _s("background", T, tuple, (0.0, 0.0, 0.0), "background colour behind the splats (R G B in [0, 1])",
       metavar="C"),
    _s("eval_interval", T, int, 0, "evaluate the held-out images every k steps (0 = at the end only)",
       group="basic", label="Held-out PSNR every", low=0, metavar="K", resume="neutral"),
    _s("log_interval", T, int, 25, "read the loss back every k steps", low=1, metavar="K", resume="neutral"),
    _s("checkpoint_every", T, int, 2000, "checkpoint the training every K steps and at its end (0 = only when "
       "stopped) into the project's checkpoints/train.npz (a partition part's: <part>/train/checkpoints/); "
       "spirula train --resume, a rerun of spirula run or partition train, or the studio's Resume continues "
       "from it (spirula run removes it once its training finishes)", low=0, metavar="K", retrains=False,
       resume="neutral"),
)
del D, T

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
GROUPS = ("basic", "advanced")

# The studio's own preferences: no stage reads them (no config field, no CLI option, not in a
# project's saved settings), declared here once as the stages' are; the window takes its
# defaults, labels and help from here and remembers the user's value (spirula/app/remembered.py).
STUDIO_SETTINGS: tuple[Setting, ...] = (
    _s("ask_before_meshing", "studio", bool, True, "Mesh first shows the box the mesh stage proposes (--bounds "
       "auto, with its reason) in the viewport, to drag or type, and meshes it on Confirm; off: it meshes the "
       "proposed box at once", group="basic", label="Ask before meshing (show the box first)"),
)
STUDIO: dict[str, Setting] = {s.name: s for s in STUDIO_SETTINGS}


def named(section: str) -> tuple[Setting, ...]:
    """The settings of ``section`` ("dataset" or "train"), in the table's order."""
    return tuple(s for s in SETTINGS if s.section == section)


def basic() -> tuple[Setting, ...]:
    return tuple(s for s in SETTINGS if s.group == "basic")


# Named overlays of settings (`--preset`, the studio's presets): each value is set here and
# only here, with why. A preset sets only what the user left unset.
PRESETS: dict[str, dict] = {
    # the table's own defaults: 30k steps, MCMC to 200k Gaussians (3DGS's schedule length)
    "default": {},
    # "fast" (issue 25, time to quality): the default's schedule compressed to a third of the
    # steps, nothing else changed, so it is still MCMC at the 200k budget from the same init.
    # The bar: reach gsplat DefaultStrategy's 30k held-out PSNR in <= 0.1x gsplat's 30k wall
    # time (177-235 s on H100/H200: <= ~18-23 s) and <= 0.5x our own 30k; at 1.6-2.5 s per 1k
    # steps that leaves about 10k steps. Measured with the default (30k) schedule: mouse passes
    # gsplat's 19.17 dB by 2k steps, office_chair its 31.89 (H200) / 32.82 (H100) between 7k and
    # 15k, fox its 30.15 only after 7k (a whole 7k schedule ends at 29.93, 30k at 32.20).
    "fast": {
        # What scales with the run's length scales to it by itself: the means' lr decays over
        # the steps (Trainer.mean_lr; MCMC's position noise with it), the per-image appearance's
        # schedule too. Left as they are, though gsplat's steps_scaler would scale them by 1/3
        # (unmeasured here, so not changed): SH degree +1 every 1,000 steps (degree 3 from 3k),
        # refine from step 500 every 100 steps (MCMC grows 5% per refine: mouse's 4,443 SfM points
        # need ~78 refines, to ~8k, to near 200k), ADC's window (auto picks MCMC at 10k steps).
        "steps": 10_000,
        # MCMC's relocation and growth end at 0.8 x the steps (8k of 10k), leaving the last 2k
        # steps to settle the relocated splats, as gsplat's 25k of 30k leaves 5k; without it
        # (refine until step 25,000) a 10k run relocates up to its last 100 steps.
        "mcmc_refine_until": 0.8,
    },
    # "software": a machine without a GPU (software Vulkan, lavapipe: every kernel on the CPU),
    # chosen by itself there (spirula/engine/cli/options.py, the studio's Training panel). The default's
    # 30,000 steps at 1600 px would take ~10 hours there. Measured on book at 240 px on software
    # Vulkan (held-out PSNR every 100 steps, seed 0): 400 steps without densification ended at
    # 17.4 dB; this preset (auto = MCMC on book's SfM points) rises to 19.0 dB at step 1,000 and
    # 19.2 at 2,000 with no fall when densification begins (699 -> 1,750 Gaussians, 2 min); ADC
    # from step 500 fell from 18.1 to 13.6 dB at step 600 and ended at 18.1 (63k Gaussians, 4.5 min).
    "software": {"steps": 2_000, "max_size": 240, "init_random_points": 10_000, "eval_interval": 200,
                 "densify_from": 100, "max_gaussians": 200_000, "mcmc_budget": 200_000},
}


def preset_settings(name: str) -> dict:
    """The settings preset ``name`` sets (a copy; {} for "default"). ValueError for an
    unknown name."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, not {name!r}")
    return dict(PRESETS[name])


def default_appearance(input_kind: str) -> str:
    """appearance when neither the user nor a preset set it, by input kind ("video", "photos"
    or "dataset", spirula/engine/jobs/pipeline.py detect_input): a phone video changes exposure and
    white balance between frames, so "exposure" there (a gain per channel and image; the full
    "affine" lost on held-out views, spirula/engine/splat/appearance.py); "off" otherwise."""
    return "exposure" if input_kind == "video" else BY_NAME["appearance"].default


def density(values: dict, given: set) -> dict:
    """``values`` (every setting) with the densification's counts made consistent with what
    the user ``given`` set: ``max_gaussians`` is ADC's cap, MCMC's exact budget (the cap raised
    to it), and for "auto" both; an explicitly set ``mcmc_budget`` stays as set. The one place
    where ``--max-gaussians`` gets its meaning."""
    out = dict(values)
    strategy = out["strategy"]
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if strategy == "adc":
        return out
    if "max_gaussians" in given and "mcmc_budget" not in given:
        out["mcmc_budget"] = out["max_gaussians"]
    if strategy == "mcmc" and "max_gaussians" not in given:
        out["max_gaussians"] = max(out["mcmc_budget"], 1)
    return out


def resolve(given: dict, preset: str = "default", input_kind: str = "dataset",
            mesh_follows: bool = False) -> tuple[dict, dict]:
    """(dataset settings, train settings): the table's defaults, then the ``preset``'s
    overlay on what ``given`` leaves unset (a None value is unset), then what was given;
    unset appearance by ``input_kind`` (:func:`default_appearance`), unset geometry phase on
    when ``mesh_follows``; the densification's counts by :func:`density`. ValueError for an
    unknown name or a bad value (the reason names the setting)."""
    user = {k: v for k, v in given.items() if v is not None}
    unknown = sorted(set(user) - set(BY_NAME))
    if unknown:
        raise ValueError(f"unknown setting {', '.join(unknown)}")
    over = preset_settings(preset)
    values = {s.name: s.default for s in SETTINGS}
    values.update({k: v for k, v in over.items() if k not in user})
    for k, v in user.items():
        try:
            values[k] = BY_NAME[k].check(v)
        except ValueError as e:
            raise ValueError(f"{k}: {e}") from None
    if "appearance" not in user and "appearance" not in over:
        values["appearance"] = default_appearance(input_kind)
    if "geometry" not in user and "geometry" not in over:
        values["geometry"] = bool(mesh_follows)
    values = density(values, set(user))
    return ({s.name: values[s.name] for s in named("dataset")},
            {s.name: values[s.name] for s in named("train")})


def added_later(section: str) -> dict:
    """Settings of ``section`` ("dataset" or "train") added after runs were first saved,
    with the values runs saved before them had: a saved run or checkpoint without one ran
    so, so it is neither a changed setting on resume nor part of a cached stage's key while
    it has that value."""
    if section == "dataset":
        # runs saved before masks existed read no masks folder and composited alpha over black:
        # what "auto" does on every dataset without a masks folder (alpha: cutout over the default
        # black background, the same targets). A dataset with a masks folder trained then resumes
        # or reruns with its masks ignored, not with them off (spirula/engine/ingest/masks.py).
        # The wide-lens split (issue 51): runs saved before it undistorted a fisheye to one crop,
        # but a pinhole dataset (nearly all of them) trains the same either way, so they count
        # as the default and keep their cached stages
        # projection (issue 51): runs saved before it took every 2:1 video for 360, which "auto" does
        return {"masks": "auto", "wide_lens": BY_NAME["wide_lens"].default, "face_size": BY_NAME["face_size"].default,
                "projection": "auto"}
    if section != "train":
        return {}
    # init_random is not here: runs saved before it started from another random init
    names = ("adam_moments", "mcmc_budget", "mcmc_init_opacity", "mcmc_init_scale", "mcmc_noise_lr", "mcmc_scale_reg",
             "mcmc_lr_means_final", "mcmc_refine_until", "antialias", "appearance", "ssim_padding", "res_levels",
             "res_until", "init_file", "geometry", "geometry_from", "lambda_normal", "lambda_multiview", "lambda_mvrgb", "lambda_flat",
             # runs saved before it existed with --geometry sent the loss through the alphas (the
             # phase was off by default then, and a resume of such a run is not told)
             "geometry_alpha_grad")
    out = {k: BY_NAME[k].default for k in names}
    # strategy: runs saved before it existed trained with ADC (the default then), not "auto"
    out["strategy"] = "adc"
    return out


def flat(config: dict) -> dict:
    """Every setting by name from a saved RunConfig (train.json's or run.json's "config":
    {"dataset": {...}, "train": {...}}); settings a run saved before they existed are absent
    (:func:`from_saved` fills them)."""
    out = {}
    for s in SETTINGS:
        section = config.get(s.section) or {}
        if s.name in section:
            out[s.name] = section[s.name]
    return out


def from_saved(config: dict) -> dict:
    """Every setting of a saved run (a RunConfig as saved in train.json / run.json), as it
    ran: a setting the file lacks (saved before it existed) takes the value such runs had
    (spirula/engine/config.py added_later) or the table's default; values are checked."""
    out = {}
    saved = flat(config)
    for s in SETTINGS:
        if s.name in saved:
            out[s.name] = s.check(saved[s.name])
        else:
            out[s.name] = added_later(s.section).get(s.name, s.default)
    return out
