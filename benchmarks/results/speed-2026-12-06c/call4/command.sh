set -u
source .gpu/gpu-env.sh
S="python3 -m engine.cli"
mkdir -p $OUT/c4
V="bench viewer --gaussians 6000000 --width 1920 --height 1080 --frames 120 --warmup 60"
for st in 0 1; do for dev in vulkan cuda; do
  SPIRULA_PROJECT_STAGED=$st $S $V --device $dev --json $OUT/c4/viewer-$dev-st$st.json >> $OUT/c4/log.txt 2>&1
done; done
SPIRULA_PROJECT_STAGED=1 SPIRULA_PROFILE_JSON=$OUT/c4/viewer-vulkan-st1-prof.json $S $V --device vulkan >> $OUT/c4/log.txt 2>&1
SPIRULA_PROJECT_STAGED=0 SPIRULA_PROFILE_JSON=$OUT/c4/viewer-vulkan-st0-prof.json $S $V --device vulkan >> $OUT/c4/log.txt 2>&1
$S bench viewer --gaussians 6000000 --width 1465 --height 766 --frames 120 --warmup 60 --json $OUT/c4/viewer-766-st0.json >> $OUT/c4/log.txt 2>&1
for st in 0 1; do
  SPIRULA_PROJECT_STAGED=$st $S bench train --steps 3000 --max-size 1000 --json $OUT/c4/train-fox-st$st.json > /dev/null 2>&1
done
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
