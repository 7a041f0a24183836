#!/usr/bin/env bash
# Issue 8 on the lent H200, sixth session: the split backward on by default (8 workgroups
# per tile) and binning by the splat's ellipse (shaders/common/footprint.slang).
#   PART=A: the step split on fox (after 15,000 steps), office_chair and mouse (after 7,000),
#           the default against 1 and 4 backward splits on the same model; quality seeds 0-2
#           of the three datasets side by side (7,000 steps); timed 7,000-step runs of ours
#           one at a time.          carry .gpu/{gpu-env.sh,debs,slangpy.tar.xz,wheels,data}
#   PART=B: 30,000 steps on fox, gsplat first (its run takes ~190 s plus ~80 s to load), then
#           ours, one at a time.   carry as A plus .gpu/torch_ext.tar.xz
#   PART=C: as B on DATASET=office_chair or mouse.
#   PART=D: timed 7,000-step gsplat runs of the three datasets.  carry as B
#   PART=E: after the screen-space gradients became one [N, 9] buffer (one atomic
#           instruction per splat): fox's step split after 15,000 steps, then PART=B.
#   PART=F: coalesced clear of the screen gradients and parameter rows staged in shared
#           memory in project_backward_adam (da6bbb9; the staging lost and was reverted):
#           fox's step split after 15,000 steps; `spirula bench raster` (2M Gaussians) with
#           memory-traffic floors.
set -u
part=${PART:?PART=A, B, C, D, E or F}
export SPIRULA_COMMIT=${SPIRULA_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}
source benchmarks/h200_common.sh  # compare()
case $part in
A)
  compare "fox:15000 office_chair:7000 mouse:7000" --splits 1,4
  PAR="fox:0:ours-vulkan fox:1:ours-vulkan fox:2:ours-vulkan office_chair:0:ours-vulkan office_chair:1:ours-vulkan office_chair:2:ours-vulkan mouse:0:ours-vulkan mouse:1:ours-vulkan mouse:2:ours-vulkan" \
  STEPS=7000 BUDGET_S=${BUDGET_PAR:-200} NO_GSPLAT=1 bash benchmarks/h200_mixed.sh | cut -c1-260
  SEQ="fox:0:ours-vulkan office_chair:0:ours-vulkan mouse:0:ours-vulkan" STEPS=7000 BUDGET_S=${BUDGET_SEQ:-150} NO_GSPLAT=1 \
    bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
B)
  SEQ="fox:0:gsplat fox:0:ours-vulkan" STEPS=30000 BUDGET_S=${BUDGET_S:-500} bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
C)
  SEQ="${DATASET:?DATASET=office_chair or mouse}:0:gsplat $DATASET:0:ours-vulkan" STEPS=30000 BUDGET_S=${BUDGET_S:-500} \
    bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
E)
  compare "fox:15000"
  SEQ="fox:0:gsplat fox:0:ours-vulkan" STEPS=30000 BUDGET_S=${BUDGET_S:-440} bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
F)
  compare "fox:15000"
  (source .gpu/gpu-env.sh
   timeout ${RASTER_S:-100} python3 -m engine.cli bench raster --device vulkan --json "$OUT/raster-vulkan.json" > "$OUT/raster.txt" \
     2>> "$OUT/errors.log" || echo "FAILED bench raster"
   tail -30 "$OUT/raster.txt") ;;
D)
  SEQ="fox:0:gsplat office_chair:0:gsplat mouse:0:gsplat" STEPS=7000 BUDGET_S=${BUDGET_S:-400} \
    bash benchmarks/h200_mixed.sh | cut -c1-330 ;;
esac
tail -4 "$OUT/errors.log" 2>/dev/null
