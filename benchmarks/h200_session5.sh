#!/usr/bin/env bash
# Issue 8 on the lent H200, fifth session (the rasterizer's subgroup culling and per-tile
# gradient sums). Carry .gpu/{gpu-env.sh,debs,slangpy.tar.xz,wheels,torch_ext.tar.xz,data}.
#   PART=A: where a step goes once densification has finished (fox after 15,000 steps,
#           office_chair after 7,000), with the rasterizer's link-time switches compared on
#           the same model; `spirula bench raster` (2M Gaussians) with memory-traffic floors.
#   PART=B: after dropping both switches (they lost): fox's step split after 15,000 steps with
#           the per-tile replay lengths; quality seeds 0-4 of office_chair and mouse side by
#           side; a timed 30,000-step fox run.
#   PART=C: the backward with 2 pixel rows per thread: BWD_ROWS 1 / 2 / 4 compared on fox
#           (after 15,000 steps) and office_chair (after 7,000); fox quality seeds 0-2 side by
#           side; timed 30,000-step fox runs, ours and gsplat.   carry as A plus .gpu/torch_ext.tar.xz
#   PART=D: the final commit (the rasterizer of B; BWD_ROWS dropped: 1 row was fastest),
#           timed runs one at a time: 7,000 steps ours on the three datasets and gsplat on
#           fox, 30,000 steps ours and gsplat on fox, then gsplat 7,000 on the other two as
#           the budget allows.                                  carry as C
#   PART=E (for the next session): the backward split over 2 / 4 / 8 workgroups per tile
#           (Rasterizer.backward_splits, built after call D), on the same models. carry as A
#   PART=F / G (for the next session): 30,000 steps, ours and gsplat in one call, on fox (F)
#           or DATASET=office_chair|mouse (G).                  carry as C
#   (A and C ran builds whose switches were removed afterwards: see BENCHMARKS.md.)
set -u
part=${PART:?PART=A, B, C, D, E, F or G}
export SPIRULA_COMMIT=${SPIRULA_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
variants="WARP_CULL=0+TILE_SUMS=0,WARP_CULL=1+TILE_SUMS=0,WARP_CULL=0+TILE_SUMS=1,WARP_CULL=1+TILE_SUMS=1"
source benchmarks/h200_common.sh  # compare()
case $part in
A)
  compare "fox:15000 office_chair:7000" --variants "$variants"
  (source .gpu/gpu-env.sh
   timeout 150 python3 -m engine.cli bench raster --device vulkan --json "$OUT/raster-vulkan.json" > "$OUT/raster.txt" \
     2>> "$OUT/errors.log" || echo "FAILED bench raster"
   tail -30 "$OUT/raster.txt") ;;
B)
  (source .gpu/gpu-env.sh
   timeout 150 python3 benchmarks/step_overhead.py --data .gpu/data/fox --device vulkan --warm 15000 --steps 300 --tile-stats \
     2>>"$OUT/errors.log" | grep -E '^(RESULT|TILES) ' | tee -a "$OUT/overhead.jsonl" | cut -c1-700)
  PAR="office_chair:0:ours-vulkan office_chair:1:ours-vulkan office_chair:2:ours-vulkan office_chair:3:ours-vulkan office_chair:4:ours-vulkan mouse:0:ours-vulkan mouse:1:ours-vulkan mouse:2:ours-vulkan mouse:3:ours-vulkan mouse:4:ours-vulkan" \
  STEPS=7000 BUDGET_S=200 NO_GSPLAT=1 bash benchmarks/h200_mixed.sh | cut -c1-260
  SEQ="fox:0:ours-vulkan" STEPS=30000 BUDGET_S=150 NO_GSPLAT=1 bash benchmarks/h200_mixed.sh | cut -c1-400 ;;
C)
  compare "fox:15000 office_chair:7000" --variants "BWD_ROWS=1,BWD_ROWS=4"
  PAR="fox:0:ours-vulkan fox:1:ours-vulkan fox:2:ours-vulkan" STEPS=7000 BUDGET_S=100 NO_GSPLAT=1 \
    bash benchmarks/h200_mixed.sh | cut -c1-200
  SEQ="fox:0:ours-vulkan fox:0:gsplat" STEPS=30000 BUDGET_S=${BUDGET_S:-330} bash benchmarks/h200_mixed.sh | cut -c1-300 ;;
D)
  SEQ="fox:0:ours-vulkan office_chair:0:ours-vulkan mouse:0:ours-vulkan fox:0:gsplat" STEPS=7000 \
    BUDGET_S=${BUDGET_S:-250} bash benchmarks/h200_mixed.sh | cut -c1-330
  SEQ="fox:0:ours-vulkan fox:0:gsplat" STEPS=30000 BUDGET_S=${BUDGET_S30:-330} NO_GSPLAT=1 bash benchmarks/h200_mixed.sh | cut -c1-330
  SEQ="office_chair:0:gsplat mouse:0:gsplat" STEPS=7000 BUDGET_S=${BUDGET_S2:-60} NO_GSPLAT=1 \
    bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
E)
  compare "fox:15000 office_chair:7000 mouse:7000" --splits 2,4,8 ;;
F)  # 30,000 steps on fox in one call (gsplat first: its run took over 235 s with start-up)
  SEQ="fox:0:gsplat fox:0:ours-vulkan" STEPS=30000 BUDGET_S=${BUDGET_S:-500} bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
G)  # 30,000 steps on one more dataset per call: DATASET=office_chair or mouse
  SEQ="${DATASET:?DATASET=office_chair or mouse}:0:gsplat $DATASET:0:ours-vulkan" STEPS=30000 BUDGET_S=${BUDGET_S:-500} \
    bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
esac
tail -4 "$OUT/errors.log" 2>/dev/null
