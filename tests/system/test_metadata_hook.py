"""The metadata hook against real metadata databases created by ``airflow db migrate`` (SQLite and PostgreSQL).

Task instances in flight are covered end to end in ``test_e2e.py``; here: the connection, the
provider's tables, pool writes, the plan record and the all-or-nothing apply.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, inspect, text

from airflow_gpu_scheduler.core.levers import Assignment, Levers
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataError, GpuSchedulerMetadataHook


def pools(h) -> dict[str, int]:
    with h.get_engine().connect() as c:
        return dict(c.execute(text("SELECT pool, slots FROM slot_pool")).all())


def plan_row(**over):
    row = {
        "created_s": 1.0,
        "cluster": "{}",
        "method": "milp",
        "status": "optimal",
        "waiting": 1,
        "running": 0,
        "due": 1,
        "rejected": 0,
        "pool_slots": "{}",
        "streaming_reserve": "{}",
        "applied": True,
    }
    return {**row, **over}


def job_row(**over):
    row = {"job_id": "d/r/t/-1", "dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1, "decision": "released"}
    return {**row, **over}


def test_airflow_db_migrate_creates_the_plan_tables_and_stamps_our_version_table(metadata_url):
    engine = create_engine(metadata_url)
    try:
        tables = set(inspect(engine).get_table_names())
        assert {"gpu_sched_plan", "gpu_sched_plan_job", "alembic_version_gpu_sched"} <= tables
        with engine.connect() as c:
            assert (
                c.execute(text("SELECT version_num FROM alembic_version_gpu_sched")).scalar()
                == "0003_gpu_sched_heartbeat"
            )
    finally:
        engine.dispose()


def test_postgres_connection_becomes_a_psycopg2_url_and_errors_never_show_the_password(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_GPU_UNREACHABLE",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": "127.0.0.1",
                "port": 1,
                "login": "planner",
                "password": "s3cr3t-pw",
                "schema": "airflow",
            }
        ),
    )
    h = GpuSchedulerMetadataHook("gpu_unreachable")
    assert h.sqlalchemy_url().drivername == "postgresql+psycopg2"
    with pytest.raises(GpuSchedulerMetadataError) as raised:
        h.get_engine()
    message = str(raised.value)
    assert "gpu_unreachable" in message and "127.0.0.1:1" in message and "s3cr3t-pw" not in message
    assert h.test_connection()[0] is False


def test_unsupported_connection_type_is_named(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_GPU_HTTP", json.dumps({"conn_type": "http", "host": "example.com"}))
    with pytest.raises(GpuSchedulerMetadataError, match="gpu_http.*unsupported conn_type 'http'"):
        GpuSchedulerMetadataHook("gpu_http").sqlalchemy_url()


def test_collect_on_an_empty_airflow_finds_no_work(hook):
    snapshot = hook.collect_gpu_work(now_s=100.0)
    assert snapshot.empty and snapshot.running == () and snapshot.pool_slots == {"default_pool": 128}


def test_apply_creates_the_gpu_pools_and_records_the_plan_in_one_transaction(hook):
    levers = Levers({"gpu_intake": 0, "gpu_h100": 4, "gpu_h100_streaming": 0}, {})
    result = hook.apply_levers(levers, [], record=(plan_row(), [job_row(), job_row(job_id="x", decision="running")]))
    assert pools(hook) == {"default_pool": 128, "gpu_intake": 0, "gpu_h100": 4, "gpu_h100_streaming": 0}
    (plan,) = hook.get_plans()
    assert plan["id"] == result.plan_id and [j["decision"] for j in plan["jobs"]] == ["released", "running"]

    hook.apply_levers(Levers({"gpu_h100": 3, "gpu_h100_streaming": 1}, {}), [])
    assert pools(hook)["gpu_h100"] == 3 and pools(hook)["gpu_h100_streaming"] == 1


def test_apply_refuses_pools_outside_the_gpu_pools_and_writes_nothing(hook):
    before = pools(hook)
    with pytest.raises(ValueError, match="default_pool"):
        hook.apply_levers(Levers({"gpu_h100": 4, "default_pool": 0}, {}), [])
    with pytest.raises(ValueError, match="cpu"):
        hook.apply_levers(Levers({"gpu_h100": 4}, {"d/r/t/-1": Assignment("cpu", 5)}), [])
    assert pools(hook) == before


def test_a_failure_inside_apply_rolls_everything_back(hook):
    hook.apply_levers(Levers({"gpu_h100": 4}, {}), [])
    before = pools(hook)
    bad_record = (plan_row(), [job_row(decision=None)])  # decision is NOT NULL: fails after the pool writes
    with pytest.raises(GpuSchedulerMetadataError, match="rolled back, nothing was changed"):
        hook.apply_levers(Levers({"gpu_h100": 1, "gpu_a100": 8}, {}), [], record=bad_record)
    assert pools(hook) == before, "pools must not stay closed or half-written"
    assert hook.get_plans() == []


def test_review_reads_latest_plan_summaries_and_one_jobs_history(hook):
    assert hook.latest_plan() is None and hook.plan_summaries() == []
    first = hook.store_plan(
        plan_row(created_s=10.0),
        [job_row(decision="held", reason="all 4 h100 GPUs are busy", reason_code="busy", deadline_s=99.0)],
    )
    second = hook.store_plan(
        plan_row(created_s=20.0, moved=1),
        [job_row(), job_row(job_id="d/r/u/-1", task_id="u", decision="held", reason_code="later")],
    )
    latest = hook.latest_plan()
    assert latest["id"] == second and latest["moved"] == 1
    assert [j["job_id"] for j in latest["jobs"]] == ["d/r/t/-1", "d/r/u/-1"]
    summaries = hook.plan_summaries(limit=5)
    assert [p["id"] for p in summaries] == [second, first]
    assert summaries[0]["decisions"] == {"released": 1, "held": 1} and "jobs" not in summaries[0]
    history = hook.job_history("d/r/t/-1")
    assert [(h["plan_id"], h["decision"], h["created_s"]) for h in history] == [
        (second, "released", 20.0),
        (first, "held", 10.0),
    ]
    assert history[1]["reason_code"] == "busy" and history[1]["deadline_s"] == 99.0
    assert hook.job_history("no/such/job/-1") == []
    with hook.get_engine().connect() as conn:  # the review page passes its own connection
        assert hook.latest_plan(conn=conn)["id"] == second
        assert hook.gpu_pool_intervals(0.0, conn=conn) == []


def test_previous_starts_are_the_newest_plans_promises_to_waiting_jobs(hook):
    assert hook.previous_starts() == {}
    hook.store_plan(plan_row(created_s=10.0), [job_row(decision="held", planned_start_s=500.0)])
    hook.store_plan(
        plan_row(created_s=20.0),
        [
            job_row(decision="released", planned_start_s=20.0),
            job_row(job_id="d/r/u/-1", task_id="u", decision="held", planned_start_s=900.0),
            job_row(job_id="d/r/v/-1", task_id="v", decision="unplanned"),
            job_row(job_id="d/r/w/-1", task_id="w", decision="running", planned_start_s=5.0),
        ],
    )
    assert hook.previous_starts() == {"d/r/t/-1": 20.0, "d/r/u/-1": 900.0}


def test_plans_stored_with_the_earlier_word_for_released_read_back_as_released(hook):
    # Before one vocabulary, a release was stored as decision "due"; such rows still read (and count) as released.
    plan_id = hook.store_plan(plan_row(), [job_row(decision="due"), job_row(job_id="d/r/u/-1", task_id="u")])
    assert [j["decision"] for j in hook.latest_plan()["jobs"]] == ["released", "released"]
    assert hook.plan_summaries()[0]["decisions"] == {"released": 2}
    assert hook.newest_plan() == (
        plan_id,
        {j: {**hook.newest_plan()[1][j], "decision": "released"} for j in ("d/r/t/-1", "d/r/u/-1")},
    )
    assert [h["decision"] for h in hook.job_history("d/r/t/-1")] == ["released"]
