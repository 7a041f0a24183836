#!/usr/bin/env bash
# Set up (idempotent) and run the main job on the embedded sample (fox, 960 px):
# train 3D Gaussians, evaluate on held-out views, export runs/fox/splat.ply.
# Extra arguments go to `spirula train` (e.g. --steps 30000 --device cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/spirula train resources/sample/fox -o runs/fox --steps "${STEPS:-3000}" --max-size 480 "$@"
