set -u
source .gpu/gpu-env.sh
mkdir -p $OUT/v1
V="bench viewer --gaussians 6000000 --frames 120 --warmup 60"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/v1/gpu.txt
for dev in vulkan cuda; do for sz in "1920 1080" "1465 766"; do set -- $sz
  python3 -m engine.cli $V --width $1 --height $2 --device $dev --json $OUT/v1/new-$dev-$1.json >> $OUT/v1/log.txt 2>&1
  (cd .gpu/base && PYTHONPATH=/tmp/gpu-site:$PWD python3 -m engine.cli $V --width $1 --height $2 --device $dev --json $OUT/v1/base-$dev-$1.json) >> $OUT/v1/log.txt 2>&1
done; done
SPIRULA_PROFILE_JSON=$OUT/v1/new-vulkan-1465-prof.json python3 -m engine.cli $V --width 1465 --height 766 --device vulkan >> $OUT/v1/log.txt 2>&1
SPIRULA_PROFILE_JSON=$OUT/v1/new-vulkan-1920-prof.json python3 -m engine.cli $V --width 1920 --height 1080 --device vulkan >> $OUT/v1/log.txt 2>&1
SPIRULA_PROFILE_JSON=$OUT/v1/new-cuda-1465-prof.json python3 -m engine.cli $V --width 1465 --height 766 --device cuda >> $OUT/v1/log.txt 2>&1
grep -h "bench viewer on" $OUT/v1/log.txt
cd $OUT && tar czf v1.tgz v1 && rm -rf v1
