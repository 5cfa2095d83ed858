#!/usr/bin/env bash
# Runs the whole test suite (tests/unit: the core and the provider's Airflow side; tests/system: the provider
# on a real Airflow with SQLite and PostgreSQL, Celery workers and a browser). Extra arguments go to pytest,
# e.g. scripts/test.sh tests/system/test_e2e.py -x
#
# --fast: the unit tests only, less those marked slow, without installing or starting any service (no
# PostgreSQL, Redis or Chromium); extra arguments are added, e.g. scripts/test.sh --fast -x -k planner
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fast" ]; then
  shift
  scripts/setup.sh || exit 1
  set -- tests/unit -m "not slow" "$@"
else
  scripts/setup.sh --services || exit 1
  [ "$#" -gt 0 ] || set -- tests
fi
mkdir -p artifacts
# Lint, format and the type check of the package first ([tool.ruff] and [tool.mypy] in pyproject.toml):
# any finding fails the run.
.venv/bin/ruff check . || exit 1
.venv/bin/ruff format --check . || exit 1
.venv/bin/mypy || exit 1
.venv/bin/python -m pytest -p no:cacheprovider -ra --junitxml=artifacts/junit.xml "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests -- that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
