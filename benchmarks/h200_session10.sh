#!/usr/bin/env bash
# Issue 8 on the lent H200, tenth session: the forward rasterizer's strip culling A/B'd in
# `spirula bench raster` (2M Gaussians), then 30,000-step runs of the faster build against
# gsplat in the same call. One GPU, everything in sequence, so no run shares the GPU.
#   VARIANTS: trees to bench, in order (repeats allowed: the spread between them is the
#     noise): base = this tree with the shaders before the change (.gpu/s10/base/shaders:
#     `git archive 188525b shaders`), cull = this tree, adj = this tree with the backward's
#     PY pixels in adjacent rows (backward_row), s4 = this tree with strips of 4 rows.
#   RUNS: kind:data after the raster runs; kind = ours (the variant with the smallest
#     rasterize_forward + rasterize_backward; base if none beats it) or gsplat.
#   carry .gpu/{gpu-env.sh,debs,slangpy.tar.xz,wheels,torch_ext.tar.xz,s10} + the data named
set -u
source .gpu/gpu-env.sh
mkdir -p ~/.cache && tar -xJf .gpu/torch_ext.tar.xz -C ~/.cache
export CUDA_DEVICE_ORDER=PCI_BUS_ID TORCH_CUDA_ARCH_LIST=9.0 SPIRULA_COMMIT=${SPIRULA_COMMIT:?the commit of this tree}
R=$PWD W=/tmp/s10; rm -rf $W; mkdir -p $W
tar --exclude=./.gpu --exclude=./.git -cf - . | (mkdir -p $W/cull && tar -xf - -C $W/cull)
cp -r $W/cull $W/adj && sed -i 's/    return y + j \* TROWS;/    return y * PY + j;/' $W/adj/shaders/raster/raster.slang
grep -q 'return y \* PY + j;' $W/adj/shaders/raster/raster.slang || echo "adj: sed found nothing"
cp -r $W/cull $W/base && rm -rf $W/base/shaders && cp -r .gpu/s10/base/shaders $W/base/
cp -r $W/cull $W/s4 && sed -i 's/STRIP_ROWS = 2;/STRIP_ROWS = 4;/' $W/s4/shaders/raster/raster.slang
nvidia-smi -L
for v in ${VARIANTS:-base cull adj cull base}; do
  i=$(ls $W | grep -c "^raster-$v") 
  ( cd $W/$v && PYTHONPATH=/tmp/gpu-site:$W/$v timeout 150 python3 -m engine.cli bench raster --device vulkan \
      --json $OUT/raster-$v-$i.json > $W/raster-$v-$i.txt 2>&1 ) || tail -5 $W/raster-$v-$i.txt
  touch $W/raster-$v-$i
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); k=d['kernels_ms_per_iteration']; print(sys.argv[2], 'fwd %.3f bwd %.3f pba %.3f it %.3f' % (k['rasterize_forward'], k['rasterize_backward'], k['project_backward_adam'], d['iteration_gpu_ms']))" $OUT/raster-$v-$i.json $v-$i
done
best=$(python3 - <<'PY'
import glob, json, os, statistics
t = {}
for f in glob.glob(os.environ["OUT"] + "/raster-*.json"):
    k = json.load(open(f))["kernels_ms_per_iteration"]
    t.setdefault(f.split("raster-")[1].split("-")[0], []).append(k["rasterize_forward"] + k["rasterize_backward"])
m = {v: statistics.median(x) for v, x in t.items()}
print(min(m, key=m.get) if m else "base")
PY
)
echo "ours = $best"
for job in ${RUNS:-}; do
  IFS=: read -r kind data <<< "$job"
  if [ $kind = gsplat ]; then
    timeout 560 python3 benchmarks/train_bench.py --trainer gsplat --data .gpu/$data --seed 0 --steps 30000 --vram
  else
    ( cd $W/$best && SPIRULA_COMMIT=$SPIRULA_COMMIT-$best PYTHONPATH=/tmp/gpu-site:$W/$best timeout 300 python3 \
        benchmarks/train_bench.py --trainer ours-vulkan --data $R/.gpu/$data --seed 0 --steps 30000 --vram )
  fi 2>>$OUT/errors.log | grep '^RESULT' | sed "s#^RESULT {#RESULT {\"job\": \"$job\", #" >> $OUT/results.jsonl
  tail -n 1 $OUT/results.jsonl | cut -c1-400
done
