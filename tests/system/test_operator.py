"""The operator's own behaviour: bad input fails before anything is written; an empty queue is a no-op."""

from __future__ import annotations

import json

import pytest

from airflow_gpu_scheduler.cluster_config import ClusterConfigError
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataError
from airflow_gpu_scheduler.operators.schedule import GpuScheduleOperator


@pytest.fixture
def cluster_file(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"gpu_types": {"h100": {"count": 4}}}))
    return str(path)


def test_unreachable_database_fails_with_a_clear_error_and_no_password(monkeypatch, cluster_file):
    monkeypatch.setenv(
        "AIRFLOW_CONN_GPU_DOWN",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": "127.0.0.1",
                "port": 1,
                "login": "u",
                "password": "hunter2x",
                "schema": "a",
            }
        ),
    )
    op = GpuScheduleOperator(task_id="plan", gpu_scheduler_conn_id="gpu_down", cluster_file=cluster_file)
    with pytest.raises(GpuSchedulerMetadataError) as raised:
        op.execute({})
    assert "gpu_down" in str(raised.value) and "hunter2x" not in str(raised.value)


def test_invalid_cluster_fails_before_the_database_is_touched(tmp_path):
    bad = tmp_path / "cluster.json"
    bad.write_text('{"gpu_types": {"h100": {"count": -1}}}')
    # The connection does not even exist: the cluster error must come first.
    op = GpuScheduleOperator(task_id="plan", gpu_scheduler_conn_id="no_such_conn", cluster_file=str(bad))
    with pytest.raises(ClusterConfigError, match="GPU type 'h100': field 'count'"):
        op.execute({})


@pytest.mark.parametrize("value", ["soon", "-3", "nan"])
def test_repeat_for_must_be_a_non_negative_number(value, cluster_file, monkeypatch):
    op = GpuScheduleOperator(task_id="plan", cluster_file=cluster_file, repeat_for_s=value)
    with pytest.raises(ValueError, match="repeat_for_s"):
        op.execute({})


def test_empty_queue_is_a_no_op_on_a_real_metadata_db(hook, cluster_file):
    op = GpuScheduleOperator(
        task_id="plan",
        gpu_scheduler_conn_id=hook.gpu_scheduler_conn_id,
        cluster_file=cluster_file,
        repeat_for_s=2,
        repeat_every_s=1,
    )
    summary = op.execute({})
    assert summary["noop"] is True and summary["cycles"] == 2
    assert hook.get_plans() == []
    with hook.get_engine().connect() as conn:
        from sqlalchemy import text

        assert [r[0] for r in conn.execute(text("SELECT pool FROM slot_pool"))] == ["default_pool"]


def test_a_running_endpoint_is_stored_with_the_cores_expected_end_not_divided_by_gpu_speed():
    from airflow_gpu_scheduler.core.levers import Levers
    from airflow_gpu_scheduler.core.planner import MilpPlanner
    from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob
    from airflow_gpu_scheduler.gpu_work import GpuWorkload
    from airflow_gpu_scheduler.hooks.metadata import GpuWorkSnapshot
    from airflow_gpu_scheduler.operators.schedule import plan_record

    now = 1_800_000_000.0
    cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 4, "speed": 2.0}}})
    endpoint = Job(
        "d/r/serve/-1", now - 10, "realtime_inference", 1, estimate_s=100.0, meta={"key": ("d", "r", "serve", -1)}
    )
    batch = Job("d/r/train/-1", now - 10, "training", 1, estimate_s=100.0, meta={"key": ("d", "r", "train", -1)})
    running = [RunningJob(endpoint, "h100", now - 10), RunningJob(batch, "h100", now - 10)]
    workload = GpuWorkload([], running, {}, {}, {})
    plan = MilpPlanner().plan(cluster, [], running, now)
    _, rows = plan_record(cluster, GpuWorkSnapshot(now, (), (), ()), workload, plan, Levers(), None, (None, None))
    ends = {r["task_id"]: r["planned_end_s"] for r in rows}
    assert ends == {"serve": now + 90.0, "train": now + 40.0}  # streaming serves wall-clock time; work runs d / speed
