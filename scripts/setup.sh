#!/usr/bin/env bash
# Idempotent set-up for every entry point: a virtualenv with the package, its extras and the test tools,
# and (with --services) what the tests need from the machine: the PostgreSQL server, the Redis broker of
# the Celery tests, and Debian's chromium for the review page's browser test (Playwright drives it; it
# never downloads a browser).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
fi
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
  # The runtime extras the tests exercise, and the test tools (a dependency group: not published).
  .venv/bin/pip install --quiet --upgrade "pip>=25.1"
  .venv/bin/pip install --quiet -e ".[postgres,celery,kubernetes,plots]" --group test
  touch "$stamp"
fi

if [ "${1:-}" = "--services" ]; then
  if ! command -v pg_isready >/dev/null 2>&1; then
    echo "setup: installing PostgreSQL" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    echo "setup: starting PostgreSQL" >&2
    version=$(ls /etc/postgresql | sort -V | tail -1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
  pg_isready -h 127.0.0.1 -p 5432
  if [ ! -x /usr/bin/chromium ]; then
    echo "setup: installing chromium" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi

  # Redis: the Celery broker of the CeleryExecutor end-to-end test (and of docker/).
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "setup: installing Redis" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    echo "setup: starting Redis" >&2
    redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save '' --appendonly no >/dev/null
    for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
  fi
  redis-cli -h 127.0.0.1 -p 6379 ping
fi
