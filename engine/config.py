"""Settings of the dataset and training stages, and of a whole run: one dataclass per
stage, the single source of truth for the CLI, the GUI option editor and the saved run
file. The other stages keep theirs beside their code, in the same form:
engine/sfm/config.py (SfmConfig) and engine/mesh/config.py (MeshConfig)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

STRATEGIES = ("auto", "adc", "mcmc")  # TrainConfig.strategy (resolve_strategy)
RANDOM_INITS = ("views", "box")   # TrainConfig.init_random (engine/splat/init.py)
MCMC_MIN_STEPS = 500              # "auto" picks MCMC from this many steps on SfM points (resolve_strategy)
MCMC_MIN_STEPS_RANDOM = 7_000     # ... and from this many from random points
APPEARANCES = ("off", "exposure", "affine", "bilagrid")  # TrainConfig.appearance (engine/splat/appearance.py)


@dataclass
class DatasetConfig:
    max_size: int = 1600      # longer image side after downscaling, px
    eval_every: int = 8       # hold out every k-th image by sorted name; 0 = none


@dataclass
class TrainConfig:
    """3DGS training; defaults follow Kerbl et al. 2023 (the reference implementation's
    learning rates and density-control schedule)."""

    steps: int = 30_000
    seed: int = 0
    sh_degree: int = 3
    sh_degree_interval: int = 1000
    lr_means: float = 1.6e-4          # x scene extent, decays exponentially to lr_means_final
    lr_means_final: float = 1.6e-6    # ADC's (3DGS's 100x decay); MCMC has its own, mcmc_lr_means_final
    lr_scales: float = 5e-3
    lr_quats: float = 1e-3
    lr_opacities: float = 5e-2
    lr_sh0: float = 2.5e-3
    lr_shN: float = 2.5e-3 / 20
    lambda_dssim: float = 0.2
    ssim_padding: str = "zero"        # the loss's SSIM: "zero" (3DGS: every pixel) or "valid" (gsplat: windows inside)
    densify_from: int = 500
    densify_until: int = 15_000
    densify_interval: int = 100
    grad_threshold: float = 2e-4      # mean |d L / d mean2d| in NDC units
    clone_scale: float = 0.01         # x extent: below it clone, above it split
    prune_opacity: float = 0.005
    prune_scale: float = 0.1          # x extent, applied after the first opacity reset
    opacity_reset_interval: int = 3000
    max_gaussians: int = 6_000_000
    strategy: str = "auto"            # densification: "adc" (3DGS clone/split/prune), "mcmc" (engine/splat/mcmc.py)
                                      # or "auto" (resolve_strategy: mcmc unless the run is short, adc then)
    mcmc_budget: int = 200_000        # mcmc: the exact Gaussian count it grows to (at most max_gaussians)
    mcmc_init_opacity: float = 0.5    # mcmc's start (gsplat simple_trainer.py's MCMC preset, init_opa)
    mcmc_init_scale: float = 0.1      # mcmc: x the RMS distance to the 3 nearest points (its init_scale)
    mcmc_noise_lr: float = 0.0        # mcmc: position noise x the means' lr; 0: by the start (engine/splat/mcmc.py noise_lr_for)
    mcmc_lr_means_final: float = 0.0  # mcmc: where the means' lr decays to (x extent); 0: by the start (mcmc.py lr_means_final_for)
    mcmc_scale_reg: float = 0.01      # mcmc: L1 regulariser on the scales (its scale_reg), cameras' distance = 1
    mcmc_refine_until: float = 0.0    # mcmc: no relocation / growth from this fraction of the steps on;
                                      # 0: from step 25,000 (gsplat's refine_stop_iter, whatever the run's length)
    adam_moments: str = "fp32"        # Adam moments' storage: "fp32" or "bf16" (half the memory, stochastic rounding)
    init_random_points: int = 100_000
    init_random: str = "views"        # without SfM points: "views" (along the cameras' rays) or "box" (gsplat's cube)
    init_opacity: float = 0.1
    init_file: str = ""               # start from this splat file (any format of engine/io/formats.py), not SfM/random
    antialias: bool = False           # Mip-Splatting's 3D smoothing and 2D Mip filters (engine/splat/antialias.py)
    res_levels: int = 1               # coarse-to-fine: the first steps at 1/2^k size, k < levels (engine/splat/res_schedule.py)
    res_until: float = 0.5            # ... full size from this fraction of the steps on
    appearance: str = "off"           # per-image colour: "off", "exposure" (gain per channel), "affine" or "bilagrid"
    geometry: bool = False            # the geometry phase: flattened Gaussians, depth-normal consistency (engine/splat/geometry.py)
    # geometry defaults: the variant within 0.3 dB of held-out PSNR at 7k / 1000 px (BENCHMARKS.md;
    # from 0.25 with lambda 0.05 and the alpha gradient on, office_chair lost 1.07 dB)
    geometry_from: float = 0.6        # geometry: the phase starts after this fraction of the steps (2DGS: 7k of 30k)
    lambda_normal: float = 0.02       # geometry: depth-normal consistency weight
    lambda_multiview: float = 0.0     # geometry: multi-view geometric consistency weight (PGSR's 0.03); 0 = off
    lambda_mvrgb: float = 0.0         # geometry: multi-view photometric (patch NCC) consistency weight (PGSR's 0.2); 0 = off
    lambda_flat: float = 100.0        # geometry: flattening (shortest scale) weight, cameras' distance = 1
    geometry_alpha_grad: bool = False  # geometry: the consistency loss also changes alphas (opacity, footprint), not only (n, d)
    background: tuple[float, float, float] = (0.0, 0.0, 0.0)
    eval_interval: int = 0            # evaluate every k steps (0 = only at the end)
    log_interval: int = 25            # read the loss back every k steps
    checkpoint_every: int = 2000      # write <project>/checkpoint.npz every k steps (0 = never)


@dataclass
class RunConfig:
    device: str = "vulkan"
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return asdict(self)


# Named sets of TrainConfig settings (`spirula train / run --preset`, the studio's Training panel,
# benchmarks/quality_bench.py --preset): each value is set here and only here, with why.
PRESETS: dict[str, dict] = {
    # TrainConfig's own defaults: 30k steps, MCMC to 200k Gaussians (3DGS's schedule length).
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
        # cfg.steps (Trainer.mean_lr; MCMC's position noise with it), the per-image appearance's
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
}


def preset_settings(name: str) -> dict:
    """The TrainConfig fields preset ``name`` sets (a copy; {} for "default"). ValueError for
    an unknown name."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, not {name!r}")
    return dict(PRESETS[name])


