set -u
source .gpu/gpu-env.sh
S="python3 -m engine.cli"
mkdir -p $OUT/c3
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,utilization.gpu --format=csv -lms 50 > $OUT/c3/clocks.csv 2>&1 &
SMI=$!
V="bench viewer --gaussians 6000000 --width 1920 --height 1080"
for dev in vulkan cuda; do
  echo "== $dev $(date +%T.%N)" >> $OUT/c3/log.txt
  $S $V --device $dev --frames 120 --warmup 60 --json $OUT/c3/viewer-$dev.json >> $OUT/c3/log.txt 2>&1
  echo "== $dev prof $(date +%T.%N)" >> $OUT/c3/log.txt
  SPIRULA_PROFILE_JSON=$OUT/c3/viewer-$dev-prof.json $S $V --device $dev --frames 60 --warmup 10 >> $OUT/c3/log.txt 2>&1
done
echo "== end $(date +%T.%N)" >> $OUT/c3/log.txt
kill $SMI
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
