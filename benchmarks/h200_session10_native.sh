#!/usr/bin/env bash
# Issue 8, tenth session, last lease: the final build's `spirula bench raster` (2M Gaussians,
# twice) and fox at native resolution (1902 x 1067), 30,000 steps, ours then gsplat on the
# one GPU. gsplat's run is longer than what is left of a 600 s command, so the runs are one
# detached chain that outlives it; a second call within the machine's 30 s warm window
# waits for the chain and collects:
#   PART=start  carry .gpu/{gpu-env.sh,debs,slangpy.tar.xz,wheels,torch_ext.tar.xz,native/fox_native}
#   PART=collect (WAIT_S, default 560)
set -u
S=/tmp/s10n
collect() {
  local end=$((SECONDS + ${WAIT_S:-560}))
  while [ $SECONDS -lt $end ] && [ ! -f $S/chain.done ]; do sleep 5; done
  cat $S/progress
  cp $S/results.jsonl $S/raster-*.json $S/errors.log "$OUT"/ 2>/dev/null
  cut -c1-420 $S/results.jsonl 2>/dev/null; tail -n 3 $S/errors.log
  [ -f $S/chain.done ] && echo "ALL DONE" || echo "STILL RUNNING"
}
if [ "${PART:?start or collect}" = start ]; then
  source .gpu/gpu-env.sh
  mkdir -p ~/.cache && tar -xJf .gpu/torch_ext.tar.xz -C ~/.cache
  rm -rf $S && mkdir -p $S && cp -r /tmp/gpu-site $S/site && cp -r .gpu/native/fox_native $S/
  tar --exclude=./.gpu --exclude=./.git -cf - . | (mkdir -p $S/repo && tar -xf - -C $S/repo)
  export CUDA_DEVICE_ORDER=PCI_BUS_ID TORCH_CUDA_ARCH_LIST=9.0 SPIRULA_COMMIT=${SPIRULA_COMMIT:?the commit of this tree}
  cd $S/repo
  setsid nohup bash -c '
    S=/tmp/s10n; export PYTHONPATH=$S/site:$S/repo
    note() { echo "$(date +%T) $*" >> $S/progress; }
    for i in 0 1; do
      note "start raster $i"
      timeout 150 python3 -m engine.cli bench raster --device vulkan --json $S/raster-$i.json > $S/raster-$i.txt 2>&1
    done
    for t in ours-vulkan gsplat; do
      note "start $t fox_native"
      timeout 900 python3 benchmarks/train_bench.py --trainer $t --data $S/fox_native --seed 0 --steps 30000 --vram \
        2>>$S/errors.log | grep "^RESULT" >> $S/results.jsonl
    done
    note done; touch $S/chain.done' > $S/chain.log 2>&1 < /dev/null &
  sleep 2; cd - > /dev/null
fi
collect
