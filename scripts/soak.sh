#!/usr/bin/env bash
# A soak under faults: a real Airflow on PostgreSQL (CeleryExecutor with Redis when it is up) runs the
# planner and the watchdog DAGs under a steady stream of GPU work while the planning task is killed, its
# database connections are terminated, the scheduler restarts and the planner DAG is paused.
# Exits non-zero if a GPU task instance was lost or stranded, or a plan was half-applied.
#   scripts/soak.sh [--minutes N] [--json PATH] [--seed N] [--keep-home] ...   (--help lists all)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --services >/dev/null
exec .venv/bin/python tests/system/soak.py "$@"
