#!/usr/bin/env bash
# Issue 8 on the lent H200, seventh session: the radix sort's pass in three dispatches
# (radix_offsets scans each digit's row of tile counts), and two Adam levers to measure.
#   PART=A: fox's step split after 15,000 steps: the default build, project_backward_adam
#           with 16 and 4 words per thread in flight (ADAM_BATCH), then a run with bfloat16
#           moments; quality seeds 0-2 of the three datasets with bfloat16 moments side by side
#           (7,000 steps).       carry .gpu/{gpu-env.sh,debs,slangpy.tar.xz,wheels,data}
#   PART=D: fox's step split after 15,000 steps: project_backward_adam with 32 words in
#           flight; the radix sort and scan on tiles of 256 x 8 and 256 x 4 items (16 default).
#   PART=E: rasterize_backward with 1 and 4 pixels per thread against the default 2, on fox
#           after 15,000 steps and mouse after 7,000 (calls 3 and 4 ran '2,4' against a
#           default of 1; call 3 with a rewritten forward taking PY too, since reverted).
#   PART=B: 30,000 steps on DATASET (fox, office_chair or mouse), gsplat first, then ours,
#           one at a time.       carry as A plus .gpu/torch_ext.tar.xz
#   PART=C: `spirula bench raster` (2M Gaussians) with memory-traffic floors, then a timed
#           7,000-step fox run through slangpy's CUDA backend.
# OURS_ARGS (e.g. "--adam-moments bf16"), when exported, goes to every run of our trainer
# that h200_mixed.sh makes (PART=A sets its own).
set -u
part=${PART:?PART=A, B, C, D or E}
export SPIRULA_COMMIT=${SPIRULA_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
source benchmarks/h200_common.sh  # compare()
case $part in
A)
  compare "fox:15000" --variants adam:ADAM_BATCH=16,adam:ADAM_BATCH=4  # 16 kept (was 8)
  compare "fox:15000" --adam-moments bf16
  PAR="fox:0:ours-vulkan fox:1:ours-vulkan fox:2:ours-vulkan office_chair:0:ours-vulkan office_chair:1:ours-vulkan office_chair:2:ours-vulkan mouse:0:ours-vulkan mouse:1:ours-vulkan mouse:2:ours-vulkan" \
  OURS_ARGS="--adam-moments bf16" STEPS=7000 BUDGET_S=${BUDGET_PAR:-220} NO_GSPLAT=1 bash benchmarks/h200_mixed.sh | cut -c1-260 ;;
D)
  compare "fox:15000" --variants adam:ADAM_BATCH=32 --sort-items 8,4 ;;
E)
  compare "fox:15000 mouse:7000" --pixels-per-thread 1,4 ;;
B)
  SEQ="${DATASET:?DATASET=fox, office_chair or mouse}:0:gsplat $DATASET:0:ours-vulkan" STEPS=30000 BUDGET_S=${BUDGET_S:-520} \
    bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
C)
  (source .gpu/gpu-env.sh
   timeout ${RASTER_S:-100} python3 -m engine.cli bench raster --device vulkan --json "$OUT/raster-vulkan.json" > "$OUT/raster.txt" \
     2>> "$OUT/errors.log" || echo "FAILED bench raster"
   tail -30 "$OUT/raster.txt")
  SEQ="fox:0:ours-cuda" STEPS=7000 BUDGET_S=${BUDGET_S:-200} NO_GSPLAT=1 bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
esac
tail -4 "$OUT/errors.log" 2>/dev/null
