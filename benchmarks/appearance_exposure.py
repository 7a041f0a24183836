"""Per-image appearance (issue 28 item 5): held-out PSNR with --appearance off / exposure /
affine / bilagrid, on a dataset as it is and with a synthetic exposure change (every other
training image times ``--gain``; held-out images untouched). Held-out views are scored with
the identity appearance (spirula/engine/splat/evaluate.py: ``psnr``) and, as quality_bench.py does,
on their right halves as rendered (``psnr_right``) and after an affine colour fitted on
their left halves (``psnr_right_fitted``: the protocol that does not depend on which
exposure the model's colours settled at). Prints one ``RESULT {json}`` line per run:

    python benchmarks/appearance_exposure.py --data .gpu/data/office_chair --steps 7000 --max-size 1000

Per run also: seconds per 1,000 steps (wall, the whole loop) and, with appearance on, the
effective gain of each training image's learned transform on its own undarkened colours,
sum(A x + b) / sum(x) (affine; the grid's cell average for bilagrid), as the ratio of the
darkened images' mean to the others', each training image's gain (``gains``, camera
order) with the lag-1 correlation of the undarkened ones (a video's auto exposure drifts
smoothly; noise does not), and for the one-cell modes ``psnr_neighbours``: held-out views
with the mean transform of the training frames on either side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from spirula.engine.config import TrainConfig  # noqa: E402
from spirula.engine.device import get_gpu  # noqa: E402
from spirula.engine.ingest import load_dataset  # noqa: E402
from spirula.engine.splat.evaluate import evaluate  # noqa: E402
from spirula.engine.splat.appearance import default_settings  # noqa: E402
from spirula.engine.splat.trainer import Trainer  # noqa: E402
from quality_bench import right_half_psnrs  # noqa: E402

# --app-* options: the appearance settings of a run (AppearanceSettings), default ones otherwise
OVERRIDES = {"lr": float, "reg": float, "start": int, "form": str, "reg_bias": float, "lr_final": float,
             "eps": float}


def effective_gains(trainer, colours: dict) -> dict:
    m = trainer.appearance.matrices().reshape(trainer.appearance.num_images, -1, 3, 4).mean(1)
    return {i: float((x @ m[i, :, :3].T + m[i, :, 3]).sum() / x.sum()) for i, x in colours.items()}


def neighbour_psnr(trainer, test: list[int], train: list[int]) -> float:
    """Mean held-out PSNR with each view's transform interpolated (by camera index, the
    frames' order in time for a video) between the nearest trained images before and after
    it (affine forms only): what a held-out frame's exposure is expected to be when it
    drifts smoothly in time."""
    from spirula.engine.splat.metrics import psnr

    m = trainer.appearance.matrices()[:, 0, 0, 0]
    out = []
    for i in test:
        lo, hi = max((j for j in train if j < i), default=None), min((j for j in train if j > i), default=None)
        w = 0.5 if lo is not None and hi is not None else 0.0
        mat = (1 - w) * m[lo if lo is not None else hi] + w * m[hi if hi is not None else lo]
        x = trainer.render(i)
        img = np.clip(x.reshape(-1, 3) @ mat[:, :3].T + mat[:, 3], 0.0, 1.0).reshape(x.shape).astype(np.float32)
        out.append(psnr(img, trainer.dataset.cameras[i].image.astype(np.float32) / 255.0))
    return float(np.mean(out))


def run(args, mode: str, condition: str, seed: int) -> dict:
    ds = load_dataset(Path(args.data), args.max_size)
    train, test = ds.split(8)
    dark = train[1::2] if condition == "exposure" else []
    colours = {i: ds.cameras[i].image.astype(np.float64) / 255.0 for i in train}
    for i in dark:
        ds.cameras[i].image = np.clip(ds.cameras[i].image * args.gain + 0.5, 0, 255).astype(np.uint8)
    cfg = TrainConfig(steps=args.steps, seed=seed, checkpoint_every=0, appearance=mode, log_interval=100)
    t = Trainer(get_gpu(args.device), ds, train, cfg)
    changed = {k: conv(getattr(args, "app_" + k)) for k, conv in OVERRIDES.items()
               if getattr(args, "app_" + k) is not None}
    if t.appearance is not None:
        for k, v in changed.items():
            setattr(t.appearance.settings, k, v)
    t0 = time.perf_counter()
    t.train()
    secs = time.perf_counter() - t0
    ev = evaluate(t, test)
    halves = [right_half_psnrs(np.clip(t.render(i), 0.0, 1.0), ds.cameras[i].image.astype(np.float32) / 255.0)
              for i in test]
    settings = vars(t.appearance.settings) if t.appearance is not None else {}
    out = {"dataset": Path(args.data).name, "condition": condition, "appearance": mode, "seed": seed,
           "settings": {k: settings[k] for k in OVERRIDES if k in settings},
           "steps": args.steps, "max_size": args.max_size, "psnr": ev["psnr"], "ssim": ev["ssim"],
           "psnr_right": float(np.mean([a for a, _ in halves])),
           "psnr_right_fitted": float(np.mean([b for _, b in halves])),
           "sec_per_1k_steps": 1000 * secs / args.steps, "num_gaussians": t.model.n,
           "train_images": len(train), "held_out": len(test)}
    if t.appearance is not None:
        g = effective_gains(t, colours)
        rest = [g[i] for i in train if i not in dark]
        out["gain_mean_undarkened"] = float(np.mean(rest))
        out["gain_spread_undarkened"] = float(np.std(rest))
        # smooth in time (a video's auto exposure) or noise: the neighbours' correlation
        seq = np.array([g[i] for i in train if i not in dark])
        out["gain_lag1_corr"] = float(np.corrcoef(seq[:-1], seq[1:])[0, 1])
        out["gains"] = [round(g[i], 4) for i in train]
        if t.appearance.cells == 1:
            out["psnr_neighbours"] = neighbour_psnr(t, test, train)
        if dark:
            out["gain_ratio_darkened"] = float(np.mean([g[i] for i in dark]) / np.mean(rest))
    t.release()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, default=7000)
    p.add_argument("--max-size", type=int, default=1000)
    p.add_argument("--modes", default="off,exposure,affine,bilagrid")
    p.add_argument("--conditions", default="none,exposure")
    p.add_argument("--seeds", default="0")
    p.add_argument("--gain", type=float, default=0.7)
    p.add_argument("--device", default="vulkan")
    defaults = vars(default_settings("affine", 2500))
    for k, conv in OVERRIDES.items():
        p.add_argument("--app-" + k.replace("_", "-"), dest="app_" + k, default=None,
                       help=f"appearance setting {k} (affine's default: {defaults[k]})")
    args = p.parse_args()
    for seed in (int(s) for s in args.seeds.split(",")):
        for condition in args.conditions.split(","):
            for mode in args.modes.split(","):
                print("RESULT " + json.dumps(run(args, mode, condition, seed)), flush=True)


if __name__ == "__main__":
    main()