def resolve_strategy(strategy: str, has_points: bool, steps: int | None = None) -> str:
    """The density control a run uses: ``strategy`` itself, or for "auto" "mcmc" when the
    run has at least MCMC_MIN_STEPS steps (SfM points) or MCMC_MIN_STEPS_RANDOM (random
    points), else "adc" (``steps`` None: a full run).
    Measured on the H200 (BENCHMARKS.md, 2026-12-02, held-out PSNR against gsplat 1.5.3's
    DefaultStrategy at its own defaults): with SfM points MCMC beat ADC at equal time by 3.9 dB
    on mouse and 0.9 on office_chair (7k). From random points (fox) MCMC at a 200k budget with
    its means' lr decaying 3x less (mcmc_lr_means_final) made 29.96 dB at 7k (3 seeds; ADC
    29.55, gsplat 29.94) and 32.20 at 30k (ADC 29.21, gsplat 30.15) at 1.75 s per 1k steps
    and 510 MiB (ADC 1.55 s, 805 MiB; gsplat 6.56 s, 1,823 MiB). Short runs: MCMC grows 5% per
    refine from its small, few initial splats. Software Vulkan, the studio's software preset
    (2,000 steps, 240 px, 10k random points, fox): ADC 22.15 dB, MCMC 20.88; book (SfM points)
    at 240 px: 200 steps ADC 16.1 dB, MCMC 8.5; 600 steps 14.2 and 15.6. ValueError for an
    unknown name."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if strategy == "auto":
        needed = MCMC_MIN_STEPS if has_points else MCMC_MIN_STEPS_RANDOM
        return "mcmc" if steps is None or steps >= needed else "adc"
    return strategy


def density_settings(strategy: str, max_gaussians: int | None) -> dict:
    """TrainConfig fields for a densification strategy and an optional Gaussian count from
    a command line or the studio: ADC's cap (default 6M); MCMC's exact budget (default
    TrainConfig.mcmc_budget) with the cap raised to it; for "auto" the count is both (defaults:
    each strategy's own)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    given = max_gaussians is not None
    budget = int(max_gaussians) if given else TrainConfig.mcmc_budget
    if strategy == "mcmc":
        return {"strategy": "mcmc", "mcmc_budget": budget, "max_gaussians": max(budget, 1)}
    cap = int(max_gaussians) if given else TrainConfig.max_gaussians
    if strategy == "auto":
        return {"strategy": "auto", "mcmc_budget": budget, "max_gaussians": max(cap, 1)}
    return {"strategy": "adc", "max_gaussians": cap}


def added_later(section: str) -> dict:
    """Settings of ``section`` ("dataset" or "train") added after runs were first saved,
    with their defaults: a saved run or checkpoint without one had the default, so it is
    neither a changed setting on resume nor part of a cached stage's key while default."""
    # init_random is not here: runs saved before it started from another random init
    # strategy: runs saved before it existed trained with ADC (the default then), not "auto"
    return {"train": {"adam_moments": TrainConfig.adam_moments, "strategy": "adc",
                      "mcmc_budget": TrainConfig.mcmc_budget, "mcmc_init_opacity": TrainConfig.mcmc_init_opacity,
                      "mcmc_init_scale": TrainConfig.mcmc_init_scale, "mcmc_noise_lr": TrainConfig.mcmc_noise_lr,
                      "mcmc_scale_reg": TrainConfig.mcmc_scale_reg, "mcmc_lr_means_final": TrainConfig.mcmc_lr_means_final,
                      "mcmc_refine_until": TrainConfig.mcmc_refine_until,
                      "antialias": TrainConfig.antialias, "appearance": TrainConfig.appearance,
                      "ssim_padding": TrainConfig.ssim_padding, "res_levels": TrainConfig.res_levels,
                      "res_until": TrainConfig.res_until,
                      "init_file": TrainConfig.init_file, "geometry": TrainConfig.geometry,
                      "geometry_from": TrainConfig.geometry_from, "lambda_normal": TrainConfig.lambda_normal,
                      "lambda_multiview": TrainConfig.lambda_multiview, "lambda_mvrgb": TrainConfig.lambda_mvrgb,
                      "lambda_flat": TrainConfig.lambda_flat,
                      # runs saved before it existed with --geometry sent the loss through the alphas
                      # (the phase was off by default then, and a resume of such a run is not told)
                      "geometry_alpha_grad": TrainConfig.geometry_alpha_grad}}.get(section, {})


def default_appearance(input_kind: str) -> str:
    """TrainConfig.appearance when none is chosen, by input kind ("video", "photos" or
    "dataset", engine/jobs/pipeline.py detect_input): a phone video changes exposure and white
    balance between frames, so "exposure" there (a gain per channel and image; the full
    "affine" lost on held-out views, engine/splat/appearance.py); "off" otherwise."""
    return "exposure" if input_kind == "video" else TrainConfig.appearance


def override(cfg, **values):
    """Set the fields of a dataclass that are given (not None); unknown names raise."""
    names = {f.name for f in fields(cfg)}
    for k, v in values.items():
        if v is None:
            continue
        if k not in names:
            raise KeyError(f"{type(cfg).__name__} has no setting '{k}'")
        setattr(cfg, k, v)
    return cfg
