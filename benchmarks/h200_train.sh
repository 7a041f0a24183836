#!/usr/bin/env bash
# Benchmark training runs on the lent H200 (see shared/GPU.md). Carry .gpu (slangpy, gsplat
# wheel, prepared datasets under .gpu/data). Usage:
#   bash benchmarks/h200_train.sh "<datasets>" "<seeds>" <steps> "<trainers>"
# Appends one JSON line per run to $OUT/results.jsonl.
set -u
source .gpu/gpu-env.sh
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 SPIRULA_COMMIT=${SPIRULA_COMMIT:-unknown}
datasets=$1; seeds=$2; steps=$3; trainers=$4
out=${OUT:-/tmp}/results.jsonl
errs=${OUT:-/tmp}/errors.log
deadline=$(( $(date +%s) + ${BUDGET_S:-540} ))   # start no run after this
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [[ " $trainers " == *" gsplat "* ]]; then
  t=$(date +%s)
  python3 -c "import gsplat.cuda._backend as b; print('gsplat backend', b._C is not None)" 2>&1 | tail -1
  echo "gsplat build: $(( $(date +%s) - t )) s"
fi
for d in $datasets; do
  for s in $seeds; do
    for tr in $trainers; do
      left=$(( deadline - $(date +%s) ))
      if [ "$left" -lt 30 ]; then echo "SKIPPED $tr $d $s (time)"; continue; fi
      echo "=== $tr $d $s" >> "$errs"
      line=$(timeout "$left" python3 benchmarks/train_bench.py --trainer "$tr" --data ".gpu/data/$d" --seed "$s" --steps "$steps" --vram 2>>"$errs" | grep '^RESULT ' | cut -c8-)
      if [ -n "$line" ]; then echo "$line" >> "$out"; echo "$line"; else echo "FAILED $tr $d $s"; tail -5 "$errs"; fi
    done
  done
done
