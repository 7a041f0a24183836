#!/usr/bin/env bash
# Issue 8 on the lent nvidia-h200-x2, ninth session: 30,000 steps at native resolution on
# fox (1902 x 1067) and mouse (1920 x 1440), gsplat and ours, plus fox at <= 1000 px with
# this build, the build before its rasterizer change (.gpu/base: `git archive a17c825`) and
# the eager-trim threshold, and `spirula bench raster` of both builds.
# gsplat needs 11-16 min per native run, more than one 600 s command, so the runs are two
# detached chains (benchmarks/h200_session9_chain.sh, one per GPU, each run alone on its
# GPU) that outlive the command; the calls after the first only wait and collect. A call
# must follow the previous one within the machine's 30 s warm window, or the chains die.
#   PART=A: set up, start both chains, wait.   carry .gpu/{debs,wheels,torch_ext.tar.xz,native,
#           data/fox,base}  (slangpy does not fit in the same 64 MiB: gsplat needs none of it)
#   PART=B: unpack slangpy (our runs wait for it), wait.   carry .gpu/slangpy.tar.xz
#   PART=C: wait until both chains are done (or WAIT_S), collect.
#   PART=D: the build after the rasterizer change was reverted (same engine and shaders as
#           a17c825), on a fresh machine: fox 30k twice on GPU 0 while gsplat runs fox 30k on
#           GPU 1, then 7,000 steps through slangpy's CUDA backend on GPU 0.
#           carry .gpu/{gpu-env.sh,debs,slangpy.tar.xz,wheels,torch_ext.tar.xz,data/fox}
#           With one GPU (the x2 kind was not lent for it), gsplat runs first and the CUDA run
#           only with CUDA_RUN=1.
set -u
part=${PART:?PART=A, B or C}
S=/tmp/s9
wait_s=${WAIT_S:-560}
collect() {
  local end=$((SECONDS + wait_s))
  while [ $SECONDS -lt $end ] && ! { [ -f $S/chain0.done ] && [ -f $S/chain1.done ]; }; do sleep 5; done
  cat $S/progress 2>/dev/null
  nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader
  cp $S/results-*.jsonl $S/raster-*.json $S/errors-*.log "$OUT"/ 2>/dev/null
  for f in $S/results-*.jsonl; do [ -f "$f" ] && cut -c1-400 "$f"; done
  tail -n 3 $S/errors-*.log 2>/dev/null
  { [ -f $S/chain0.done ] && [ -f $S/chain1.done ]; } && echo "ALL DONE" || echo "STILL RUNNING"
}
case $part in
A)
  rm -rf $S && mkdir -p $S/site ~/.cache
  for f in .gpu/debs/*.deb; do dpkg -x "$f" /; done; ldconfig
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $S/site .gpu/wheels/*.whl
  tar -xJf .gpu/torch_ext.tar.xz -C ~/.cache
  tar --exclude=./.gpu --exclude=./.git -cf - . | (mkdir -p $S/repo && tar -xf - -C $S/repo)
  cp -r .gpu/native/fox_native .gpu/native/mouse_native .gpu/data/fox .gpu/base $S/
  nvidia-smi -L
  export SPIRULA_COMMIT=${SPIRULA_COMMIT:?the commit of this tree}
  cd $S/repo
  setsid nohup bash benchmarks/h200_session9_chain.sh 0 gsplat:fox_native ours:fox_native ours:fox gsplat:fox base:fox \
    > $S/chain0.log 2>&1 < /dev/null &
  setsid nohup bash benchmarks/h200_session9_chain.sh 1 gsplat:mouse_native ours:mouse_native raster:- base-raster:- \
    ours:fox:--eager-trim-mib=256 > $S/chain1.log 2>&1 < /dev/null &
  sleep 2; cd - > /dev/null
  collect ;;
B)
  tar -xJf .gpu/slangpy.tar.xz -C $S/site && touch $S/ready
  collect ;;
C)
  collect ;;
D)
  source .gpu/gpu-env.sh
  mkdir -p ~/.cache && tar -xJf .gpu/torch_ext.tar.xz -C ~/.cache
  export CUDA_DEVICE_ORDER=PCI_BUS_ID TORCH_CUDA_ARCH_LIST=9.0 SPIRULA_COMMIT=${SPIRULA_COMMIT:?the commit of this tree}
  bench() { timeout "$1" python3 benchmarks/train_bench.py --data .gpu/data/fox --seed 0 --vram "${@:2}"; }
  g=1; [ "$(nvidia-smi -L | wc -l)" -ge 2 ] || g=0
  gsplat() { CUDA_VISIBLE_DEVICES=$g BENCH_NVML_INDEX=$g bench 400 --trainer gsplat --steps 30000 2>>"$OUT/errors-1.log" \
               | grep '^RESULT' > "$OUT/results-d1.jsonl"; }
  if [ $g = 1 ]; then gsplat & else gsplat; fi
  adapter=$(python3 benchmarks/gpu_map.py 0)
  for run in 1 2; do
    SPIRULA_ADAPTER=$adapter BENCH_NVML_INDEX=0 bench 200 --trainer ours-vulkan --steps 30000 2>>"$OUT/errors-0.log" \
      | grep '^RESULT' >> "$OUT/results-d0.jsonl"
  done
  [ $g = 1 ] || [ "${CUDA_RUN:-0}" = 1 ] && CUDA_VISIBLE_DEVICES=0 BENCH_NVML_INDEX=0 bench 240 --trainer ours-cuda --steps 7000 2>>"$OUT/errors-0.log" \
    | grep '^RESULT' >> "$OUT/results-d0.jsonl"
  wait
  cut -c1-420 "$OUT"/results-d*.jsonl; tail -n 3 "$OUT"/errors-*.log ;;
esac
