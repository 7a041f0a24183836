#!/usr/bin/env bash
# One GPU's chain of benchmark runs for h200_session9.sh (run detached from $S/repo):
#   bash h200_session9_chain.sh GPU JOB...   JOB = kind:data[:extra train_bench option]
# kinds: gsplat, ours (this build), base (the build in $S/base), raster / base-raster
# (`spirula bench raster`, 2M Gaussians). Each run has the GPU to itself; our runs wait for
# slangpy ($S/ready, PART=B).
S=/tmp/s9
gpu=$1; shift
export PYTHONUNBUFFERED=1 CUDA_DEVICE_ORDER=PCI_BUS_ID BENCH_NVML_INDEX=$gpu TORCH_CUDA_ARCH_LIST=9.0
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
note() { echo "$(date +%T) gpu$gpu $*" >> $S/progress; }
for job in "$@"; do
  IFS=: read -r kind data extra <<< "$job"
  note "start $job"
  if [ "$kind" != gsplat ]; then
    while [ ! -f $S/ready ]; do sleep 2; done
  fi
  case $kind in
    base|base-raster) dir=$S/base commit=a17c825 ;;
    *) dir=$S/repo commit=$SPIRULA_COMMIT ;;
  esac
  adapter=
  [ "$kind" != gsplat ] && adapter=$(PYTHONPATH=$S/site python3 $S/repo/benchmarks/gpu_map.py $gpu 2>>$S/errors-$gpu.log)
  (
    cd $dir
    export PYTHONPATH=$S/site:$dir SPIRULA_COMMIT=$commit
    case $kind in
      gsplat) CUDA_VISIBLE_DEVICES=$gpu timeout 1500 python3 benchmarks/train_bench.py --trainer gsplat --data $S/$data \
                --seed 0 --steps 30000 --vram ;;
      ours|base) SPIRULA_ADAPTER=$adapter timeout 700 python3 benchmarks/train_bench.py --trainer ours-vulkan \
                   --data $S/$data --seed 0 --steps 30000 --vram ${extra:+$extra} ;;
      raster|base-raster) SPIRULA_ADAPTER=$adapter timeout 200 python3 -m engine.cli bench raster --device vulkan \
                            --json $S/raster-$kind.json 2> $S/raster-$kind.txt ;;
    esac
  ) 2>>$S/errors-$gpu.log | grep -E '^RESULT ' | sed "s/^RESULT {/RESULT {\"job\": \"$job\", \"nvml_gpu\": $gpu, /" \
    >> $S/results-$gpu.jsonl
  note "end $job"
done
touch $S/chain$gpu.done
