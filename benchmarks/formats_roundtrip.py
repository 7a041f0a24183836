"""Splat formats (issue 24): the held-out PSNR a trained model keeps through each format,
its bytes per Gaussian, and what fine-tuning from an imported file gains.

Per dataset: train ``--steps`` (software Vulkan is fine at small sizes), write the model as
a 3DGS PLY, convert that PLY to every format (spirula/engine/io/formats.py write_any), and score
each file by the same path a user's file takes: a Trainer started from it
(``TrainConfig.init_file``, `spirula train --init`) rendering the held-out views at step 0
(spirula/engine/splat/evaluate.py). The PLY itself is the reference (lossless: its PSNR is the
trained model's). Then fine-tune ``--finetune-steps`` from the SPZ file and score again.
Prints one ``RESULT {json}`` line per dataset:

    python benchmarks/formats_roundtrip.py --data ../shared/data/book --steps 1000 --max-size 240
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spirula.engine.config import TrainConfig  # noqa: E402
from spirula.engine.device import get_gpu  # noqa: E402
from spirula.engine.ingest import load_dataset  # noqa: E402
from spirula.engine.io import formats  # noqa: E402
from spirula.engine.jobs.train import export_ply  # noqa: E402
from spirula.engine.splat.evaluate import evaluate  # noqa: E402
from spirula.engine.splat.trainer import Trainer  # noqa: E402


def score(gpu, ds, train, test, cfg: TrainConfig, path: Path) -> float:
    t = Trainer(gpu, ds, train, replace(cfg, init_file=str(path), steps=0))
    psnr = evaluate(t, test)["psnr"]
    t.release()
    return psnr


def run(args) -> dict:
    gpu = get_gpu(args.device)
    ds = load_dataset(Path(args.data), args.max_size)
    train, test = ds.split(8)
    cfg = TrainConfig(steps=args.steps, seed=args.seed, checkpoint_every=0, log_interval=100, strategy=args.strategy)
    t = Trainer(gpu, ds, train, cfg)
    t0 = time.perf_counter()
    t.train()
    out = {"dataset": Path(args.data).name, "steps": args.steps, "max_size": args.max_size, "seed": args.seed,
           "strategy": t.strategy, "train_s": round(time.perf_counter() - t0, 1), "held_out": len(test),
           "trained_psnr": evaluate(t, test)["psnr"]}
    work = Path(tempfile.mkdtemp(prefix="spirula-formats-"))
    ply = work / "model.ply"
    out["gaussians"] = export_ply(t, ply)
    t.release()
    g = formats.read_any(ply, warn=False)
    base = score(gpu, ds, train, test, cfg, ply)
    out["formats"] = {"ply": {"bytes_per_splat": ply.stat().st_size / len(g), "psnr": base, "delta_db": 0.0}}
    files = {}
    for fmt in ("spz", "sog", "compressed-ply", "splat"):
        path = work / f"model{formats.EXTENSIONS[fmt]}"
        t1 = time.perf_counter()
        size = formats.write_any(path, g, fmt)
        write_s = time.perf_counter() - t1
        p = score(gpu, ds, train, test, cfg, path)
        files[fmt] = path
        out["formats"][fmt] = {"bytes_per_splat": size / len(g), "psnr": p, "delta_db": p - base,
                               "write_s": round(write_s, 2)}
    spz3 = work / "model_v3.spz"
    size = formats.write_any(spz3, g, "spz", spz_version=3)
    out["formats"]["spz-v3"] = {"bytes_per_splat": size / len(g)}
    if args.finetune_steps:
        ft = Trainer(gpu, ds, train, replace(cfg, init_file=str(files["spz"]), steps=args.finetune_steps))
        ft.train()
        after = evaluate(ft, test)["psnr"]
        ft.release()
        imported = out["formats"]["spz"]["psnr"]
        out["finetune"] = {"from": "spz", "steps": args.finetune_steps, "imported_psnr": imported,
                           "finetuned_psnr": after, "gain_db": after - imported}
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--finetune-steps", type=int, default=500)
    p.add_argument("--max-size", type=int, default=240)
    p.add_argument("--strategy", default="adc")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="vulkan")
    print("RESULT " + json.dumps(run(p.parse_args())), flush=True)


if __name__ == "__main__":
    main()
