#!/usr/bin/env bash
# Tenth session, first call: profiler availability, bench raster baseline (Vulkan), ncu of
# the raster kernels (CUDA). carry .gpu/{gpu-env.sh,debs,slangpy.tar.xz}
set -u
source .gpu/gpu-env.sh
nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.max.sm,clocks.sm --format=csv
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"; command -v nsys; ls /usr/local/cuda/bin 2>/dev/null | tr '\n' ' '; echo
timeout 150 python3 -m engine.cli bench raster --gaussians 2000000 --json $OUT/raster-vk-base.json 2>&1 | tail -25
if [ -n "${NCU:-}" ]; then
  timeout 300 $NCU --target-processes all -k regex:rasterize_ --launch-skip 2 --launch-count 2 \
    --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters \
    python3 -m engine.cli bench raster --gaussians 2000000 --device cuda --iters 2 --warmup 2 > $OUT/ncu.txt 2>&1
  echo "ncu rc $?"; grep -n -i "error\|==PROF==\|rasterize" $OUT/ncu.txt | head -20
fi
