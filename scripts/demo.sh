#!/usr/bin/env bash
# Starts an embedded Airflow (SQLite, LocalExecutor) with the provider, the scheduler DAG and example
# workloads, feeds a workload, and prints where to look and what actually ran (FIFO vs plan).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/gpu-scheduler demo "$@"
