#!/bin/bash
# usage: run1.sh data name seed steps size extra...
cd /work/wt-ncc
data=$1; name=$2; seed=$3; steps=$4; size=$5; shift 5
t0=$(date +%s)
PYTHONPATH=/work/wt-ncc SPIRULA_EVAL_GEOMETRY=1 timeout 3000 .venv/bin/python -m engine.cli train $data -o /tmp/ncc/runs/$name --steps $steps --max-size $size --seed $seed --geometry --checkpoint-every 0 "$@" > /tmp/ncc/runs/$name.log 2>&1
rc=$?
.venv/bin/python -c "
import json;m=json.load(open('/tmp/ncc/runs/$name/metrics.json'))
print('$name', round(m['psnr'],3), round(m['ssim'],4), round(m.get('normal_consistency') or -1,4), round(m.get('multiview_consistency') or -1,4), round(m['train_seconds'],1), m['num_gaussians'], 'rc=$rc', '$*')" >> /tmp/ncc/runs/results.txt 2>/dev/null || echo "$name FAILED rc=$rc" >> /tmp/ncc/runs/results.txt
