# geometry phase on/off at the GPU machine's sizes (issue 21 item 2), 3 runs at a time on one GPU
set -u
source .gpu/gpu-env.sh
W=/tmp/geo; mkdir -p $W $OUT/geo
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/geo/gpu.txt
jobs=$W/jobs.txt; : > $jobs
for data in office_chair mouse; do for seed in 0 1 2; do
  echo "$data off $seed" >> $jobs
  echo "$data on $seed --geometry" >> $jobs
  echo "$data from06 $seed --geometry --geometry-from 0.6" >> $jobs
  echo "$data from06n02 $seed --geometry --geometry-from 0.6 --lambda-normal 0.02" >> $jobs
done; done
one() { set -- $1; data=$1; name=$1-$2-s$3; seed=$3; shift 3
  t0=$(date +%s.%N)
  python3 -m engine.cli train .gpu/data/colmap-$data -o $W/$name --steps 7000 --max-size 1000 --seed $seed "$@" > $W/$name.log 2>&1
  rc=$?; t1=$(date +%s.%N)
  python3 -c "import json,sys;m=json.load(open('$W/$name/metrics.json'));print('$name', round(m['psnr'],3), round(m['ssim'],4), round(m['train_seconds'],1), m['num_gaussians'], '$rc', round($t1-$t0,1), '$*')" >> $OUT/geo/results.txt 2>/dev/null || echo "$name FAILED rc=$rc" >> $OUT/geo/results.txt
}
export -f one; export W OUT
cat $jobs | xargs -P 3 -I{} bash -c 'one "{}"'
cp $W/*.log $OUT/geo/ 2>/dev/null; for d in $W/*/; do n=$(basename $d); cp $d/metrics.json $OUT/geo/$n-metrics.json 2>/dev/null; done
cat $OUT/geo/results.txt
# the mouse model (default off, seed 0) for CPU work on the support plane
cd $W/mouse-off-s0 && ls -la > $OUT/geo/mouse-off-s0-files.txt
tar czf /tmp/mouse.tgz --exclude='eval*' --exclude='*.png' . && cd $OUT && tar czf /tmp/geo.tgz geo && rm -rf geo && cp /tmp/geo.tgz . && split -b 15M /tmp/mouse.tgz mouse.tgz.
ls -la $OUT
