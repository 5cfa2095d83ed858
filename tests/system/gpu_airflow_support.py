"""Helpers of the system tests (imported by name: pytest puts this folder on sys.path).

Importing it first gives the test process its own AIRFLOW_HOME, before anything imports airflow.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

# Under pytest, tests/conftest.py made this process's home already; a script (soak.py) makes its own.
_pid, _, _home = os.environ.get("GPU_SCHED_TEST_HOME", "").partition(":")
HOME = Path(_home) if _pid == str(os.getpid()) else Path(tempfile.mkdtemp(prefix="gpu-sched-tests-"))
os.environ["AIRFLOW_HOME"] = str(HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

import pytest
from sqlalchemy import DDL, create_engine
from sqlalchemy.engine import URL

PG_ADMIN = URL.create("postgresql+psycopg2", username="postgres", host="127.0.0.1", port=5432, database="postgres")
DAGS = Path(__file__).parent / "dags"
REPO_DAGS = Path(__file__).parents[2] / "dags"


def postgres_available() -> bool:
    engine = create_engine(PG_ADMIN)
    try:
        with engine.connect():
            return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False
    finally:
        engine.dispose()


class PostgresDatabase:
    """A scratch database on the local server, dropped afterwards."""

    def __init__(self, prefix: str) -> None:
        self.name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self.url = PG_ADMIN.set(database=self.name)
        self._admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")

    def __enter__(self) -> PostgresDatabase:  # noqa: PYI034
        with self._admin.connect() as conn:
            # DDL cannot take a bound parameter: quote the (generated) identifier with the dialect's rules.
            conn.execute(DDL(f"CREATE DATABASE {conn.dialect.identifier_preparer.quote(self.name)}"))
        return self

    def __exit__(self, *exc: object) -> None:
        with self._admin.connect() as conn:
            conn.execute(
                DDL(f"DROP DATABASE IF EXISTS {conn.dialect.identifier_preparer.quote(self.name)} WITH (FORCE)")
            )
        self._admin.dispose()


def database_url(backend: str, home: Path, stack) -> str:
    """A fresh metadata database URL for ``backend`` (``sqlite`` or ``postgres``)."""
    if backend == "sqlite":
        home.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{home / 'airflow.db'}"
    if not postgres_available():
        pytest.skip("PostgreSQL is not reachable on 127.0.0.1:5432")
    db = stack.enter_context(PostgresDatabase("gpu_sched_test"))
    return db.url.render_as_string(hide_password=False)
