"""Merge the trained parts into one model (`spirula partition merge <parts> -o <project>`).

Ownership: each part keeps only the Gaussians whose centres lie in its owner cell (the
half-open boxes of partition.json on the ground plane, which tile the plane:
:meth:`spirula.engine.partition.parts_layout.Layout.owner_of`), so the overlap, trained by two or more
parts, is taken from the part that owns it and nothing is counted twice.

Outputs in ``<project>`` (atomically): ``splat.ply`` (all SH coefficients of the parts;
every part must have the same SH degree), ``metrics.json`` (held-out PSNR / SSIM of the
whole scene's held-out views, rendered with the merged model by the training's renderer
and scored by spirula/engine/splat/evaluate.py; per view too; the Gaussians kept of each part),
``eval/`` (each held-out render beside its ground truth) and ``train.json`` (the dataset,
so `spirula mesh <project>` finds it).

Then, by default for parts trained with context (an orbit capture's), a short joint fine-tune (:func:`finetune`): the merged model trained a
few steps (5% of the parts' steps, at least 100) over every training camera of the whole
scene, so the parts agree where rays cross the cuts; it needs the whole model and every
training image in one device's memory, so the default skips it (with a warning) when
they do not fit (``finetune_steps`` 0: never; N: always, N steps). metrics.json then
also holds ``owned_psnr``, the owned merge's score before it, and ``finetune_steps``.

Refused (PartitionError naming the part): a part that has not finished training, parts
of different SH degrees.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..fileio import write_json_atomic
from ..io.ply import GaussianPly, read_ply, write_ply
from ..messages import Emit, StageFinished, StageStarted, Warning, ignore
from .geometry import PartitionError
from .parts_layout import read_layout
from .run_parts import is_done


def merge_parts(parts_dir: Path, out_dir: Path, max_size: int | None = None, device: str | None = None,
                emit: Emit = ignore, evaluate_views: bool = True, finetune_steps: int | None = None) -> dict:
    """Merge the parts of ``parts_dir`` into ``out_dir`` (module docstring). ``max_size``:
    the held-out images' longer side (default: the size the parts trained at).
    ``finetune_steps``: then train the merged model that many steps over every training
    camera of the whole scene (:func:`finetune`); None (auto): FINETUNE_SHARE of the
    longest part's steps (at least FINETUNE_MIN_STEPS) when the merged model and every
    training image fit the device (spirula/engine/partition/fits.py device_budget), else none,
    with a warning; 0: none. Returns metrics.json's content."""
    import time

    t0 = time.perf_counter()
    emit(StageStarted("merge"))
    layout = read_layout(parts_dir)
    kept, counts = [], {}
    trained_size = part_cfg = None
    for p in layout.parts:
        d = layout.part_dir(p)
        if not is_done(d):
            raise PartitionError(f"{d}: {p.name} has not finished training (no train/part.json): run "
                                 f"`spirula partition train {parts_dir}` first")
        g = read_ply(d / "train" / "splat.ply")
        mine = layout.owner_of(g.means) == p.index
        kept.append(g.subset(mine))
        counts[p.name] = {"trained": len(g), "kept": int(mine.sum())}
        if trained_size is None:
            import json

            part_cfg = json.loads((d / "train" / "part.json").read_text(encoding="utf-8")).get("config", {})
            trained_size = part_cfg.get("dataset", {}).get("max_size")
            device = device or part_cfg.get("device")
    merged = concatenate(kept, [p.name for p in layout.parts])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_ply(out_dir / "splat.ply", merged)
    metrics = {"num_gaussians": len(merged), "parts": counts, "held_out": len(layout.test)}
    size, device = max_size or trained_size or 1600, device or "vulkan"
    ft_cfg = finetune_config(layout, out_dir / "splat.ply", len(merged), finetune_steps, part_cfg or {},
                             trained_size or size, device)
    metrics["finetune_steps"] = ft_cfg.train.steps if ft_cfg is not None else 0
    if ft_cfg is not None and finetune_steps is None:
        from . import fits

        short = fits.device_budget(layout.dataset, ft_cfg)
        if short is not None:
            emit(Warning(f"the merged model is not fine-tuned over every camera: with every training image it needs "
                         f"about {short[0] / 2**30:.2f} GiB, the device has {short[1] / 2**30:.2f} GiB (held-out PSNR "
                         "may be lower than an unpartitioned run's where rays cross the cuts)"))
            ft_cfg, metrics["finetune_steps"] = None, 0
    if ft_cfg is not None:
        if evaluate_views and layout.test:  # the owned merge's score, before the fine-tune
            metrics["owned_psnr"] = evaluate_ply(merged, layout.dataset, layout.test, size, device)["psnr"]
        emit(StageStarted("finetune", ft_cfg.train.steps, f"{len(merged):,} Gaussians, every training camera"))
        t1 = time.perf_counter()
        merged = finetune(layout, out_dir, ft_cfg)
        metrics["num_gaussians"] = len(merged)
        emit(StageFinished("finetune", time.perf_counter() - t1, {"steps": ft_cfg.train.steps}))
    if evaluate_views and layout.test:
        metrics.update(evaluate_ply(merged, layout.dataset, layout.test, size, device, out_dir / "eval"))
    write_json_atomic(out_dir / "metrics.json", metrics)
    write_json_atomic(out_dir / "train.json", {"dataset": str(layout.dataset), "partition": str(Path(parts_dir)),
                                                "config": {"dataset": {"max_size": max_size or trained_size}}})
    emit(StageFinished("merge", time.perf_counter() - t0, {k: metrics.get(k) for k in ("num_gaussians", "psnr", "ssim")}))
    return metrics


