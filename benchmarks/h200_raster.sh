#!/usr/bin/env bash
# Issue 4 benchmarks on the lent H200 (see shared/GPU.md): `spirula bench raster` on Vulkan
# and CUDA, gsplat 1.5.3 on the same synthetic scene in the same call, and `bench train`
# with the profiler's JSON report. Carry .gpu (slangpy bundle + the gsplat wheel):
#   ../shared/tools/gpu-bundle.sh gsplat-1.5.3-py3-none-any.whl   (then run with carry [".gpu"])
#   bash benchmarks/h200_raster.sh
# Writes JSON under $OUT and prints a table last. Results: BENCHMARKS.md (2026-11-30).
set -u
source .gpu/gpu-env.sh
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for dev in vulkan cuda; do
  timeout 240 python3 -m engine.cli bench raster --device $dev --json "$out/raster-$dev.json" > /dev/null 2>> "$out/errors.log" \
    || echo "FAILED bench raster $dev"
done
t=$(date +%s)
timeout 300 python3 benchmarks/raster_bench_gsplat.py --json "$out/raster-gsplat.json" > /dev/null 2>> "$out/errors.log" \
  || echo "FAILED gsplat raster"
echo "gsplat build + bench: $(( $(date +%s) - t )) s"
timeout 240 python3 -m engine.cli --profile --profile-json "$out/profile-train-vulkan.json" bench train --device vulkan \
  --steps 2000 --json "$out/train-vulkan.json" > /dev/null 2> "$out/train-vulkan.stderr" || echo "FAILED bench train"
tail -60 "$out/train-vulkan.stderr"
python3 - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(n):
    p = out / n
    return json.loads(p.read_text()) if p.exists() else None
rows = {d: load(f"raster-{d}.json") for d in ("vulkan", "cuda")}
g = load("raster-gsplat.json")
stages = ["projection", "binning_sort", "rasterize_fwd", "loss", "rasterize_bwd", "projection_bwd_adam"]
print(f"{'stage (ms, median)':24s}" + "".join(f"{d:>12s}" for d in rows) + f"{'gsplat':>12s}")
for s in stages:
    line = f"{s:24s}" + "".join(f"{(r['stages_ms'][s] if r else float('nan')):12.3f}" for r in rows.values())
    line += f"{(g['stages_ms_from_torch_profiler'].get(s, float('nan')) if g else float('nan')):12.3f}"
    print(line)
for key in ("iteration_gpu_ms", "iteration_wall_ms", "intersections"):
    print(f"{key:24s}" + "".join(f"{(r[key] if r else float('nan')):12.3f}" for r in rows.values()))
if g:
    print(f"gsplat forward {g['forward_ms']:.3f} ms, backward {g['backward_ms']:.3f} ms, adam {g['adam_ms']:.3f} ms, "
          f"intersections {g['intersections']}")
PY
