#!/usr/bin/env bash
# Issue 5: viewer frame time on the lent H200 (see shared/GPU.md), 1920x1080 with 1M and 3M
# synthetic Gaussians (SH 3), Vulkan and CUDA; target >= 60 fps at 1M. No window on that
# machine: a frame is the rasterizer forward pass + compose + frustums, ending where the
# swapchain copy would start (plus one run with --readback, the fallback path).
#   ../shared/tools/gpu-bundle.sh   (then run with carry [".gpu"])
#   bash benchmarks/h200_viewer.sh
# Results: BENCHMARKS.md (2026-11-30).
set -u
source .gpu/gpu-env.sh
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for dev in vulkan cuda; do
  for n in 1000000 3000000; do
    timeout 240 python3 benchmarks/viewer_bench.py --device $dev --gaussians $n --width 1920 --height 1080 \
      --frames 60 --warmup 5 2>> "$out/errors.log" | grep "^{" >> "$out/viewer.jsonl" || echo "FAILED viewer $dev $n"
  done
done
timeout 240 python3 benchmarks/viewer_bench.py --device vulkan --gaussians 1000000 --readback --frames 30 \
  2>> "$out/errors.log" | grep "^{" >> "$out/viewer.jsonl" || echo "FAILED viewer readback"
python3 - "$out/viewer.jsonl" <<'PY'
import json, sys
print(f"{'device':8s}{'gaussians':>11s}{'readback':>9s}{'isects':>12s}{'median ms':>11s}{'p90 ms':>9s}{'fps':>8s}")
for line in open(sys.argv[1]):
    r = json.loads(line)
    dev = "cuda" if "CUDA" in r["device"] or "cuda" in r["device"] else "vulkan"
    print(f"{dev:8s}{r['gaussians']:11d}{str(r['readback']):>9s}{r['intersections']:12d}{r['median_ms']:11.2f}"
          f"{r['p90_ms']:9.2f}{r['fps_median']:8.1f}")
PY
