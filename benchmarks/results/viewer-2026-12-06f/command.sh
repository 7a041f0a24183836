# one call, 590 s: (1) viewer 6M, new vs base (6863d21, .gpu/c1/base), alternating; (2) the studio's frame
# rate while a 6M model trains; (3) geometry-phase variants, 4 trainings at a time, by priority
set -u
T0=$(date +%s)
source .gpu/gpu-env.sh
mkdir -p $OUT/v5 $OUT/geo
cp .gpu/c1/command.sh $OUT/v5/
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/v5/gpu.txt > $OUT/geo/gpu.txt
V="bench viewer --gaussians 6000000 --frames 120 --warmup 60"
new() { timeout 60 python3 -m engine.cli $V "$@" >> $OUT/v5/log.txt 2>&1; }
base() { (cd .gpu/c1/base && PYTHONPATH=/tmp/gpu-site:$PWD timeout 60 python3 -m engine.cli $V "$@") >> $OUT/v5/log.txt 2>&1; }
new --width 1465 --height 766 --json $OUT/v5/new-vulkan-1465-a.json
base --width 1465 --height 766 --json $OUT/v5/base-vulkan-1465-a.json
new --width 1465 --height 766 --json $OUT/v5/new-vulkan-1465-b.json
base --width 1465 --height 766 --json $OUT/v5/base-vulkan-1465-b.json
new --json $OUT/v5/new-vulkan-1920.json
timeout 90 python3 -m engine.cli $V --width 1465 --height 766 --device cuda --json $OUT/v5/new-cuda-1465.json >> $OUT/v5/log.txt 2>&1
timeout 80 python3 -m engine.cli bench train --device cuda --steps 300 --max-size 500 --json $OUT/v5/cuda-train-check.json >> $OUT/v5/log.txt 2>&1; echo "cuda train rc=$?" >> $OUT/v5/log.txt
echo "viewer done at $(( $(date +%s) - T0 )) s" >> $OUT/v5/log.txt
grep -h "bench viewer on" $OUT/v5/log.txt
timeout 120 python3 -m engine.cli bench studio --data .gpu/data/colmap-office_chair --gaussians 6000000 --max-size 1000 \
  --seconds 10 --still 3 --json $OUT/v5/studio-6m.json >> $OUT/v5/studio-log.txt 2>&1
echo "studio rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/v5/studio-log.txt
grep -h "bench studio on\|frames:\|training:\|holds\|below\|rc=" $OUT/v5/studio-log.txt
export SPIRULA_EVAL_GEOMETRY=1
W=/tmp/geo; mkdir -p $W
jobs=$W/jobs.txt; : > $jobs
for seed in 0 1 2; do
  echo "office_chair off $seed" >> $jobs
  echo "office_chair from06n02aoff $seed --geometry --geometry-from 0.6 --lambda-normal 0.02 --geometry-alpha-grad off" >> $jobs
  echo "office_chair aoff $seed --geometry --geometry-alpha-grad off" >> $jobs
  echo "office_chair from06n01aoff $seed --geometry --geometry-from 0.6 --lambda-normal 0.01 --geometry-alpha-grad off" >> $jobs
done
for seed in 0 1 2; do
  echo "mouse off $seed" >> $jobs
  echo "mouse from06n02aoff $seed --geometry --geometry-from 0.6 --lambda-normal 0.02 --geometry-alpha-grad off" >> $jobs
done
one() { set -- $1; data=$1; name=$1-$2-s$3; seed=$3; shift 3
  t0=$(date +%s.%N)
  python3 -m engine.cli train .gpu/data/colmap-$data -o $W/$name --steps 7000 --max-size 1000 --seed $seed "$@" > $W/$name.log 2>&1
  rc=$?; t1=$(date +%s.%N)
  python3 -c "import json,sys;m=json.load(open('$W/$name/metrics.json'));print('$name', round(m['psnr'],3), round(m['ssim'],4), m.get('normal_consistency'), round(m['train_seconds'],1), m['num_gaussians'], '$rc', round($t1-$t0,1), '$*')" >> $OUT/geo/results.txt 2>/dev/null || echo "$name FAILED rc=$rc" >> $OUT/geo/results.txt
}
export -f one; export W OUT
LEFT=$(( 575 - ($(date +%s) - T0) ))
echo "sweep budget $LEFT s" >> $OUT/geo/results.txt
timeout $LEFT bash -c "cat $jobs | xargs -P 4 -I{} bash -c 'one \"{}\"'"
echo "sweep ended at $(( $(date +%s) - T0 )) s" >> $OUT/geo/results.txt
for f in $W/*.log; do tail -5 $f > $OUT/geo/$(basename $f .log).log-tail.txt; done
for d in $W/*/; do n=$(basename $d); cp $d/metrics.json $OUT/geo/$n-metrics.json 2>/dev/null; done
cat $OUT/geo/results.txt
cd $OUT && tar czf c1.tgz v5 geo && rm -rf v5 geo
