#!/usr/bin/env bash
# Set up (idempotent) and run the test suite on software Vulkan or a real GPU.
# Two worker processes (pytest-xdist; $SPIRULA_TEST_WORKERS, 0 for one process): on CI's
# 2 cores one process leaves most of a core idle (Python, Qt and subprocess waits beside
# lavapipe's threads). Each file's tests run on one worker (its module fixtures are built
# once), files handed out in collection order (the benchmark scenes of tests/benchmarks
# start early instead of ending the run). Extra arguments go to pytest (a later -n wins).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest -q -n "${SPIRULA_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
