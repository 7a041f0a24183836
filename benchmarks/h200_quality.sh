#!/usr/bin/env bash
# Issue 28, item 1, on the lent H200: the quality protocol "as users get it"
# (benchmarks/quality_bench.py) in ONE device command (600 s). From the repo root, $OUT set:
#   bash benchmarks/h200_quality.sh
# carry: [".gpu"] with .gpu/{gpu-env.sh,debs,slangpy.tar.xz,wheels} (../shared/tools/gpu-bundle.sh
# gsplat's wheel, nvidia-ml-py ...), .gpu/data/<name> for each dataset (CPU machine:
# `python benchmarks/prepare_data.py <dataset> --name <name> --max-size 1000`; add --hires for the
# 2x held-out scores of the anti-aliasing comparison, psnr_double), and optionally
# .gpu/torch_ext.tar.xz (gsplat's built extension; SAVE_EXT=1 writes one to $OUT: ~60 s saved).
# Settings (environment):
#   DATASETS "fox mouse office_chair"   SEEDS "0 1 2"   STEPS 7000   CAP 1000000   PROTOCOL user|parity
#   TRAINERS "ours-adc ours-mcmc gsplat-default gsplat-mcmc"  (each also as *-aa: anti-aliased)
#   JOBS 6      matrix runs at once; with JOBS > 1 they run --concurrent (quality only)
#   MATRIX ""   explicit matrix runs instead: "trainer dataset seed [quality_bench options],..."
#               (e.g. "ours-adc fox 1 --set init_random=box": a labelled variant; inside a run
#               write --score-at 7000+15000, the commas separate runs)
#   TIMED ""    e.g. "fox:30000": each trainer alone, seed 0, with --vram (time and memory);
#               these go first, the matrix gets the time left. TIMED_TRAINERS: which (default all),
#               a trainer may carry options after a colon: "ours-mcmc:--cap=200000"
#   EXTRA ""    quality_bench options added to every run (e.g. "--score-at 7000,15000 --renders $OUT/renders")
#   SMOKE 1     0 skips the 100-step smoke runs (trainers and scripts known to work)
#   BUDGET_S 570  no run outlives this many seconds from the start (killed: TERM, then KILL)
# Order: setup, gsplat's extension build, a 100-step smoke run of every trainer on the first
# dataset (in parallel; a trainer that fails it is left out of the rest), TIMED, the matrix
# (seed-major, so seed 0 of everything lands first), then the table of quality_collect.py.
# Logs: $OUT/logs (collected), $OUT/smoke; the results: $OUT/quality-<date>.json.
set -u
export DEADLINE=$(( $(date +%s) + ${BUDGET_S:-570} ))
source .gpu/gpu-env.sh
export CUDA_DEVICE_ORDER=PCI_BUS_ID TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export STEPS=${STEPS:-7000} CAP=${CAP:-1000000} PROTOCOL=${PROTOCOL:-user}
DATASETS=${DATASETS:-fox mouse office_chair}
SEEDS=${SEEDS:-0 1 2}
TRAINERS=${TRAINERS-ours-adc ours-mcmc gsplat-default gsplat-mcmc}  # TRAINERS="" (set, empty): no matrix (TIMED runs only)
JOBS=${JOBS:-6}
TIMED=${TIMED:-}
export OUT
# the records' commit (train_bench.commit_id): the carried .gpu/COMMIT before git, whose copy on
# the device may be stale (2026-12-04: the last landed commit instead of the tree's)
[ -z "${SPIRULA_COMMIT:-}" ] && [ -s .gpu/COMMIT ] && export SPIRULA_COMMIT=$(cat .gpu/COMMIT)
mkdir -p "$OUT/logs" "$OUT/smoke"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

