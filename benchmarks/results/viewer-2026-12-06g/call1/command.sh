# issue 25, call 1 of the twenty-seventh session: the studio while a 6M model trains (tree
# 359d077), and the viewer at 6M: base (359d077, .gpu/v6/tree), mid (aa64aa9, .gpu/v6/mid: the
# compaction from the projection's kept mask, the counted scan) and new (the carried tree: + the
# cheap tests' loads batched), alternating; profiles with one frame in flight; GPU clocks
set -u
source .gpu/gpu-env.sh
mkdir -p $OUT/v6
cp .gpu/v6/command.sh $OUT/v6/
cat .gpu/COMMIT > $OUT/v6/commit.txt
ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/v6/gpu.txt
(cd .gpu/v6/tree && PYTHONPATH=/tmp/gpu-site:$PWD SPIRULA_TRAIN_YIELD=1 timeout 170 python3 -m engine.cli bench studio \
  --data $ROOT/.gpu/data/colmap-office_chair --gaussians 6000000 --max-size 1000 --seconds 10 --still 3 \
  --json $OUT/v6/studio-6m-yield1.json) >> $OUT/v6/studio-log.txt 2>&1
echo "studio rc=$?" >> $OUT/v6/studio-log.txt
grep -h "bench studio on\|frames:\|training:\|holds\|below\|rc=" $OUT/v6/studio-log.txt
nvidia-smi dmon -s pc -d 1 > $OUT/v6/dmon.txt 2>&1 &
DMON=$!
V="bench viewer --gaussians 6000000 --frames 120 --warmup 60"
at() { local dir=$1; shift; (cd $dir && PYTHONPATH=/tmp/gpu-site:$PWD timeout 60 python3 -m engine.cli $V "$@") >> $OUT/v6/log.txt 2>&1; }
base() { at .gpu/v6/tree "$@"; }
mid() { at .gpu/v6/mid "$@"; }
new() { at $ROOT "$@"; }
for rep in a b; do
  for t in base mid new; do $t --width 1465 --height 766 --json $OUT/v6/$t-vulkan-1465-$rep.json; done
done
for t in base new; do $t --json $OUT/v6/$t-vulkan-1920.json; done
for t in base new; do SPIRULA_VIEWER_FRAMES=1 SPIRULA_PROFILE_JSON=$OUT/v6/$t-vulkan-1465-fif1-prof.json $t --width 1465 --height 766 --json $OUT/v6/$t-vulkan-1465-fif1.json; done
for t in base new; do $t --width 1465 --height 766 --device cuda --json $OUT/v6/$t-cuda-1465.json; done
kill $DMON
grep -h "bench viewer on" $OUT/v6/log.txt
cd $OUT && tar czf v6.tgz v6 && rm -rf v6
