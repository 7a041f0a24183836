# Shell functions for benchmarks/gpu.sh's "overhead" protocol (sourced; needs $OUT; written for the
# per-session drivers removed after 4917d63).
# compare "dataset:warm ..." [step_overhead options]: per-kernel µs/step on each dataset's
# model after `warm` steps, the main build and then each compared variant on the same model
compare() {
  local specs=$1; shift
  (source .gpu/gpu-env.sh
   for spec in $specs; do
     IFS=: read -r d w <<<"$spec"
     timeout 200 python3 benchmarks/step_overhead.py --data .gpu/data/$d --device vulkan --warm $w --steps 300 "$@" \
       2>>"$OUT/errors.log" | grep -E '^(RESULT|VARIANT) ' | tee -a "$OUT/overhead.jsonl" | python3 -c "
import json, sys
for line in sys.stdin:
    tag, _, js = line.partition(' '); r = json.loads(js); k = r['kernels_us_per_step']
    print(tag, r['dataset'], r.get('variant', ''), r['gaussians'], r['intersections'], 'gpu %.3f' % r['profiled_gpu_exec_ms_per_step'],
          'wall %.3f' % r.get('wall_ms_per_step', float('nan')), {n: k[n] for n in list(k)[:6]})"
   done)
}
