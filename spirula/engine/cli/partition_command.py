"""`spirula partition split|train|merge` (registered by spirula/engine/cli/main.py): a scene bigger
than one GPU, split into parts on its ground plane, the parts trained as Ray tasks (or one
after another without Ray), merged by ownership. The work is spirula/engine/partition's; this
module parses and prints (one progress bar per part)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..config import DatasetConfig, RunConfig, TrainConfig
from ..partition.run_parts import FIXED_SETTINGS as PARTITION_FIXED  # what `partition train` decides itself
from .options import add_device_option, add_settings_options, float_range, image_side, int_at_least, train_config_of_args


def add_parser(sub) -> None:
    p = sub.add_parser("partition", help="split a big scene into parts, train them (Ray), merge them",
                       description="Scenes bigger than one GPU: `split` writes each part as a dataset and "
                                   "partition.json, `train` trains every part (a Ray task each; without Ray one "
                                   "after another), `merge` keeps each part's own Gaussians and scores the whole.")
    steps = p.add_subparsers(dest="partition_command", required=True)
    s = steps.add_parser("split", help="split a COLMAP dataset into parts (no image is copied)")
    s.add_argument("dataset", type=Path, help="COLMAP dataset folder (sparse model with points + images)")
    s.add_argument("-o", "--output", type=Path, required=True, help="parts folder (partition.json, part_00/, ...)")
    budget = s.add_mutually_exclusive_group(required=True)
    budget.add_argument("--parts", type=int_at_least(1), help="this many parts")
    budget.add_argument("--max-gaussians-per-part", type=int_at_least(1), help="split until each part's estimate fits")
    budget.add_argument("--vram", type=float_range(0.0, inclusive=False), metavar="GIB",
                        help="split until each part's estimated VRAM fits (GiB)")
    s.add_argument("--overlap", type=float_range(0.0), default=0.15,
                   help="each part's training region grows by this fraction of its cell on every side (default 0.15)")
    s.add_argument("--visibility", type=float_range(0.0, inclusive=False), default=0.25,
                   help="a camera outside a part joins it when this share of the SfM points it sees lie in the "
                        "cell (default 0.25)")
    s.add_argument("--context-views", type=_context_views, default=None, metavar="auto|K",
                   help="SfM points outside a part's region that K of its cameras see join its initial "
                        "points, so what its images show beyond the region is not faked inside it; the "
                        "merge drops them again. Default auto: 2 for an orbit capture (around an object "
                        "every view sees all of it), 0 (the region's points only: less VRAM) otherwise")
    s.add_argument("--min-cameras", type=int_at_least(1), default=8, help="fewest cameras a part may have (default 8)")
    s.add_argument("--eval-every", type=int_at_least(0), default=DatasetConfig.eval_every,
                   help=f"hold out every k-th image of the whole scene (default {DatasetConfig.eval_every})")
    s.add_argument("--scene-gaussians", type=int_at_least(1), default=TrainConfig.mcmc_budget,
                   help=f"the whole scene's model size the estimates scale (default {TrainConfig.mcmc_budget:,})")
    s.add_argument("--max-size", type=image_side, default=DatasetConfig.max_size,
                   help="training image side for the VRAM estimate (default %(default)s)")
    s.add_argument("--force", action="store_true", help="replace a partition already in the folder")

    t = steps.add_parser("train", help="train every part (a Ray task each); a rerun resumes")
    t.add_argument("parts", type=Path, help="parts folder of `spirula partition split`")
    t.add_argument("--address", default=None,
                   help="Ray cluster to join (ray://host:port, host:port or auto); default: a local Ray "
                        "instance started in this process")
    t.add_argument("--gpus-per-part", type=float_range(0.0), default=None,
                   help="GPUs each part's task asks for (a fraction shares one GPU; default 1 where there are GPUs)")
    t.add_argument("--no-ray", action="store_true", help="train the parts one after another in this process")
    t.add_argument("--steps-rule", choices=["cameras", "gaussians"], default="cameras",
                   help="a part's steps: the whole scene's times its share of the training cameras (each Gaussian "
                        "gets the whole run's optimisation steps; default) or of the Gaussians")
    # the settings table's options (spirula/engine/settings.py): --steps and --max-gaussians are the
    # whole scene's (each part trains its share: its steps by --steps-rule, MCMC's budget)
    add_settings_options(t, "partition", exclude=tuple(PARTITION_FIXED))
    add_device_option(t)

    m = steps.add_parser("merge", help="merge the trained parts: one PLY, held-out metrics of the whole scene")
    m.add_argument("parts", type=Path, help="parts folder, every part trained")
    m.add_argument("-o", "--output", type=Path, required=True, help="project folder (splat.ply, metrics.json, eval/)")
    m.add_argument("--max-size", type=image_side, default=None, help="held-out image side (default: the training size)")
    m.add_argument("--finetune-steps", type=_auto_or_count, default=None, metavar="N|auto",
                   help="then train the merged model N steps over every training camera, so the parts agree "
                        "across the cuts (needs the whole model and all images in one device's memory). Default "
                        "auto: 5%% of the parts' steps (at least 100) when the parts trained with an orbit's context and fit the device, else none; 0: none")
    add_device_option(m, None)


def _auto_or_count(text: str):
    """argparse type: auto (None) or a count >= 0."""
    if text.strip().lower() == "auto":
        return None
    return int_at_least(0)(text)


def _context_views(text: str):
    """argparse type of --context-views: auto (None) or a count >= 0."""
    if text.strip().lower() == "auto":
        return None
    return int_at_least(0)(text)


def run(args) -> int:
    return {"split": _split, "train": _train, "merge": _merge}[args.partition_command](args)


def _split(args) -> int:
    from ..partition.parts import split_dataset
    from ..partition.split import SplitSettings

    settings = SplitSettings(parts=args.parts, max_gaussians_per_part=args.max_gaussians_per_part,
                             vram_gib=args.vram, overlap=args.overlap, visibility=args.visibility,
                             min_cameras=args.min_cameras, eval_every=args.eval_every,
                             context_views=args.context_views,
                             total_gaussians=args.scene_gaussians, max_size=args.max_size or 1 << 20)
    try:
        settings.check()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from ..jobs.lock import project_lock

    with project_lock(args.output, "spirula partition split", on_note=_note):
        split_dataset(args.dataset, args.output, settings, force=args.force)
    return 0


def _note(text: str) -> None:
    print(text, file=sys.stderr)


def run_config(args) -> RunConfig:
    """The whole scene's RunConfig of `partition train`'s options."""
    return train_config_of_args(args, "partition", exclude=tuple(PARTITION_FIXED), fixed=PARTITION_FIXED)


class Bars:
    """spirula.engine.messages -> one tqdm bar per part (stderr), warnings as lines."""

    def __init__(self):
        self.bars = {}

    def __call__(self, msg) -> None:
        from tqdm import tqdm

        from ..messages import Done, StageFinished, StageProgress, StageStarted, Warning

        if isinstance(msg, StageStarted):
            # stacked bars move the cursor up between lines: in a log file (not a terminal) that
            # leaves escape codes in the text, so there each bar prints plain lines
            tty = sys.stderr.isatty()
            self.bars[msg.stage] = tqdm(total=msg.total, desc=msg.stage, unit="step",
                                        position=len(self.bars) if tty else None, dynamic_ncols=True,
                                        leave=True, mininterval=0.1 if tty else 10.0)
        elif isinstance(msg, StageProgress) and msg.stage in self.bars:
            bar = self.bars[msg.stage]
            bar.update(msg.done - bar.n)
            bar.set_postfix_str(msg.detail)
        elif isinstance(msg, StageFinished) and msg.stage in self.bars:
            bar = self.bars[msg.stage]
            s = msg.summary
            what = "already trained" if msg.cached else ("done" if s.get("done") else "stopped")
            if s.get("step") is not None:
                bar.update(s["step"] - bar.n)
            bar.set_postfix_str(f"{what}, {s.get('gaussians') or 0:,} Gaussians, peak {s.get('peak_vram_mib') or 0:.0f} MiB")
        elif isinstance(msg, Warning):
            tqdm.write(f"warning: {msg.text}" if not msg.text.startswith("warning") else msg.text)
        elif isinstance(msg, Done):
            for bar in self.bars.values():
                bar.close()


def _train(args) -> int:
    from ..jobs.lock import project_lock
    from ..partition.run_parts import train_parts
    from . import stopping

    bars = Bars()
    stop = stopping.current()
    cfg = run_config(args)
    with project_lock(args.parts, "spirula partition train", on_note=_note), stop.between_steps(print):
        out = train_parts(args.parts, cfg, address=args.address, emit=bars, should_stop=stop,
                          gpus_per_part=args.gpus_per_part, use_ray=not args.no_ray,
                          steps_rule=args.steps_rule)
    failed = [k for k, v in out["parts"].items() if v.get("error")]
    if failed:
        for k in failed:
            print(f"error: {k}: {out['parts'][k]['error']}", file=sys.stderr)
        return 1
    if out["stopped"]:
        kept = ("each unfinished part checkpointed the step it reached" if cfg.train.checkpoint_every
                else "no part was checkpointed (--checkpoint-every 0)")
        print(f"stopped ({stop.name}): {kept}; rerun the same command to continue them")
        return stop.exit_code if stop() else 0
    else:
        print(f"every part trained: `spirula partition merge {args.parts} -o <project>`")
    return 0


def _merge(args) -> int:
    from ..partition.merge import merge_parts

    from ..jobs.lock import project_lock

    with project_lock(args.output, "spirula partition merge", on_note=_note):
        m = merge_parts(args.parts, args.output, max_size=args.max_size, device=args.device,
                        finetune_steps=args.finetune_steps)
    kept = ", ".join(f"{k} {v['kept']:,}/{v['trained']:,}" for k, v in m["parts"].items())
    print(f"wrote {args.output / 'splat.ply'} ({m['num_gaussians']:,} Gaussians; kept {kept})")
    if m.get("psnr") is not None:
        if m.get("owned_psnr") is not None:
            print(f"held-out PSNR before the fine-tune {m['owned_psnr']:.2f} dB")
        print(f"held-out PSNR {m['psnr']:.2f} dB, SSIM {m['ssim']:.4f} over {m['held_out']} views of the whole scene")
    return 0
