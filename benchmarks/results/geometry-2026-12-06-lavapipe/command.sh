#!/usr/bin/env bash
# geometry phase on/off, held-out PSNR, software Vulkan, small sizes (issue 21 item 2)
cd /work/main
for data in mouse office_chair/reference; do for seed in 0 1; do for geo in off on; do
  name=$(basename $(dirname $data/x))-$(basename $data)-$geo-s$seed; name=${name//\//_}
  extra=""; [ $geo = on ] && extra="--geometry"
  PYTHONPATH=$PWD .venv/bin/python -m engine.cli train /work/shared/data/$data -o /tmp/g27/$name --steps 2500 --max-size 200 --seed $seed $extra > /tmp/g27/$name.log 2>&1
  echo "$name $(python3 -c "import json;m=json.load(open('/tmp/g27/$name/metrics.json'));print(round(m['psnr'],3), round(m['ssim'],4), round(m['train_seconds'],1), m['num_gaussians'])")" >> /tmp/g27/results.txt
done; done; done
echo done >> /tmp/g27/results.txt
