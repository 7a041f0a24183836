"""The `spirula` command (no Qt): `spirula train <dataset> -o <project>`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .config import DatasetConfig, RunConfig, TrainConfig
from .errors import SpirulaError


def _train_parser(sub) -> None:
    d, t = DatasetConfig(), TrainConfig()
    p = sub.add_parser("train", help="train 3D Gaussians on a COLMAP or transforms.json dataset")
    p.add_argument("dataset", type=Path, help="dataset folder (COLMAP sparse model + images, or transforms.json)")
    p.add_argument("-o", "--output", type=Path, required=True, help="project folder for splat.ply, metrics.json, eval/")
    p.add_argument("--steps", type=int, default=t.steps, help=f"training steps (default {t.steps})")
    p.add_argument("--max-size", type=int, default=d.max_size, help=f"longer image side in px (default {d.max_size})")
    p.add_argument("--eval-every", type=int, default=d.eval_every, help="hold out every k-th image (0 = none; default 8)")
    p.add_argument("--eval-interval", type=int, default=t.eval_interval, help="evaluate every k steps (0 = at the end)")
    p.add_argument("--sh-degree", type=int, default=t.sh_degree, choices=range(4), help="max SH degree (default 3)")
    p.add_argument("--seed", type=int, default=t.seed)
    p.add_argument("--max-gaussians", type=int, default=t.max_gaussians)
    p.add_argument("--init-points", type=int, default=t.init_random_points,
                   help=f"random initial points when the dataset has none (default {t.init_random_points:,})")
    p.add_argument("--device", choices=["vulkan", "cuda", "cpu"], default="vulkan", help="GPU backend (default vulkan)")


def _progress_bar(total: int):
    from tqdm import tqdm

    bar = tqdm(total=total, unit="step", dynamic_ncols=True)

    def update(p) -> None:
        bar.update(p.step - bar.n)
        bar.set_postfix_str(f"loss {p.loss:.4f}  gaussians {p.num_gaussians:,}  {p.steps_per_sec:.1f} steps/s")

    return bar, update


def cmd_train(args) -> int:
    from .train_job import run_training

    cfg = RunConfig(device=args.device, dataset=DatasetConfig(max_size=args.max_size, eval_every=args.eval_every),
                    train=TrainConfig(steps=args.steps, eval_interval=args.eval_interval, sh_degree=args.sh_degree,
                                      seed=args.seed, max_gaussians=args.max_gaussians,
                                      init_random_points=args.init_points))
    bar, update = _progress_bar(cfg.train.steps)
    try:
        metrics = run_training(args.dataset, args.output, cfg, on_progress=update,
                               on_message=lambda m: bar.write(m))
    finally:
        bar.close()
    if metrics["stopped_early"]:
        print(f"stopped at step {metrics['step']}: the model reached so far is in {args.output / 'splat.ply'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spirula", description="Spirula Studio: 3D Gaussian Splatting on any GPU")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command")
    _train_parser(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.ERROR, format="%(levelname)s %(message)s")
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return {"train": cmd_train}[args.command](args)
    except SpirulaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
