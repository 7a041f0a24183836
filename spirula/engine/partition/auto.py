"""`spirula run --partition auto` (and the pipeline's train stage): when the model the
run surely has does not fit the device (spirula/engine/preflight.py's estimate against the device
memory, $SPIRULA_VRAM_LIMIT included), the train stage runs the three steps of
`spirula partition` instead: split into ``<project>/parts`` (outside the stage's staging
folder, so a rerun resumes the trained parts) with a VRAM budget of 80 % of the device per
part, train the parts (Ray tasks, or one after another), merge into the stage's output.
Where the device memory is unknown (a software GPU: host memory) nothing is partitioned.
"""

from __future__ import annotations

from pathlib import Path

from ..config import RunConfig
from ..messages import Emit, Warning
from .fits import device_budget

PART_FRACTION = 0.8


def train_partitioned_if_needed(dataset: Path, parts_dir: Path, out_dir: Path, cfg: RunConfig, emit: Emit,
                                should_stop) -> dict | None:
    """Partitioned training into ``out_dir`` (merge_parts' metrics) when the run does not
    fit the device, else None (train as usual). KeyboardInterrupt when stopped (the parts
    keep their checkpoints)."""
    from dataclasses import replace

    from .parts_layout import NAME, read_layout
    from .merge import merge_parts
    from .parts import split_dataset
    from .run_parts import train_parts
    from .split import ContextBudgetError, SplitSettings, same_settings

    budget = device_budget(dataset, cfg)
    if budget is None:
        return None
    need, have = budget
    settings = SplitSettings(vram_gib=PART_FRACTION * have / 2**30, eval_every=cfg.dataset.eval_every,
                             total_gaussians=min(cfg.train.mcmc_budget, cfg.train.max_gaussians),
                             max_size=cfg.dataset.max_size or 1 << 20, sh_degree=cfg.train.sh_degree)
    emit(Warning(f"the model needs about {need / 2**30:.2f} GiB, the device has {have / 2**30:.2f} GiB: training "
                 f"in parts of at most {settings.vram_gib:.2f} GiB (--partition auto; parts in {parts_dir})"))
    same = (parts_dir / NAME).is_file() and same_settings(read_layout(parts_dir).settings, settings)
    if not same:
        try:
            split_dataset(dataset, parts_dir, settings, force=True, on_message=lambda _: None)
        except ContextBudgetError as e:  # an orbit's context keeps every part too big: split without it
            settings = replace(settings, context_views=0)
            emit(Warning(f"{e}: splitting without the parts' context instead (merged quality may be lower near "
                         "the cuts)"))
            split_dataset(dataset, parts_dir, settings, force=True, on_message=lambda _: None)
    out = train_parts(parts_dir, cfg, emit=emit, should_stop=should_stop)
    if out["stopped"]:
        raise KeyboardInterrupt
    return merge_parts(parts_dir, Path(out_dir), emit=emit)
