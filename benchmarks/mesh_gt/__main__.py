"""`python -m benchmarks.mesh_gt run|generate|score ...` (see benchmarks/mesh_gt/README.md)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from .scenes import SCENES, SIZES


def _scenes(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in SCENES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown scene(s) {', '.join(bad) or '(none)'}: choose from {','.join(SCENES)}")
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.mesh_gt",
                                description="Ground-truth mesh benchmark (issue 47, item 4)")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="generate the scenes, `spirula run` each, score the meshes, write results.json")
    g = sub.add_parser("generate", help="only write the scenes' datasets (and ground truth)")
    for q in (r, g):
        q.add_argument("--size", choices=list(SIZES), default="ci")
        q.add_argument("--scenes", type=_scenes, default=list(SCENES), help="comma-separated, from a,b,c,d,e (default all)")
        q.add_argument("--out", type=Path, required=True, help="output folder (one subfolder per scene)")
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                       help="views rendered at once (worker processes; default: the CPU count)")
    r.add_argument("--device", choices=["vulkan", "cuda"], default=None, help="`spirula run --device` (default: its own)")
    r.add_argument("--mesh-args", default="", help="extra `spirula run` options, one shell-quoted string "
                                                    "(e.g. \"--mesh-bounds scene\")")
    s = sub.add_parser("score", help="score one mesh file against a generated scene's ground truth")
    s.add_argument("mesh", type=Path, help="PLY / GLB / OBJ")
    s.add_argument("data", type=Path, help="the scene's dataset folder (holding gt.json and gt.npz)")
    s.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    if a.cmd == "run":
        from .run import run

        doc = run(a.size, a.scenes, a.out, a.device, shlex.split(a.mesh_args), a.seed, jobs=a.jobs)
        return 0 if all("score" in r for r in doc["scenes"]) else 1
    if a.cmd == "generate":
        from .run import dataset

        for name in a.scenes:
            dataset(name, a.size, a.out / name / "data", a.seed, jobs=a.jobs)
        return 0
    from .score import score_file
    from .writer import read_ground_truth

    for path in (a.mesh, a.data / "gt.json", a.data / "gt.npz"):
        if not path.is_file():
            print(f"{path}: not found", file=sys.stderr)
            return 1
    try:
        scores = score_file(a.mesh, read_ground_truth(a.data), a.seed)
    except Exception as e:  # trimesh's reader raises many kinds: one line naming the file
        print(f"{a.mesh}: cannot be scored: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(scores, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
