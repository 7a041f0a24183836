# last call: the pipeline (spirula run with the geometry phase on, the floor fix); then the
# viewer's projection workgroup size 1024 (the default) / 2048, 6M at 1465x766, alternating;
# then the studio at 6M after the "a slice every 0.25 s" change
set -u
export PYTHONUNBUFFERED=1
CHAIR_MODE=refmodel BUDGET_S=280 VIEWS_S=200 ONLY="chair-video book mouse" bash benchmarks/h200_pipeline.sh > /tmp/pipe_stdout.txt 2>&1
cp /tmp/pipe_stdout.txt $OUT/; nvidia-smi -L > $OUT/gpu.txt
tail -14 /tmp/pipe_stdout.txt
(cd $OUT && tar czf /tmp/p.tgz . && find . -mindepth 1 -delete && split -b 15M /tmp/p.tgz p.tgz.)
export PYTHONPATH=/tmp/gpu-site:$PWD
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
V=/tmp/vv; mkdir -p $V; cp .gpu-pipe/final.sh $V/
mkdir -p /tmp/g2048 && cp -r engine shaders /tmp/g2048/ && sed -i "s/^PROJECT_GROUP_SPLATS = 1024/PROJECT_GROUP_SPLATS = 2048/" /tmp/g2048/engine/splat/render.py
grep -c "^PROJECT_GROUP_SPLATS = 2048" /tmp/g2048/engine/splat/render.py >> $V/log.txt
B="bench viewer --gaussians 6000000 --frames 120 --warmup 60 --width 1465 --height 766"
for rep in a b; do
  timeout 60 python3 -m engine.cli $B --json $V/g1024-$rep.json >> $V/log.txt 2>&1
  (cd /tmp/g2048 && PYTHONPATH=/tmp/gpu-site:$PWD timeout 60 python3 -m engine.cli $B --json $V/g2048-$rep.json) >> $V/log.txt 2>&1
done
grep -h "bench viewer on" $V/log.txt
(cd /tmp && tar czf $OUT/vv.tgz vv)
timeout 110 python3 -m engine.cli bench studio --data .gpu-pipe/data/chair-video --gaussians 6000000 --max-size 1000 \
  --seconds 10 --still 3 --json $V/studio-6m.json >> $V/studio-log.txt 2>&1
grep -h "bench studio on\|frames:\|training:\|holds\|below" $V/studio-log.txt
(cd /tmp && tar czf $OUT/vv.tgz vv)
