#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the embedded sample (fox, 960 px): train 3D
# Gaussians, evaluate on held-out views, export runs/fox/splat.ply. On a real GPU this is
# the full 30,000-step schedule; on software Vulkan (no GPU: everything runs on the CPU)
# a short demonstration run. Extra arguments go to `spirula train` and win.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if .venv/bin/python -c 'import slangpy as s, sys; d = s.Device(type=s.DeviceType.vulkan, enable_hot_reload=False); sys.exit(0 if d.has_feature(s.Feature.software_device) else 1)' 2>/dev/null; then
  echo "[sample] software Vulkan (no GPU): short run, 400 steps at 240 px from 10,000 random points"
  defaults=(--steps 400 --max-size 240 --init-points 10000)
else
  defaults=(--steps 30000 --max-size 960)
fi
exec .venv/bin/spirula train resources/sample/fox -o runs/fox "${defaults[@]}" "$@"
