#!/usr/bin/env bash
# The seven-scenario benchmark: all policies side by side, JSON, schedule CSV and plots in artifacts/.
# Extra arguments go to `gpu-scheduler bench`, e.g. scripts/bench.sh --quick
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mkdir -p artifacts
exec .venv/bin/gpu-scheduler bench --json artifacts/bench.json --schedule artifacts/schedule.csv \
  --plots artifacts/plots "$@"
