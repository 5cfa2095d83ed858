#!/usr/bin/env bash
# Runs the whole test suite (core, and the provider on a real Airflow with SQLite and PostgreSQL).
# Extra arguments go to pytest, e.g. scripts/test.sh tests/core -x
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --services || exit 1
mkdir -p artifacts
# The type check of the package ([tool.mypy] in pyproject.toml) first: a type error fails the run.
.venv/bin/mypy || exit 1
.venv/bin/python -m pytest -p no:cacheprovider -ra --junitxml=artifacts/junit.xml "${@:-tests}"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests -- that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
