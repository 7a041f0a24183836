#!/usr/bin/env bash
# The GPU-machine driver: runs a named list of benchmark protocols in one device call, in
# order, each alone on the GPU, and writes everything under $OUT/<date>-<commit>/ (fetch it
# into benchmarks/results/ and add a row per claim to BENCHMARKS.md's table).
#
#   bash benchmarks/gpu.sh [PROTOCOL ...]        (default: raster viewer train)
#   bash benchmarks/gpu.sh --list                 the protocols, one line each
#   DRY_RUN=1 bash benchmarks/gpu.sh PROTOCOL ... prints the commands, runs nothing
#
# Before the call, on the CPU machine (shared/GPU.md): `../shared/tools/gpu-bundle.sh [wheels]`
# builds .gpu/ (add gsplat's wheel for raster/parity/quality); copy the datasets a protocol
# needs to .gpu/data/<name> (`python benchmarks/prepare_data.py`); `git rev-parse --short HEAD
# > .gpu/COMMIT` (the device copy has no .git). Device call: command `bash benchmarks/gpu.sh
# ...`, carry [".gpu"], timeout_s 600.
#
# Protocols (a protocol whose inputs are missing is skipped with the reason):
#   raster    `spirula bench raster` on Vulkan and CUDA (2M Gaussians, 1237 x 822, SH 3), then
#             gsplat 1.5.3 on the same scene (benchmarks/raster_bench_gsplat.py) if it imports
#   train     `spirula bench train` at <= 1000 px, Vulkan and CUDA (TRAIN_STEPS 2000), on each of TRAIN_DATA
#             ("sample": the embedded fox; else .gpu/data/<name> folders, e.g. "sample colmap-mouse")
#   viewer    `spirula bench viewer` at 1920 x 1080, VIEWER_GAUSSIANS (1M and 3M), Vulkan and CUDA, and
#             1M on Vulkan with --readback
#   studio    `spirula bench studio` (issue 25): the studio's viewport frame rate while a model of
#             STUDIO_GAUSSIANS ("6000000 1000000") Gaussians trains on .gpu/data/$STUDIO_DATA
#             (colmap-office_chair) at --max-size 1000, the camera orbiting STUDIO_SECONDS (20), 1920 x 1080,
#             on each of STUDIO_DEVICES ("vulkan", the window's); STUDIO_ARGS: extra options
#   mesh      `spirula bench mesh $MESH_PROJECT` (a trained project carried under .gpu/); without
#             MESH_PROJECT, `spirula train $MESH_DATA --steps $MESH_STEPS` first (defaults: the
#             sample, 7000); needs the mesh libraries importable (h200_pipeline_prepare.sh's wheels)
#   mesh_gt   benchmarks/mesh_gt (issue 47): the ground-truth scenes MESH_GT_SCENES ("a,b": about 4 minutes
#             a scene, so c,d,e in a second call) at MESH_GT_SIZE (gpu: 800 x 600, 120 views), rendered
#             on the machine's CPUs, `spirula run` at its defaults on Vulkan, scored; results.json and
#             each scene's score.json kept; needs the mesh libraries (h200_pipeline_prepare.sh's wheels)
#   large     benchmarks/large_model.py: LARGE_GAUSSIANS (10M) at SH 3, bf16 moments, on
#             .gpu/data/$LARGE_DATA (fox), device memory sampled with NVML
#   parity    benchmarks/train_bench.py, ours (Vulkan) then gsplat, shared inputs, seed 0, PARITY_STEPS
#             (30000) on each of PARITY_DATA ("fox"): the kernel-parity speed and VRAM ratios
#   overhead  benchmarks/step_overhead.py (h200_common.sh's compare) on OVERHEAD ("fox:15000")
#   renderer  benchmarks/parity_gsplat.py: image and every gradient against gsplat's, same
#             Gaussians and camera, on .gpu/data/$RENDERER_DATA (office_chair)
#   geometry  benchmarks/geometry_variants.py: the geometry phase's variants GEOMETRY_VARIANTS (the multi-view
#             geometric term and the photometric one off and on: "off= mv0.03=--lambda-multiview 0.03
#             rgb0.2=--lambda-mvrgb 0.2" (PGSR's weights), NAME=FLAGS
#             separated by spaces, flags joined by commas) at GEOMETRY_STEPS (7000) and --max-size 1000, seeds
#             GEOMETRY_SEEDS (0 1 2), 4 at a time, on GEOMETRY_DATA ("colmap-office_chair colmap-mouse"):
#             held-out PSNR and normal_consistency per variant (issue 47 item 1)
#   appearance benchmarks/appearance_exposure.py on .gpu/data/$APPEARANCE_DATA (office_chair), 7000 steps
#   partition benchmarks/partition_quality.py: PARTITION_DATA ("mouse office_chair") each split in 2, whole
#             against partitioned at PARTITION_STEPS (7000), MCMC 1M, --max-size 1000; COLMAP folders
#             carried as .gpu/data/colmap-<name> (cp -r shared/data/mouse, shared/data/office_chair/reference)
#   fast      issue 25's time to quality: quality_bench.py ours --preset $FAST_PRESET (fast) on each of
#             FAST_DATA ("office_chair fox mouse", .gpu/data/<name>), each alone, scored by our renderer
#             at FAST_SCORE_AT (2000,4000,6000,8000) and the end; then the first step and seconds at or
#             above FAST_TARGETS (gsplat-default's 30k PSNR: fox=30.15,mouse=19.171,office_chair=32.82);
#             FAST_STEPS: other than the preset's steps
#   quality   benchmarks/h200_quality.sh with its own settings (DATASETS, SEEDS, TIMED, ...); it
#             sources .gpu/gpu-env.sh itself (a second time would cost gsplat's build again): alone
#   pipeline  benchmarks/h200_pipeline.sh (video/photos -> SfM -> train -> mesh); carry .gpu-pipe
#             instead (benchmarks/h200_pipeline_prepare.sh); alone
# Settings: SPIRULA_COMMIT (else .gpu/COMMIT, else git, else "unknown"); BUDGET_S (570): every
# command is killed at the deadline, none starts with less than 10 s left; DEVICES ("vulkan cuda")
# for raster, train, viewer; VIEWER_GAUSSIANS, VIEWER_ARGS (extra `bench viewer` options);
# SPIRULA (the command, "python3 -m spirula.engine.cli"). Without .gpu/gpu-env.sh (or with GPU_ENV=0) it runs with this
# machine's python3 (tests/test_benchmarks_layout.py runs the viewer protocol on lavapipe).
# Writes: <protocol>/ (its JSON and logs), manifest.jsonl (one line per protocol: rc, seconds,
# skipped reason), gpu.txt (nvidia-smi), and prints a short table last.
set -u
PROTOCOLS="raster train viewer studio mesh mesh_gt large parity overhead renderer geometry appearance partition fast quality pipeline"
if [ "${1:-}" = --list ]; then
  sed -n 's/^#   \([a-z_]*\) \+\(.*\)/\1: \2/p' "$0" | grep -E "^($(echo $PROTOCOLS | tr ' ' '|')):"
  exit 0