FINETUNE_SHARE = 0.05      # auto fine-tune: this share of the longest part's steps
FINETUNE_MIN_STEPS = 100   # ... and at least this many


def finetune_config(layout, ply: Path, count: int, steps: int | None, part_cfg: dict, max_size: int,
                    device: str):
    """The RunConfig of :func:`finetune` for the merged model ``ply`` of ``count``
    Gaussians, or None for no fine-tune (``steps`` 0; ``steps`` None and parts trained
    without context). ``steps`` None: FINETUNE_SHARE of
    the parts' longest run (``part_cfg``'s steps), at least FINETUNE_MIN_STEPS.

    The settings are the parts' (part.json's config), with MCMC at the merged count as its
    budget (relocation only, no growth) and the means' learning rate held at the parts'
    final rate (a restart at the initial rate would move the trained Gaussians)."""
    import math

    from ..config import DatasetConfig, RunConfig, TrainConfig
    from ..splat.mcmc import lr_means_final_for

    train = dict(part_cfg.get("train", {}))
    if "background" in train:
        train["background"] = tuple(train["background"])
    tc = TrainConfig(**{k: v for k, v in train.items() if k in TrainConfig.__dataclass_fields__})
    if steps is None:
        # the loss the fine-tune mends comes from the parts' context (an orbit's, split.py step
        # 4): each part fitted its side against its own copy of the other. Without context the
        # owned merge already matches (the CI city: -0.08 dB) and 100 steps over every camera
        # cost it 0.66 dB, so auto leaves such a merge alone.
        if not layout.settings.get("context_views"):
            return None
        longest = max([tc.steps] + [_part_steps(layout, p) for p in layout.parts])
        steps = max(int(math.ceil(FINETUNE_SHARE * longest)), FINETUNE_MIN_STEPS)
    if steps <= 0:
        return None
    final = lr_means_final_for(tc.mcmc_lr_means_final, True)
    tc.steps, tc.init_file, tc.strategy = steps, str(ply), "mcmc"
    tc.mcmc_budget = tc.max_gaussians = count
    tc.lr_means = tc.mcmc_lr_means_final = final
    tc.eval_interval, tc.checkpoint_every = 0, 0
    return RunConfig(device=device, dataset=DatasetConfig(max_size=max_size,
                                                          eval_every=int(layout.settings.get("eval_every", 8))),
                     train=tc)


