set -u
source .gpu/gpu-env.sh
S="python3 -m engine.cli"
mkdir -p $OUT/c7
V="bench viewer --gaussians 6000000 --frames 120 --warmup 60"
for oc in 1; do for dev in vulkan cuda; do for sz in "1920 1080" "1465 766"; do set -- $sz
  SPIRULA_VIEWER_OCCLUSION=$oc $S $V --width $1 --height $2 --device $dev --json $OUT/c7/viewer-$dev-$1-occ$oc.json >> $OUT/c7/log.txt 2>&1
done; done; done
SPIRULA_PROFILE_JSON=$OUT/c7/viewer-vulkan-1920-occ1-prof.json $S $V --device vulkan >> $OUT/c7/log.txt 2>&1
SPIRULA_PROFILE_JSON=$OUT/c7/viewer-cuda-1920-occ1-prof.json $S $V --device cuda >> $OUT/c7/log.txt 2>&1
python3 -m engine.cli bench train --steps 3000 --max-size 1000 --json $OUT/c7/train-fox-vulkan.json > /dev/null 2>&1
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