fi
want=${*:-raster viewer train}
for p in $want; do
  case " $PROTOCOLS " in *" $p "*) ;; *) echo "gpu.sh: unknown protocol '$p' (bash benchmarks/gpu.sh --list)" >&2; exit 2;; esac
done
case " $want " in
  *" quality "*|*" pipeline "*) [ "$(echo $want | wc -w)" -gt 1 ] && {
    echo "gpu.sh: quality and pipeline source their own environment: run each alone" >&2; exit 2; } ;;
esac
t0=$(date +%s)
deadline=$(( t0 + ${BUDGET_S:-570} ))
commit=${SPIRULA_COMMIT:-$(cat .gpu/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export SPIRULA_COMMIT=$commit
R=${OUT:-/tmp}/$(date -u +%F)-$commit
SPIRULA=${SPIRULA:-python3 -m spirula.engine.cli}
DEVICES=${DEVICES:-vulkan cuda}
mkdir -p "$R"

run() {  # run DIR SECONDS CMD...: one command of a protocol, killed at the deadline, logged in DIR
  local dir=$1 limit=$2; shift 2
  local left=$(( deadline - $(date +%s) ))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ -n "${DRY_RUN:-}" ]; then echo "  $*"; return 0; fi
  if [ "$limit" -lt 10 ]; then echo "  SKIPPED (time): $*"; return 124; fi
  echo "  \$ $*" >> "$dir/commands.txt"
  timeout "$limit" "$@" >> "$dir/stdout.txt" 2>> "$dir/stderr.txt" || { local rc=$?; echo "  FAILED ($rc): $*"; tail -3 "$dir/stderr.txt"; return $rc; }
}

have() { python3 -c "import $1" 2>/dev/null; }

data_dir() {  # data_dir NAME: fails (3, the reason on stdout) when .gpu/data/NAME was not carried
  if [ -z "${DRY_RUN:-}" ] && [ ! -d ".gpu/data/$1" ]; then echo "skipped: .gpu/data/$1 not carried"; return 3; fi
}

p_raster() {
  local d=$1 rc=0
  for dev in $DEVICES; do run "$d" 240 $SPIRULA bench raster --device $dev --json "$d/raster-$dev.json" || rc=$?; done
  if [ -n "${DRY_RUN:-}" ] || have gsplat; then
    run "$d" 300 python3 benchmarks/raster_bench_gsplat.py --json "$d/raster-gsplat.json" || rc=$?
  else echo "  gsplat does not import: no peer raster run"; fi
  return $rc
}

p_train() {
  local d=$1 rc=0 data name
  for data in ${TRAIN_DATA:-sample}; do
    # "sample": the embedded fox; else a dataset carried as .gpu/data/<name>
    name=$data; [ "$data" = sample ] && name=fox
    for dev in $DEVICES; do
      run "$d" 240 $SPIRULA bench train --device $dev --steps "${TRAIN_STEPS:-2000}" --max-size 1000 \
        $([ "$data" = sample ] || echo "--data .gpu/data/$data") --json "$d/train-$name-$dev.json" || rc=$?
    done
  done
  return $rc
}

p_viewer() {
  local d=$1 rc=0 sizes=${VIEWER_GAUSSIANS:-1000000 3000000}
  for dev in $DEVICES; do
    for n in $sizes; do
      # 60 warm-up frames: with 5, the 6M frames still sped up from 24 to 7 ms during the timed
      # ones (fast-2026-12-06/viewer); with 60 they are steady (speed-2026-12-06c/)
      run "$d" 240 $SPIRULA bench viewer --device $dev --gaussians $n --frames 120 --warmup 60 ${VIEWER_ARGS:-} \
        --json "$d/viewer-$dev-$n.json" || rc=$?
    done
  done
  run "$d" 240 $SPIRULA bench viewer --device vulkan --gaussians ${sizes%% *} --readback ${VIEWER_ARGS:-} \
    --json "$d/viewer-vulkan-${sizes%% *}-readback.json" || rc=$?
  return $rc
}

p_studio() {  # the model's random init and the engine's warm-up take about a minute at 6M before the orbit
  local d=$1 rc=0 data=${STUDIO_DATA:-colmap-office_chair}
  data_dir "$data" || return 3
  for dev in ${STUDIO_DEVICES:-vulkan}; do
    for n in ${STUDIO_GAUSSIANS:-6000000 1000000}; do
      run "$d" 300 $SPIRULA bench studio --device $dev --data ".gpu/data/$data" --gaussians $n --max-size 1000 \
        --seconds "${STUDIO_SECONDS:-20}" ${STUDIO_ARGS:-} --json "$d/studio-$dev-$n.json" || rc=$?
    done
  done
  return $rc
}

p_mesh() {
  local d=$1 project=${MESH_PROJECT:-}
  if [ -z "${DRY_RUN:-}" ] && ! have "skimage, xatlas, fast_simplification, trimesh"; then
    echo "skipped: the mesh libraries do not import (carry h200_pipeline_prepare.sh's wheels)"; return 3
  fi
  if [ -z "$project" ]; then
    project=/tmp/gpu-mesh-project
    run "$d" 400 $SPIRULA train "${MESH_DATA:-resources/sample/fox}" -o $project --steps "${MESH_STEPS:-7000}" || return $?
  fi
  run "$d" 400 $SPIRULA bench mesh "$project" --json "$d/mesh.json"
}

p_mesh_gt() {  # the scenes' images stay in /tmp (the device brings back a few files): the scores come back
  local d=$1 w=/tmp/mesh_gt-work rc=0 f
  if [ -z "${DRY_RUN:-}" ] && ! have "skimage, xatlas, fast_simplification, trimesh"; then
    echo "skipped: the mesh libraries do not import (carry h200_pipeline_prepare.sh's wheels)"; return 3
  fi
  run "$d" 600 python3 -m benchmarks.mesh_gt run --size "${MESH_GT_SIZE:-gpu}" --scenes "${MESH_GT_SCENES:-a,b}" \
    --out $w --device vulkan || rc=$?
  [ -n "${DRY_RUN:-}" ] && return 0
  for f in $w/*/score.json; do [ -f "$f" ] && cp "$f" "$d/score-$(basename "$(dirname "$f")").json"; done
  [ -f $w/results.json ] && cp $w/results.json "$d/results.json"
  return $rc
}

p_large() {
  data_dir "${LARGE_DATA:-fox}" || return 3
  run "$1" 400 python3 benchmarks/large_model.py --data ".gpu/data/${LARGE_DATA:-fox}" --gaussians "${LARGE_GAUSSIANS:-10000000}" \
    --steps 300 --adam-moments bf16 --vram
}

p_parity() {
  local d=$1 rc=0
  for name in ${PARITY_DATA:-fox}; do
    data_dir "$name" || { rc=3; continue; }
    for tr in ours-vulkan gsplat; do
      run "$d" 560 python3 benchmarks/train_bench.py --trainer $tr --data ".gpu/data/$name" --seed 0 \
        --steps "${PARITY_STEPS:-30000}" --vram || rc=$?
    done
  done
  return $rc
}

p_overhead() {
  local d=$1
  [ -n "${DRY_RUN:-}" ] && { echo "  compare ${OVERHEAD:-fox:15000} (benchmarks/h200_common.sh)"; return 0; }
  (OUT=$d; source benchmarks/h200_common.sh; compare "${OVERHEAD:-fox:15000}") >> "$d/stdout.txt"
}

p_renderer() {
  data_dir "${RENDERER_DATA:-office_chair}" || return 3
  run "$1" 300 python3 benchmarks/parity_gsplat.py --data ".gpu/data/${RENDERER_DATA:-office_chair}" --count 200000
}

p_geometry() {
  local d=$1 data="" v args=()
  for name in ${GEOMETRY_DATA:-colmap-office_chair colmap-mouse}; do
    data_dir "$name" >/dev/null && data="$data .gpu/data/$name"
  done
  [ -n "$data" ] || [ -n "${DRY_RUN:-}" ] || { echo "skipped: no GEOMETRY_DATA dataset carried in .gpu/data"; return 3; }
  for v in ${GEOMETRY_VARIANTS:-off= mv0.03=--lambda-multiview,0.03 rgb0.2=--lambda-mvrgb,0.2}; do
    args+=(--variant "${v//,/ }")
  done
  run "$d" 590 python3 benchmarks/geometry_variants.py --data $data --steps "${GEOMETRY_STEPS:-7000}" --max-size 1000 \
    --seeds ${GEOMETRY_SEEDS:-0 1 2} --jobs 4 --budget $(( deadline - $(date +%s) - 15 )) "${args[@]}" \
    --work /tmp/gpu-geometry --json "$d/geometry.json"; local rc=$?
  [ -f "$d/stdout.txt" ] && tail -12 "$d/stdout.txt"
  return $rc
}

p_appearance() {
  data_dir "${APPEARANCE_DATA:-office_chair}" || return 3
  run "$1" 560 python3 benchmarks/appearance_exposure.py --data ".gpu/data/${APPEARANCE_DATA:-office_chair}" \
    --steps 7000 --max-size 1000
}

p_partition() {
  local d=$1 rc=0 data
  for name in ${PARTITION_DATA:-mouse office_chair}; do
    data_dir "colmap-$name" || { rc=3; continue; }
    data=".gpu/data/colmap-$name"
    run "$d" 560 python3 benchmarks/partition_quality.py --data "$data" --parts 2 --steps "${PARTITION_STEPS:-7000}" \
      --max-size 1000 --budget 1000000 --init-scale 0.1 --device vulkan --json "$d/partition-$name.json" || rc=$?
  done
  return $rc
}

p_fast() {  # 3 (skipped) only when no dataset was carried
  local d=$1 rc=0 ran=0 missing=""
  for name in ${FAST_DATA:-office_chair fox mouse}; do
    data_dir "$name" >/dev/null || { missing="$missing $name"; continue; }
    ran=1
    run "$d" "${FAST_RUN_S:-60}" python3 benchmarks/quality_bench.py --trainer ours-mcmc --cap 200000 \
      --preset "${FAST_PRESET:-fast}" ${FAST_STEPS:+--steps $FAST_STEPS} --scorer ours --data ".gpu/data/$name" \
      --score-at "${FAST_SCORE_AT:-2000,4000,6000,8000}" || rc=$?
  done
  [ -n "${DRY_RUN:-}" ] || [ ! -f "$d/stdout.txt" ] || python3 benchmarks/quality_trajectory.py "$d/stdout.txt" \
    --targets "${FAST_TARGETS:-fox=30.15,mouse=19.171,office_chair=32.82}" | tee "$d/time-to-target.txt"
  [ -n "$missing" ] && echo "  not carried:$missing (.gpu/data/<name>)"
  [ "$ran" = 1 ] || { echo "skipped: no FAST_DATA dataset carried in .gpu/data"; return 3; }
  return $rc
}

p_quality() {  # its table (quality_collect.py) is the end of its stdout
  (export OUT=$1 BUDGET_S=$(( deadline - $(date +%s) )); run "$1" 600 bash benchmarks/h200_quality.sh); local rc=$?
  [ -f "$1/stdout.txt" ] && tail -40 "$1/stdout.txt"
  return $rc
}

p_pipeline() {
  (export OUT=$1 BUDGET_S=$(( deadline - $(date +%s) - 10 )); run "$1" 600 bash benchmarks/h200_pipeline.sh); local rc=$?
  [ -f "$1/stdout.txt" ] && tail -40 "$1/stdout.txt"
  return $rc
}

case " $want " in
  *" quality "*|*" pipeline "*) ;;                      # these two source their own environment
  *) if [ -n "${DRY_RUN:-}" ]; then :; elif [ "${GPU_ENV:-1}" = 1 ] && [ -f .gpu/gpu-env.sh ]; then source .gpu/gpu-env.sh
     else echo "no .gpu/gpu-env.sh: running with this machine's python3 and devices"; fi ;;
esac
export CUDA_DEVICE_ORDER=PCI_BUS_ID TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=16
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$R/gpu.txt" 2>&1
echo "results: $R (commit $commit)"
for p in $want; do
  mkdir -p "$R/$p"
  echo "== $p"
  ts=$(date +%s)
  p_$p "$R/$p" 2>&1 | tee "$R/$p/driver.log"; rc=${PIPESTATUS[0]}
  reason=""; [ "$rc" = 3 ] && reason=$(tail -1 "$R/$p/driver.log")
  printf '{"protocol": "%s", "rc": %d, "seconds": %d, "commit": "%s", "skipped": "%s"}\n' \
    "$p" "$rc" $(( $(date +%s) - ts )) "$commit" "${reason//\"/\'}" >> "$R/manifest.jsonl"
done
[ -n "${DRY_RUN:-}" ] && exit 0
python3 benchmarks/gpu_summary.py "$R"