def _part_steps(layout, p) -> int:
    import json

    try:
        d = json.loads((layout.part_dir(p) / "train" / "part.json").read_text(encoding="utf-8"))
        return int(d["config"]["train"]["steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def finetune(layout, out_dir: Path, cfg) -> GaussianPly:
    """Train the merged model ``<out_dir>/splat.ply`` by ``cfg`` (:func:`finetune_config`)
    over every training camera of the whole scene (the split's held-out views stay out),
    replacing the file; the run's folder is ``<out_dir>/finetune`` (its metrics and log; the
    held-out views are scored by the merge, not by this run).
    Returns the new model.

    Why: the parts trained their halves against their own context, not against each
    other's Gaussians. Where the model is made of many semi-transparent layers (mouse at
    200 px, 3,000 steps: 1% of the Gaussians above opacity 0.5), nearly every ray crosses the
    cut and composites one part's front layers with the other part's back layers, which
    were never trained together: each part alone scored 24.38 and 24.36 dB on the held-out
    views, the whole run 24.10, their owned merge 23.87 (per view down to -1.2 dB, colour
    offsets of opposite sign on the two sides). A few joint steps make them agree: 100 steps
    24.44, 300 steps 24.49, where the whole run gains 0.03 dB from 300 more (software
    Vulkan, benchmarks/results/partition-2026-12-06-finetune). This needs what the
    partition avoided: the whole model and every training image in one device's memory."""
    from ..jobs.train import run_training

    src = Path(out_dir) / "splat.ply"
    run_dir = Path(out_dir) / "finetune"
    # the merge scores the exported model itself, before and after (one renderer, its views)
    run_training(layout.dataset, run_dir, cfg, on_message=lambda _: None, keep_checkpoint=False, score_held_out=False)
    tuned = read_ply(run_dir / "splat.ply")
    os.replace(run_dir / "splat.ply", src)  # atomic; the run's folder keeps its metrics
    return tuned


def concatenate(parts: list[GaussianPly], names: list[str]) -> GaussianPly:
    """One GaussianPly of ``parts`` in order (extra properties kept only when every part
    has them). PartitionError naming the parts when their SH degrees differ."""
    degrees = {n: g.sh_degree for n, g in zip(names, parts)}
    if len(set(degrees.values())) > 1:
        raise PartitionError(f"the parts have different SH degrees ({degrees}): train them with one --sh-degree")
    common = set.intersection(*(set(g.extra) for g in parts)) if parts else set()
    cat = lambda attr: np.concatenate([getattr(g, attr) for g in parts])
    return GaussianPly(means=cat("means"), scales=cat("scales"), quats=cat("quats"), opacities=cat("opacities"),
                       sh0=cat("sh0"), shN=cat("shN"), extra={k: np.concatenate([g.extra[k] for g in parts])
                                                               for k in sorted(common)})


class PlyRenderer:
    """Renders a GaussianPly for the cameras of a dataset with the training rasterizer, in
    the shape spirula/engine/splat/evaluate.py's ``evaluate`` takes (``dataset``, ``render(i)``,
    ``recentre_appearance()``). Images [H, W, 3] float32 in [0, 1] before clipping."""

    def __init__(self, gpu, g: GaussianPly, dataset):
        from ..splat.camera_table import camera_table
        from ..splat.param_layout import pack
        from ..splat.render import Rasterizer

        self.gpu, self.dataset, self.sh_degree = gpu, dataset, g.sh_degree
        rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, self.sh_degree)
        self.n = len(rows)
        self.params = gpu.upload(rows, "splat.params")
        self.cams = gpu.upload(camera_table(dataset.cameras), "cameras")
        self.raster = Rasterizer(gpu, self.sh_degree)

    def render(self, index: int) -> np.ndarray:
        from ..splat.camera_table import View

        cam = self.dataset.cameras[index]
        return self.raster.render(self.params, self.n, self.cams, View(index, cam.width, cam.height), self.sh_degree)

    def recentre_appearance(self) -> bool:
        return False


def evaluate_ply(g: GaussianPly, dataset_path: Path, names: list[str], max_size: int, device: str,
                 out_dir: Path | None = None) -> dict:
    """{'psnr', 'ssim', 'views'} of ``g`` over the images ``names`` of the dataset at
    ``dataset_path`` loaded at ``max_size`` (spirula/engine/splat/evaluate.py's protocol).
    PartitionError when a held-out image is not in the dataset."""
    from ..device import get_gpu
    from ..ingest import load_dataset
    from ..splat.evaluate import evaluate

    dataset = load_dataset(dataset_path, max_size)
    index = {c.name: i for i, c in enumerate(dataset.cameras)}
    missing = [n for n in names if n not in index]
    if missing:
        raise PartitionError(f"{dataset_path}: held-out images of the partition are not in the dataset: {missing[:5]}")
    renderer = PlyRenderer(get_gpu(device), g, dataset)
    return evaluate(renderer, [index[n] for n in names], out_dir)
