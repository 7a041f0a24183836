set -u
source .gpu/gpu-env.sh
S="python3 -m engine.cli"
mkdir -p $OUT/c2
V="bench viewer --gaussians 6000000 --width 1920 --height 1080 --frames 60 --warmup 10"
$S $V --json $OUT/c2/viewer-1080.json > $OUT/c2/log.txt 2>&1
SPIRULA_PROFILE_JSON=$OUT/c2/viewer-1080-prof.json $S $V >> $OUT/c2/log.txt 2>&1
SPIRULA_PROFILE_JSON=$OUT/c2/viewer-1080-cuda-prof.json $S $V --device cuda >> $OUT/c2/log.txt 2>&1
$S bench viewer --gaussians 6000000 --width 1465 --height 766 --frames 60 --warmup 10 --json $OUT/c2/viewer-766.json >> $OUT/c2/log.txt 2>&1
for v in "vulkan 1 off" "vulkan 0 /tmp/sc" "vulkan 0 /tmp/sc"; do
  set -- $v
  SPIRULA_RHI_VALIDATION=$2 SPIRULA_SHADER_CACHE=$3 $S bench train --device $1 --steps 2000 --max-size 1000 --json $OUT/c2/val-$1-$2-$(echo $3|tr -d /).$RANDOM.json >> $OUT/c2/log.txt 2>&1
done
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
