set -u
source .gpu/gpu-env.sh
mkdir -p $OUT/v3
V="bench viewer --gaussians 6000000 --frames 120 --warmup 60"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/v3/gpu.txt
new() { python3 -m engine.cli $V "$@" >> $OUT/v3/log.txt 2>&1; }
base() { (cd .gpu/base && PYTHONPATH=/tmp/gpu-site:$PWD python3 -m engine.cli $V "$@") >> $OUT/v3/log.txt 2>&1; }
for rep in a b; do
  new --width 1465 --height 766 --json $OUT/v3/new-vulkan-1465-$rep.json
  base --width 1465 --height 766 --json $OUT/v3/base-vulkan-1465-$rep.json
done
new --json $OUT/v3/new-vulkan-1920.json
base --json $OUT/v3/base-vulkan-1920.json
new --width 1465 --height 766 --device cuda --json $OUT/v3/new-cuda-1465.json
base --width 1465 --height 766 --device cuda --json $OUT/v3/base-cuda-1465.json
SPIRULA_PROFILE_JSON=$OUT/v3/new-vulkan-1465-prof.json python3 -m engine.cli $V --width 1465 --height 766 >> $OUT/v3/log.txt 2>&1
grep -h "bench viewer on" $OUT/v3/log.txt
cd $OUT && tar czf v3.tgz v3 && rm -rf v3
