"""System tests: a real Airflow (its CLI, scheduler, api-server, workers), PostgreSQL, Redis, Chromium.

``scripts/test.sh`` starts the services first (``scripts/setup.sh --services``). Every test here is marked
``system``; ``scripts/test.sh --fast`` leaves them out. The support module reuses the private AIRFLOW_HOME
that tests/conftest.py made, before airflow is imported.
"""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import gpu_airflow_support  # noqa: F401
import pytest
from gpu_airflow_support import database_url
from sqlalchemy import text

from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook

CONN_ID = "gpu_test_meta"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.system)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def metadata_url(request, tmp_path_factory):
    """A metadata DB migrated by the real ``airflow db migrate`` (which also runs our DB manager)."""
    home = tmp_path_factory.mktemp(f"migrated-{request.param}")
    with contextlib.ExitStack() as stack:
        url = database_url(request.param, home, stack)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            AIRFLOW_HOME=str(home),
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=url,
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            PATH=str(Path(sys.executable).parent) + os.pathsep + env["PATH"],
        )
        done = subprocess.run(
            ["airflow", "db", "migrate"], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "GpuSchedulerDBManager" in done.stdout + done.stderr
        yield url


@pytest.fixture
def hook(metadata_url, monkeypatch):
    from sqlalchemy.engine import make_url

    url = make_url(metadata_url)
    if url.get_backend_name() == "sqlite":
        conn = {"conn_type": "sqlite", "host": url.database}
    else:
        conn = {
            "conn_type": "postgres",
            "host": url.host,
            "port": url.port,
            "login": url.username,
            "schema": url.database,
        }
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(conn))
    h = GpuSchedulerMetadataHook(CONN_ID)
    yield h
    with h.get_engine().begin() as c:  # leave the DB as migrate made it for the next test
        c.execute(text("DELETE FROM gpu_sched_plan_job"))
        c.execute(text("DELETE FROM gpu_sched_plan"))
        c.execute(text("DELETE FROM slot_pool WHERE pool <> 'default_pool'"))
    h.close()


@pytest.fixture(scope="session")
def distributions(tmp_path_factory):
    """The sdist and the wheel built from it, once per session."""
    from venvs import build_distributions

    return build_distributions(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def fresh_venv(distributions):
    """``bin`` of a virtualenv where the wheel alone was installed (dependencies resolved by pip, no extras)."""
    from venvs import cached_venv

    with cached_venv("wheel", distributions[0]) as bin_dir:
        yield bin_dir
