#!/usr/bin/env bash
# Set up (idempotent) and run the test suite on software Vulkan or a real GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
