# issue 25, call 2 of the twenty-seventh session: the final tree (carried, .gpu/COMMIT) against
# the session's start (359d077, .gpu/v7/base, git archive), alternating: the viewer at 6M
# (Vulkan 1465 x 766 three times each, 1920 x 1080, CUDA 1465 x 766), and the studio while a 6M
# model trains (the final tree: the training yielding to the moving camera, the default, and not;
# and with the geometry phase on, the training panel's default)
set -u
source .gpu/gpu-env.sh
mkdir -p $OUT/v7
cp .gpu/v7/command.sh $OUT/v7/
cat .gpu/COMMIT > $OUT/v7/commit.txt
ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/v7/gpu.txt
V="bench viewer --gaussians 6000000 --frames 120 --warmup 60"
at() { local dir=$1; shift; (cd $dir && PYTHONPATH=/tmp/gpu-site:$PWD timeout 60 python3 -m engine.cli $V "$@") >> $OUT/v7/log.txt 2>&1; }
base() { at .gpu/v7/base "$@"; }
new() { at $ROOT "$@"; }
for rep in a b c; do
  for t in base new; do $t --width 1465 --height 766 --json $OUT/v7/$t-vulkan-1465-$rep.json; done
done
for t in base new; do $t --json $OUT/v7/$t-vulkan-1920.json; done
for t in base new; do $t --width 1465 --height 766 --device cuda --json $OUT/v7/$t-cuda-1465.json; done
grep -h "bench viewer on" $OUT/v7/log.txt
for y in 1 0; do
  SPIRULA_TRAIN_YIELD=$y timeout 150 python3 -m engine.cli bench studio --data .gpu/data/colmap-office_chair \
    --gaussians 6000000 --max-size 1000 --seconds 10 --still 3 --json $OUT/v7/studio-6m-yield$y.json >> $OUT/v7/studio-log.txt 2>&1
  echo "studio yield=$y rc=$?" >> $OUT/v7/studio-log.txt
done
# the window's default trains the geometry phase (from 60% of the steps): 400 steps put the orbit in it
timeout 150 python3 -m engine.cli bench studio --data .gpu/data/colmap-office_chair --gaussians 6000000 --max-size 1000 \
  --seconds 10 --still 4 --steps 400 --geometry --json $OUT/v7/studio-6m-geometry.json >> $OUT/v7/studio-log.txt 2>&1
echo "studio geometry rc=$?" >> $OUT/v7/studio-log.txt
grep -h "bench studio on\|holds\|below\|rc=\|training:" $OUT/v7/studio-log.txt
cd $OUT && tar czf v7.tgz v7 && rm -rf v7
