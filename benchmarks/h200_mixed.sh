#!/usr/bin/env bash
# Quality runs side by side (GPU shared: PSNR/SSIM only), then timed runs one at a time.
#   PARITY="office_chair fox" PAR="fox:1:gsplat fox:1:ours-vulkan ..." SEQ="office_chair:0:gsplat ..." STEPS=7000 \
#     bash benchmarks/h200_mixed.sh
# PARITY first compares our renderer with gsplat's on the same random scene (benchmarks/parity_gsplat.py).
set -u
source .gpu/gpu-env.sh
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
out=$OUT/results.jsonl; errs=$OUT/errors.log
deadline=$(( $(date +%s) + ${BUDGET_S:-540} ))
if [ -z "${NO_GSPLAT:-}" ]; then  # NO_GSPLAT=1: only our trainer runs, skip gsplat's load
  if [ -f .gpu/torch_ext.tar.xz ]; then mkdir -p ~/.cache && tar -xJf .gpu/torch_ext.tar.xz -C ~/.cache; fi
  t=$(date +%s); python3 -c "import gsplat.cuda._backend as b; print('gsplat backend', b._C is not None)" 2>&1 | tail -1
  echo "gsplat build/load: $(( $(date +%s) - t )) s"
  [ -f .gpu/torch_ext.tar.xz ] || tar -C ~/.cache -cJf $OUT/torch_ext.tar.xz torch_extensions 2>/dev/null
fi
for d in ${PARITY:-}; do
  timeout 120 python3 benchmarks/parity_gsplat.py --data ".gpu/data/$d" 2>>"$errs" | tee -a "$OUT/parity.txt" || echo "FAILED parity $d"
done
one() { # dataset seed trainer extra...
  local d=$1 s=$2 tr=$3; shift 3
  local left=$(( deadline - $(date +%s) ))
  [ "$left" -lt 20 ] && { echo "SKIPPED $tr $d $s"; return; }
  local line
  [ "$tr" = gsplat ] || set -- "$@" ${OURS_ARGS:-}  # OURS_ARGS: extra train_bench options for our trainer
  line=$(timeout "$left" python3 benchmarks/train_bench.py --trainer "$tr" --data ".gpu/data/$d" --seed "$s" --steps "${STEPS:-7000}" "$@" 2>>"$errs.$tr.$d.$s" | grep '^RESULT ' | cut -c8-)
  if [ -n "$line" ]; then echo "$line" >> "$out"; echo "$line"; else echo "FAILED $tr $d $s"; tail -3 "$errs.$tr.$d.$s"; fi
  cat "$errs.$tr.$d.$s" >> "$errs"; rm -f "$errs.$tr.$d.$s"
}
for spec in ${PAR:-}; do IFS=: read -r d s tr <<<"$spec"; one "$d" "$s" "$tr" --concurrent & done
wait
for spec in ${SEQ:-}; do IFS=: read -r d s tr <<<"$spec"; one "$d" "$s" "$tr" --vram; done