# run_one LOGDIR TRAINER DATASET SEED STEPS [quality_bench options]: one run, killed at the
# deadline (or after $RUN_TIMEOUT_S); prints one line (and the log's tail when it failed)
run_one() {
  local dir=$1 tr=$2 d=$3 s=$4 n=$5; shift 5
  local tag=$(echo "$*" | tr -c 'A-Za-z0-9=_.\n' '_' | sed 's/__concurrent//g; s/__*/_/g; s/^_//; s/_$//')
  local log=$dir/$d-$tr${tag:+-$tag}-s$s-$n.log left=$(( DEADLINE - $(date +%s) ))
  [ -n "${RUN_TIMEOUT_S:-}" ] && [ "$RUN_TIMEOUT_S" -lt "$left" ] && left=$RUN_TIMEOUT_S
  if [ "$left" -lt "${MIN_LEFT_S:-20}" ]; then echo "SKIPPED (time) $tr $d s$s $n"; return 0; fi
  timeout -k 5 "$left" python3 benchmarks/quality_bench.py --trainer "$tr" --data ".gpu/data/$d" --seed "$s" \
    --steps "$n" --cap "$CAP" --protocol "$PROTOCOL" "$@" ${EXTRA:-} > "$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && grep -q '^RESULT ' "$log"; then
    grep '^RESULT ' "$log" | cut -c8- | python3 -c 'import json, sys; r = json.load(sys.stdin); t = r["sec_per_1k_steps"]
print("ok   %-22s %-13s s%d %6d  psnr %.3f  ssim %.4f  n %d  s/1k %s" % (r["trainer"], r["dataset"], r["seed"],
      r["steps"], r["psnr"], r["ssim"], r["num_gaussians"], "-" if t is None else "%.3f" % t))'
  else
    echo "FAIL $tr $d s$s $n rc=$rc$( [ $rc -ge 124 ] && echo ' (killed: time)')"; tail -n 4 "$log" | cut -c1-300
  fi
  return 0
}
export -f run_one

datasets=""
for d in $DATASETS; do
  if [ -f ".gpu/data/$d/cameras.json" ]; then datasets="$datasets $d"; else echo "MISSING .gpu/data/$d: left out"; fi
done
[ -n "$datasets" ] || { echo "no dataset"; exit 1; }
# gsplat's extension, built (or unpacked) once before any run: every run needs it, ours too
# (score_ply renders every PLY with gsplat's rasterization)
# the wheel was just installed, so its sources are newer than the carried objects and ninja
# would rebuild them all: date the sources back (the build's commands are unchanged)
[ -f .gpu/torch_ext.tar.xz ] && mkdir -p ~/.cache && tar -xJf .gpu/torch_ext.tar.xz -C ~/.cache \
  && find /tmp/gpu-site/gsplat -type f -exec touch -d '2020-01-01 00:00' {} +
t=$(date +%s)
python3 -c "import gsplat, gsplat.cuda._backend as b; print('gsplat', gsplat.__version__, 'backend', b._C is not None)" \
  2>&1 | tail -n 2
echo "gsplat extension: $(( $(date +%s) - t )) s"
[ "${SAVE_EXT:-0}" = 1 ] && tar -C ~/.cache -cJf "$OUT/torch_ext.tar.xz" torch_extensions

first=$(echo $datasets | cut -d' ' -f1)
trainers=$TRAINERS
if [ "${SMOKE:-1}" = 1 ]; then
  echo "== smoke: 100 steps on $first"
  for tr in $TRAINERS; do RUN_TIMEOUT_S=${SMOKE_S:-240} run_one "$OUT/smoke" "$tr" "$first" 0 100 --concurrent & done
  wait
  trainers=""
  for tr in $TRAINERS; do
    if grep -q '^RESULT ' "$OUT/smoke/$first-$tr-s0-100.log" 2>/dev/null; then trainers="$trainers $tr"; else echo "left out: $tr"; fi
  done
fi

for spec in $TIMED; do
  IFS=: read -r d n <<< "$spec"
  echo "== timed: $d $n steps, alone"
  for spec in ${TIMED_TRAINERS:-$trainers}; do
    IFS=: read -r tr opts <<< "$spec"
    run_one "$OUT/logs" "$tr" "$d" 0 "$n" --vram ${opts//=/ }
  done
done

echo "== matrix: $STEPS steps, seeds $SEEDS, $JOBS at once"
export CONC=""; [ "$JOBS" -gt 1 ] && CONC=--concurrent
if [ -n "${MATRIX:-}" ]; then  # explicit runs, "trainer dataset seed" separated by commas (the gaps of earlier calls)
  echo "$MATRIX" | tr ',' '\n' | sed '/^ *$/d' > "$OUT/matrix.txt"
else
  for s in $SEEDS; do for d in $datasets; do for tr in $trainers; do echo "$tr $d $s"; done; done; done > "$OUT/matrix.txt"
fi
[ -n "$trainers" ] && xargs -P "$JOBS" -L 1 bash -c 'run_one "$OUT/logs" "$0" "$1" "$2" "$STEPS" $CONC "${@:3}"' < "$OUT/matrix.txt"

echo "== collected ($(( DEADLINE - $(date +%s) )) s before the deadline)"
python3 benchmarks/quality_collect.py "$OUT"/logs/*.log --out "$OUT/quality-$(date +%F).json"
