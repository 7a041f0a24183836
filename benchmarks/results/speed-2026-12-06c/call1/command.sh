#!/usr/bin/env bash
# one-off device call (not committed): issue 25's viewer profile, validation/cache, steady rates
set -u
source .gpu/gpu-env.sh
S="python3 -m engine.cli"
mkdir -p $OUT/c1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/c1/gpu.txt
V="bench viewer --gaussians 6000000 --width 1920 --height 1080 --frames 60 --warmup 10"
echo "== viewer 6M 1080p"; $S $V --json $OUT/c1/viewer-1080.json 2>&1 | tail -2
echo "== viewer 6M 1080p profiled"; SPIRULA_PROFILE_JSON=$OUT/c1/viewer-1080-prof.json $S $V 2>&1 | tail -1
echo "== viewer 6M 1465x766"; $S bench viewer --gaussians 6000000 --width 1465 --height 766 --frames 60 --warmup 10 --json $OUT/c1/viewer-766.json 2>&1 | tail -1
for v in "vulkan 1 off" "vulkan 0 /tmp/sc" "vulkan 0 /tmp/sc" "cuda 1 off" "cuda 0 /tmp/sc" "cuda 0 /tmp/sc"; do
  set -- $v; echo "== train $v"
  SPIRULA_RHI_VALIDATION=$2 SPIRULA_SHADER_CACHE=$3 $S bench train --device $1 --steps 2000 --max-size 1000 --json $OUT/c1/val-$1-$2-$(echo $3|tr -d /).$RANDOM.json 2>&1 | tail -1
done
for d in resources/sample/fox .gpu/data/colmap-mouse; do for dev in vulkan cuda; do
  echo "== steady $d $dev"; $S bench train --data $d --device $dev --steps 3000 --max-size 1000 --json $OUT/c1/steady-$(basename $d)-$dev.json 2>&1 | tail -1
done; done
echo "== viewer cuda"; $S $V --device cuda --json $OUT/c1/viewer-1080-cuda.json 2>&1 | tail -1
