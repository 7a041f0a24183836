set -u
source .gpu/gpu-env.sh
mkdir -p $OUT/v2
V="bench viewer --gaussians 6000000 --frames 120 --warmup 60"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/v2/gpu.txt
for dev in vulkan cuda; do for sz in "1920 1080" "1465 766"; do set -- $sz
  python3 -m engine.cli $V --width $1 --height $2 --device $dev --json $OUT/v2/fif2-$dev-$1.json >> $OUT/v2/log.txt 2>&1
  SPIRULA_VIEWER_FRAMES=1 python3 -m engine.cli $V --width $1 --height $2 --device $dev --json $OUT/v2/fif1-$dev-$1.json >> $OUT/v2/log.txt 2>&1
done; done
# a second pair on Vulkan 1080p (the bar's size), order swapped
SPIRULA_VIEWER_FRAMES=1 python3 -m engine.cli $V --device vulkan --json $OUT/v2/fif1-vulkan-1920-b.json >> $OUT/v2/log.txt 2>&1
python3 -m engine.cli $V --device vulkan --json $OUT/v2/fif2-vulkan-1920-b.json >> $OUT/v2/log.txt 2>&1
grep -h "bench viewer on" $OUT/v2/log.txt
cd $OUT && tar czf v2.tgz v2 && rm -rf v2
