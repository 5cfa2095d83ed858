"""The review API fails closed: when Airflow's auth manager cannot say which DAGs a user may read, no
job is shown by name. A real api-server with a real subclass of Airflow's auth manager (tests/system/auth)."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from pathlib import Path

import pytest
from gpu_airflow_support import database_url
from sqlalchemy import create_engine

from airflow_gpu_scheduler.embedded import EmbeddedAirflow
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook
from airflow_gpu_scheduler.plugins.review_api import HIDDEN

pytestmark = pytest.mark.airflow

AUTH = Path(__file__).parent / "auth"


def plan(now_s: float) -> tuple[dict, list[dict]]:
    cluster = {"gpu_types": {"h100": {"count": 4, "speed": 1.0}}}
    rows = []
    for rank, (dag_id, decision) in enumerate([("team_a", "running"), ("team_b", "held")]):
        rows.append(
            {
                "job_id": f"{dag_id}/r1/train/-1",
                "dag_id": dag_id,
                "run_id": "r1",
                "task_id": "train",
                "map_index": -1,
                "decision": decision,
                "kind": "training",
                "gpus": 4,
                "priority": 5.0,
                "estimate_s": 600.0,
                "gpu_type": "h100",
                "pool": "gpu_h100" if decision == "running" else "gpu_intake",
                "weight": 1000 - rank,
                "rank": rank,
                "planned_start_s": now_s + 600 * rank,
                "planned_end_s": now_s + 600 * (rank + 1),
                "reason": "all 4 h100 GPUs are busy until 12:00:00 UTC" if decision == "held" else None,
                "reason_code": "busy" if decision == "held" else None,
            }
        )
    record = {
        "created_s": now_s,
        "dag_id": "gpu_scheduler",
        "run_id": "r",
        "cluster": json.dumps(cluster),
        "method": "milp",
        "status": "optimal",
        "waiting": 1,
        "running": 1,
        "due": 0,
        "rejected": 0,
        "pool_slots": "{}",
        "streaming_reserve": "{}",
        "applied": True,
        "moved": 0,
        "wall_s": 0.1,
    }
    return record, rows


def test_jobs_are_anonymous_when_the_auth_manager_cannot_list_readable_dags(tmp_path):
    with contextlib.ExitStack() as stack:
        url = database_url("sqlite", tmp_path, stack)
        af = EmbeddedAirflow(
            tmp_path / "home",
            tmp_path / "no-dags",
            database_url=url,
            extra_env={"AIRFLOW__CORE__AUTH_MANAGER": "cannot_list.CannotListDagsAuthManager", "PYTHONPATH": str(AUTH)},
        )
        (tmp_path / "no-dags").mkdir()
        stack.callback(af.stop)
        af.start()
        engine = create_engine(url)
        stack.callback(engine.dispose)
        with engine.begin() as conn:
            GpuSchedulerMetadataHook._insert_plan(conn, *plan(time.time()))

        request = urllib.request.Request(
            af.base_url + "/gpu-scheduler/api/plan", headers={"Authorization": f"Bearer {af.token()}"}
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            jobs = json.loads(answer.read())["jobs"]
    assert len(jobs) == 2, jobs
    for job in jobs:
        assert job["hidden"] is True and job["task_id"] == HIDDEN, job
        assert job["dag_id"] is None and job["run_id"] is None and job["reason"] is None and job["ti_url"] is None
        assert "team_" not in json.dumps(job)
    assert {job["decision"] for job in jobs} == {"running", "held"}, "the bars stay: they hold GPUs"
