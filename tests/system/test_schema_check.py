"""An Airflow version or metadata schema the provider does not know is refused before anything is written.

A column is renamed on a database made by the real ``airflow db migrate`` (as a future Airflow
release might do): the planning cycle must refuse, naming the Airflow version and the column, and
leave every task instance and pool as it was; the fail-open watchdog, which needs fewer columns,
still hands the work back to Airflow when the missing column is one only the planner reads.
"""

from __future__ import annotations

import contextlib

import pytest
from metadata_seed import Seeder
from sqlalchemy import DDL, create_engine, select

import airflow_gpu_scheduler.operators.fail_open as watchdog
from airflow_gpu_scheduler import schema_check
from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.models import plan_table
from airflow_gpu_scheduler.operators.fail_open import release_if_planner_down
from airflow_gpu_scheduler.operators.schedule import schedule_cycle
from airflow_gpu_scheduler.schema_check import (
    FAIL_OPEN,
    UnsupportedSchemaError,
    check_metadata_schema,
    installed_airflow_version,
    required_columns,
)

CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 4}}})
PLANNER = RolloutPlanner(PlannerConfig(step_s=60.0, time_limit_s=1.0))


@pytest.fixture
def seeded(hook, metadata_url):
    seed = Seeder(metadata_url)
    seed.dag("gpu_jobs", {"train": {"declaration": {"kind": "training", "gpus": 2, "estimate_s": 60}}})
    seed.run("gpu_jobs", "r0")
    seed.task_instances([{"dag_id": "gpu_jobs", "run_id": "r0", "task_id": "train", "pool_slots": 2, "waited_s": 900}])
    yield seed
    seed.clear()


@contextlib.contextmanager
def renamed(url: str, table: str, column: str):
    """The column renamed for the block (PostgreSQL and SQLite >= 3.25 both rename in place)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(DDL(f"ALTER TABLE {table} RENAME COLUMN {column} TO {column}_renamed"))
        yield
    finally:
        with engine.begin() as conn:
            conn.execute(DDL(f"ALTER TABLE {table} RENAME COLUMN {column}_renamed TO {column}"))
        engine.dispose()


def plans(hook) -> list:
    with hook.get_engine().connect() as conn:
        return conn.execute(select(plan_table.c.id, plan_table.c.method)).all()


def test_the_migrated_schema_of_this_airflow_is_known(hook):
    check_metadata_schema(hook)
    check_metadata_schema(hook, FAIL_OPEN)
    ok, message = hook.test_connection()
    assert ok, message


def test_a_renamed_column_is_refused_by_name_and_nothing_is_written(hook, seeded, metadata_url):
    before = seeded.state()
    with renamed(metadata_url, "task_instance", "priority_weight"):
        with pytest.raises(UnsupportedSchemaError) as refused:
            schedule_cycle(hook, PLANNER, CLUSTER)
        message = str(refused.value)
        assert "task_instance.priority_weight" in message
        assert f"Airflow {installed_airflow_version()}" in message and "Nothing was written" in message
        # The watchdog writes priority weights too: it refuses as well.
        with pytest.raises(UnsupportedSchemaError, match="task_instance.priority_weight"):
            release_if_planner_down(hook, 300.0, lambda: CLUSTER)
        ok, tested = hook.test_connection()
        assert not ok and "task_instance.priority_weight" in tested
    assert seeded.state() == before
    assert plans(hook) == []


def test_a_column_only_the_planner_reads_leaves_the_work_to_fail_open(hook, seeded, metadata_url, monkeypatch):
    monkeypatch.setattr(watchdog, "_stats", lambda: type("S", (), {"incr": print, "gauge": print})())
    with renamed(metadata_url, "dag", "is_paused"):
        with pytest.raises(UnsupportedSchemaError, match="dag.is_paused"):
            schedule_cycle(hook, PLANNER, CLUSTER)
        assert plans(hook) == []
        released = release_if_planner_down(hook, 300.0, lambda: CLUSTER)
    assert released["action"] == "released" and released["released"] == 1
    tis, _ = seeded.state()
    assert tis[("gpu_jobs", "r0", "train", -1)][0] == "gpu_h100"


def test_missing_plan_tables_say_to_run_db_migrate(hook, metadata_url):
    with (
        renamed(metadata_url, "gpu_sched_plan_job", "reason_code"),
        pytest.raises(UnsupportedSchemaError, match="gpu_sched_plan_job.reason_code"),
    ):
        check_metadata_schema(hook)
    engine = create_engine(metadata_url)
    try:
        with engine.begin() as conn:
            conn.execute(DDL("ALTER TABLE gpu_sched_plan_job RENAME TO gpu_sched_plan_job_away"))
        with pytest.raises(UnsupportedSchemaError, match="gpu_sched_plan_job are missing.*airflow db migrate"):
            check_metadata_schema(hook)
    finally:
        with engine.begin() as conn:
            conn.execute(DDL("ALTER TABLE gpu_sched_plan_job_away RENAME TO gpu_sched_plan_job"))
        engine.dispose()


@pytest.mark.parametrize("version", ["3.1.8", "4.0.0"])
def test_an_airflow_outside_the_supported_range_is_refused(hook, monkeypatch, version):
    monkeypatch.setattr(schema_check, "installed_airflow_version", lambda: version)
    with pytest.raises(UnsupportedSchemaError, match=f"Airflow {version} is not supported.*>=3.2,<4"):
        schedule_cycle(hook, PLANNER, CLUSTER)


def test_what_is_checked_is_what_the_hook_declares():
    planning, fail_open = required_columns(), required_columns(FAIL_OPEN)
    assert {"priority_weight", "pool", "pool_slots", "state", "queue"} <= planning["task_instance"]
    assert planning["slot_pool"] >= {"pool", "slots"} and "dag" in planning
    assert "dag" not in fail_open and fail_open["task_instance"] == planning["task_instance"]
    # Notes never stop a plan: a notes table the provider does not know costs the notes only
    # (test_notes.py::test_when_notes_cannot_be_written_the_plan_is_applied_anyway).
    assert "task_instance_note" not in planning
