"""Settings of the dataset and training stages, and of a whole run: one dataclass per
stage, derived from the settings table (spirula/engine/settings.py, the single source of truth for
the CLI, the studio's editors and the saved run file). The other stages keep theirs beside
their code: spirula/engine/sfm/sfm_config.py (SfmConfig) and spirula/engine/mesh/mesh_config.py (MeshConfig)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, make_dataclass

from . import settings as _table
from .settings import (APPEARANCES, MCMC_MIN_STEPS, MCMC_MIN_STEPS_RANDOM, PRESETS, RANDOM_INITS,  # noqa: F401
                       STRATEGIES, added_later, default_appearance, preset_settings)


def _config_class(section: str, name: str, doc: str):
    """A dataclass with one field per setting of ``section`` in the table (its defaults)."""
    cls = make_dataclass(name, [(s.name, s.type, field(default=s.default)) for s in _table.named(section)])
    cls.__module__, cls.__qualname__, cls.__doc__ = __name__, name, doc
    return cls


DatasetConfig = _config_class("dataset", "DatasetConfig", "The dataset stage's settings (spirula/engine/settings.py).")
TrainConfig = _config_class("train", "TrainConfig", """3DGS training's settings (spirula/engine/settings.py); defaults
follow Kerbl et al. 2023 (the reference implementation's learning rates and density-control schedule).""")


@dataclass
class RunConfig:
    device: str = "vulkan"
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return asdict(self)


def run_config(given: dict, device: str = "vulkan", preset: str = "default", input_kind: str = "dataset",
               mesh_follows: bool = False) -> RunConfig:
    """The RunConfig of the settings ``given`` (name -> value, None = unset) with ``preset``'s
    overlay and the defaults by context (spirula/engine/settings.py resolve, the one place)."""
    ds, tr = _table.resolve(given, preset, input_kind, mesh_follows)
    return RunConfig(device=device, dataset=DatasetConfig(**ds), train=TrainConfig(**tr))


def settings_of(cfg: RunConfig) -> dict:
    """Every setting of ``cfg`` by name (the inverse of :func:`run_config` for a full set)."""
    return _table.flat(asdict(cfg))


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
    """TrainConfig fields for a densification strategy and an optional Gaussian count (a
    command line's or a benchmark's): spirula/engine/settings.py density, which gives the count its
    meaning (ADC's cap, MCMC's exact budget, both for "auto")."""
    given = {"strategy"} | ({"max_gaussians"} if max_gaussians is not None else set())
    values = {"strategy": strategy, "max_gaussians": TrainConfig.max_gaussians, "mcmc_budget": TrainConfig.mcmc_budget}
    if max_gaussians is not None:
        values["max_gaussians"] = int(max_gaussians)
    out = _table.density(values, given)
    out["max_gaussians"] = max(out["max_gaussians"], 1) if strategy != "adc" else out["max_gaussians"]
    return {k: out[k] for k in (("strategy", "max_gaussians") if strategy == "adc" else
                                ("strategy", "mcmc_budget", "max_gaussians"))}


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
