#!/usr/bin/env bash
# Issue 8 on the lent H200: where a step's time goes (benchmarks/step_overhead.py), timed
# 7,000-step runs (ours, and gsplat on the datasets named in GSPLAT), and the raster bench
# with its memory-traffic floors. Carry .gpu (slangpy, gsplat wheel, .gpu/data).
#   SPIRULA_COMMIT=<sha> RUNS="fox office_chair mouse" GSPLAT="mouse" bash benchmarks/h200_lean.sh
set -u
source .gpu/gpu-env.sh
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
out=${OUT:-/tmp}; errs=$out/errors.log
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
for d in ${OVERHEAD:-fox office_chair mouse}; do
  for dev in ${OVERHEAD_DEVICES:-vulkan}; do
    timeout 120 python3 benchmarks/step_overhead.py --data ".gpu/data/$d" --device $dev 2>>"$errs" | grep '^RESULT ' | cut -c8- | tee -a "$out/overhead.jsonl" | cut -c1-200
  done
done
for d in ${RUNS:-}; do
  timeout 150 python3 benchmarks/train_bench.py --trainer ours-vulkan --data ".gpu/data/$d" --seed 0 --steps ${STEPS:-7000} --vram 2>>"$errs" | grep '^RESULT ' | cut -c8- | tee -a "$out/results.jsonl" | cut -c1-330
done
if [ -n "${RASTER:-}" ]; then
  timeout 200 python3 -m engine.cli bench raster --device vulkan --json "$out/raster-vulkan.json" > "$out/raster-vulkan.txt" 2>> "$errs" || echo "FAILED bench raster"
  grep -A40 "memory-traffic floors" "$out/raster-vulkan.txt" | head -45
fi
for d in ${GSPLAT:-}; do
  timeout 300 python3 benchmarks/train_bench.py --trainer gsplat --data ".gpu/data/$d" --seed 0 --steps ${STEPS:-7000} --vram 2>>"$errs" | grep '^RESULT ' | cut -c8- | tee -a "$out/results.jsonl" | cut -c1-330
done
tail -5 "$errs"
