#!/usr/bin/env bash
# Issue 8 on the lent H200, fourth session (the fused projection backward + Adam), in three
# calls on one warm machine (each under the device tool's 10-minute limit):
#   PART=A: where a step's time goes (fox), quality seeds 1-2 side by side, then timed
#           7,000-step runs one at a time: ours (Vulkan) and gsplat on the three datasets,
#           ours on CUDA (fox).                      carry .gpu/{gpu-env.sh,debs,slangpy.tar.xz,wheels,torch_ext.tar.xz,data}
#   PART=B: 30,000 steps on fox (ours, gsplat); 10M Gaussians at SH 3 in bfloat16 moments.
#   PART=C: native resolution (fox, 1902 x 1067): ours and gsplat, 7,000 steps.
#                                                    B, C carry .gpu/data/fox and .gpu/native instead of .gpu/data
#   PART=D: after the fixes (batched Adam loads, sliced densify temporary): the step split
#           (fox), timed 7,000-step runs of ours and gsplat, 10M Gaussians.   carry as A
set -u
part=${PART:?PART=A, B, C or D}
export SPIRULA_COMMIT=${SPIRULA_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
case $part in
A)
  (source .gpu/gpu-env.sh; timeout 90 python3 benchmarks/step_overhead.py --data .gpu/data/fox --device vulkan \
     2>>"$OUT/errors.log" | grep '^RESULT ' | cut -c8- | tee -a "$OUT/overhead.jsonl" | cut -c1-400)
  PAR="fox:1:ours-vulkan fox:2:ours-vulkan office_chair:1:ours-vulkan office_chair:2:ours-vulkan mouse:1:ours-vulkan mouse:2:ours-vulkan" \
  SEQ="fox:0:ours-vulkan office_chair:0:ours-vulkan mouse:0:ours-vulkan fox:0:gsplat office_chair:0:gsplat mouse:0:gsplat fox:0:ours-cuda" \
  STEPS=7000 BUDGET_S=${BUDGET_S:-480} bash benchmarks/h200_mixed.sh ;;
B)
  SEQ="fox:0:ours-vulkan fox:0:gsplat" STEPS=30000 BUDGET_S=${BUDGET_S:-420} bash benchmarks/h200_mixed.sh
  (source .gpu/gpu-env.sh; timeout 150 python3 benchmarks/large_model.py --data .gpu/data/fox --gaussians 10000000 \
     --steps 300 --adam-moments bf16 --vram 2>>"$OUT/errors.log" | grep '^RESULT ' | cut -c8- | tee -a "$OUT/large.jsonl" | cut -c1-600) ;;
D)
  (source .gpu/gpu-env.sh; timeout 90 python3 benchmarks/step_overhead.py --data .gpu/data/fox --device vulkan \
     2>>"$OUT/errors.log" | grep '^RESULT ' | cut -c8- | tee -a "$OUT/overhead.jsonl" | cut -c1-300)
  SEQ="fox:0:ours-vulkan office_chair:0:ours-vulkan mouse:0:ours-vulkan fox:0:gsplat office_chair:0:gsplat mouse:0:gsplat" \
  STEPS=7000 BUDGET_S=${BUDGET_S:-330} bash benchmarks/h200_mixed.sh | cut -c1-330
  (source .gpu/gpu-env.sh; timeout 120 python3 benchmarks/large_model.py --data .gpu/data/fox --gaussians 10000000 \
     --steps 300 --adam-moments bf16 --vram 2>>"$OUT/errors.log" | grep '^RESULT ' | cut -c8- | tee -a "$OUT/large.jsonl" | cut -c1-900) ;;
C)
  (source .gpu/gpu-env.sh; export TORCH_CUDA_ARCH_LIST=9.0
   for tr in ours-vulkan gsplat; do
     timeout 240 python3 benchmarks/train_bench.py --trainer $tr --data .gpu/native/fox_native --seed 0 --steps 7000 --vram \
       2>>"$OUT/errors.log" | grep '^RESULT ' | cut -c8- | tee -a "$OUT/results.jsonl" | cut -c1-330
   done) ;;
esac
tail -4 "$OUT/errors.log" 2>/dev/null
