#!/usr/bin/env bash
# One device call: kernel benchmarks first (GPU otherwise idle: issue 4's `bench raster` with
# gsplat's reference, issue 5's viewer frame times), then quality runs side by side
# (h200_mixed.sh) with whatever time is left of BUDGET_S (default 570 s).
#   SPIRULA_COMMIT=<sha> PAR="office_chair:0:ours-vulkan ..." bash benchmarks/h200_session.sh
set -u
t0=$(date +%s)
bash benchmarks/h200_raster.sh
bash benchmarks/h200_viewer.sh
left=$(( ${BUDGET_S:-570} - ($(date +%s) - t0) ))
echo "kernel benchmarks took $(( $(date +%s) - t0 )) s; ${left} s left for quality runs"
BUDGET_S=$left bash benchmarks/h200_mixed.sh
