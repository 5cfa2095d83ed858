"""Packaging: Airflow sees the provider, its plugin and its DB manager; the shipped DAGs import cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from gpu_airflow_support import REPO_DAGS

from airflow_gpu_scheduler.config import OPTIONS
from airflow_gpu_scheduler.get_provider_info import get_provider_info


def test_provider_info_is_valid_against_airflows_schema():
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "airflow-gpu-scheduler"
    assert info["db-managers"] == ["airflow_gpu_scheduler.db.manager.GpuSchedulerDBManager"]


def test_shipped_dags_import_without_errors():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO_DAGS))
    assert bag.import_errors == {}
    assert {
        "gpu_scheduler",
        "example_gpu_training",
        "example_gpu_realtime_inference",
        "example_gpu_batch_inference",
        "example_gpu_quantization",
    } <= set(bag.dag_ids)
    assert bag.dags["gpu_scheduler"].max_active_runs == 1
    # The fail-open watchdog is its own DAG: a crashing or paused planning DAG cannot stop it.
    assert [t.task_type for t in bag.dags["gpu_scheduler_watchdog"].tasks] == ["GpuFailOpenOperator"]


@pytest.mark.airflow
def test_airflow_lists_the_provider_its_plugin_hook_and_settings(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        PATH=str(Path(sys.executable).parent) + os.pathsep + env["PATH"],
    )

    def airflow(*args: str) -> str:
        done = subprocess.run(["airflow", *args], env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    assert "airflow-gpu-scheduler" in airflow("providers", "list")
    assert "gpu_scheduler" in airflow("plugins")
    hooks = [line for line in airflow("providers", "hooks").splitlines() if "gpu_scheduler_metadata" in line]
    assert len(hooks) == 1 and "GpuSchedulerMetadataHook" in hooks[0] and "airflow-gpu-scheduler" in hooks[0]
    names = airflow("config", "list", "--section", "gpu_scheduler")
    assert all(f"# {o.name} =" in names for o in OPTIONS), names
    env["AIRFLOW__GPU_SCHEDULER__PLANNING_BUDGET_S"] = "7.5"
    values = airflow("config", "list", "--section", "gpu_scheduler", "--show-values")
    assert "planning_budget_s = 7.5" in values and "fail_open_after_s = 300.0" in values, values


@pytest.mark.airflow
def test_migration_files_create_the_same_tables_as_the_models(tmp_path):
    """``airflow db migrate --use-migration-files`` runs our alembic history: it must match models.py."""
    from sqlalchemy import create_engine, inspect

    from airflow_gpu_scheduler.models import metadata

    db = tmp_path / "airflow.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}",
        PATH=str(Path(sys.executable).parent) + os.pathsep + env["PATH"],
    )
    done = subprocess.run(
        ["airflow", "db", "migrate", "--use-migration-files"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    engine = create_engine(f"sqlite:///{db}")
    try:
        inspector = inspect(engine)
        for table in metadata.tables.values():
            columns = {c["name"]: c["nullable"] for c in inspector.get_columns(table.name)}
            assert columns == {c.name: c.nullable for c in table.columns}, table.name
            assert {i["name"] for i in inspector.get_indexes(table.name)} == {i.name for i in table.indexes}
    finally:
        engine.dispose()
