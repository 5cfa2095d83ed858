"""End-to-end proof on the CeleryExecutor, without Docker: the docker/ deployment, started from
its own description (tests/system/compose_deployment.py) on local PostgreSQL and Redis.

A real scheduler, dag-processor and api-server with the CeleryExecutor, one Celery worker per
GPU type serving only that type's queue (one process per GPU), and a platform worker for the
default queue where the planner runs. A mixed workload (work pinned to each GPU type, and
work that may run on either) is planned by the operator; the metadata then shows, for every
GPU task instance, the worker that ran it, the queue and pool it was dispatched from, its
queue/start/end times, and the stored plans that released it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import pytest
from compose_deployment import load_deployment
from gpu_airflow_support import PG_ADMIN, database_url, postgres_available
from sqlalchemy import bindparam, create_engine, text
from test_e2e import plans, stop_planner, task_state, wait_until

from airflow_gpu_scheduler.core.levers import executor_queue, pool_name
from airflow_gpu_scheduler.embedded import EmbeddedAirflow
from airflow_gpu_scheduler.hooks.metadata import to_epoch

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.celery]

DAGS = Path(__file__).parent / "celery_dags"
WORKLOAD_DAGS = ["mixed_h100", "mixed_a100", "mixed_any"]
# (dag_id, runs): 2-GPU gangs pinned to h100, 1-GPU jobs pinned to a100, 1-GPU jobs for either.
WORKLOAD = [("mixed_h100", 3), ("mixed_a100", 4), ("mixed_any", 8)]
REDIS = ("127.0.0.1", 6379)
CLAIM_KEY = "airflow-gpu-scheduler-e2e-claim"
#: Dispatch of two task instances in one scheduler loop is not atomic: allow this much.
SAME_LOOP_S = 0.25


@contextlib.contextmanager
def redis_database():
    """A Redis database number nobody uses, claimed for this test and flushed afterwards."""
    redis = pytest.importorskip("redis")
    for number in range(1, 16):
        client = redis.Redis(*REDIS, db=number, socket_connect_timeout=2)
        try:
            free = client.dbsize() == 0 and client.set(CLAIM_KEY, str(os.getpid()), nx=True, ex=3600)
        except redis.exceptions.ConnectionError as error:
            pytest.skip(
                f"Redis is not reachable on {REDIS[0]}:{REDIS[1]} (scripts/setup.sh --services starts it): {error}"
            )
        if free:
            try:
                yield f"redis://{REDIS[0]}:{REDIS[1]}/{number}"
            finally:
                client.flushdb()
                client.close()
            return
        client.close()
    pytest.skip("no free Redis database among 1..15")


@pytest.fixture(scope="module")
def deployment():
    return load_deployment()


@pytest.fixture(scope="module")
def celery_airflow(deployment, tmp_path_factory):
    if not postgres_available():
        pytest.skip(f"PostgreSQL is not reachable on {PG_ADMIN.host}:{PG_ADMIN.port}")
    home = tmp_path_factory.mktemp("airflow-celery")
    with contextlib.ExitStack() as stack:
        url = database_url("postgres", home, stack)
        broker = stack.enter_context(redis_database())
        env = {
            **deployment.portable_env(),
            "AIRFLOW__CELERY__BROKER_URL": broker,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + url,
            "AIRFLOW_VAR_GPU_SCHEDULER_CLUSTER": deployment.cluster_json,
        }
        instance = EmbeddedAirflow(home, DAGS, database_url=url, extra_env=env)
        stack.callback(instance.stop)
        t0 = time.monotonic()
        instance.start()
        for worker in deployment.workers:
            instance.start_celery_worker(worker.hostname, list(worker.queues), worker.concurrency)
        instance.wait_for_celery_workers([w.hostname for w in deployment.workers])
        instance.wait_for_dags([*WORKLOAD_DAGS, "plan_scheduler"])
        instance.startup_s = time.monotonic() - t0
        instance.engine = create_engine(url)
        stack.callback(instance.engine.dispose)
        yield instance


def task_instances(af: EmbeddedAirflow, dag_ids: list[str]) -> list[dict]:
    query = text(
        "SELECT dag_id, run_id, task_id, map_index, state, pool, pool_slots, queue, hostname, priority_weight, "
        "queued_dttm, start_date, end_date FROM task_instance WHERE dag_id IN :dags"
    ).bindparams(bindparam("dags", expanding=True))
    with af.engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(query, {"dags": dag_ids}).mappings()]
    for row in rows:
        row["job_id"] = f"{row['dag_id']}/{row['run_id']}/{row['task_id']}/{row['map_index']}"
        row["queued_s"], row["start_s"], row["end_s"] = (
            to_epoch(row[c]) for c in ("queued_dttm", "start_date", "end_date")
        )
    return rows


def peak(intervals: list[tuple[float, float, int]]) -> int:
    """Most units in use at once; an end at the same instant as a start frees first."""
    events = sorted([(s, n) for s, _, n in intervals] + [(e, -n) for _, e, n in intervals])
    level = top = 0
    for _, delta in events:
        level += delta
        top = max(top, level)
    return top


def test_every_gpu_task_runs_on_a_worker_of_its_planned_type_in_plan_order(celery_airflow, deployment):
    af = celery_airflow
    cluster = deployment.cluster
    gpu_workers = deployment.gpu_workers()
    type_of_host = {w.hostname: name for name, w in gpu_workers.items()}
    type_of_queue = {executor_queue(t): t.name for t in cluster.gpu_types}
    pinned = {"mixed_h100": {"h100"}, "mixed_a100": {"a100"}, "mixed_any": set(cluster.names)}

    # The whole workload waits, held in the intake pool, before the planner starts.
    runs = [(dag_id, af.trigger(dag_id, f"{dag_id}_{i:02d}")) for dag_id, count in WORKLOAD for i in range(count)]
    wait_until(
        lambda: sum(r["state"] == "scheduled" for r in task_instances(af, WORKLOAD_DAGS)) == len(runs),
        120,
        "the workload to be scheduled (held)",
    )
    time.sleep(3)
    assert all(r["state"] == "scheduled" for r in task_instances(af, WORKLOAD_DAGS)), "nothing starts without a plan"

    t0 = time.time()
    af.api(
        "POST",
        "/dags/plan_scheduler/dagRuns",
        {"dag_run_id": "celery_proof", "logical_date": None, "conf": {"repeat_for_s": 300}},
    )
    wait_until(lambda: task_state(af, "plan_scheduler", "celery_proof") == "running", 90, "the planner to start")
    try:
        states = af.wait_for_runs(runs, timeout_s=300)
    finally:
        stop_planner(af, "celery_proof")
    assert set(states.values()) == {"success"}, states

    rows = task_instances(af, WORKLOAD_DAGS)
    all_plans, jobs = plans(af)
    created = {p["id"]: p["created_s"] for p in all_plans}
    due = defaultdict(list)
    for j in jobs:
        if j["decision"] == "released":
            due[j["job_id"]].append(j)

    # The planner itself ran on the platform worker, from the default queue.
    (planner,) = task_instances(af, ["plan_scheduler"])
    default_queue = deployment.common_env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"]
    assert planner["queue"] == default_queue
    assert planner["hostname"] in {w.hostname for w in deployment.workers_for_queue(default_queue)}

    ran_on: dict[str, str] = {}
    for row in rows:
        job = row["job_id"]
        # Routing: the worker that ran it serves the queue it was dispatched from, which is the
        # queue of the GPU type whose pool it was dispatched from.
        assert row["hostname"] in type_of_host, f"{job} ran on {row['hostname']!r}, not on a GPU worker"
        gpu_type = type_of_host[row["hostname"]]
        assert type_of_queue.get(row["queue"]) == gpu_type, f"{job}: queue {row['queue']!r} on a {gpu_type} worker"
        assert row["pool"] == pool_name(gpu_type), f"{job}: pool {row['pool']!r} on a {gpu_type} worker"
        assert gpu_type in pinned[row["dag_id"]], f"{job} is not allowed on {gpu_type}"
        # ... and a stored plan released it to that GPU type before it was queued.
        released = [j for j in due[job] if created[j["plan_id"]] <= row["queued_s"]]
        assert released, f"{job} was queued but no earlier plan released it"
        assert gpu_type in {j["gpu_type"] for j in released}, f"{job} ran on {gpu_type}, plans said {released}"
        ran_on[job] = gpu_type

    # Plan order: whatever a plan released on a GPU type was handed to the executor no later than
    # what it held back (or ranked later) on the same type.
    queued = {r["job_id"]: r["queued_s"] for r in rows}
    out_of_order = []
    by_plan = defaultdict(list)
    for j in jobs:
        if j["decision"] in ("released", "held") and j["job_id"] in queued:
            by_plan[j["plan_id"]].append(j)
    for plan_jobs in by_plan.values():
        for a, b in combinations(plan_jobs, 2):
            first, second = (a, b) if (a["decision"], a["rank"]) < (b["decision"], b["rank"]) else (b, a)
            if first["decision"] != "released" or ran_on[first["job_id"]] != ran_on[second["job_id"]]:
                continue
            if queued[first["job_id"]] > queued[second["job_id"]] + SAME_LOOP_S:
                out_of_order.append((first["job_id"], second["job_id"], first["plan_id"]))
    assert not out_of_order, f"queued against the plan's order: {out_of_order}"

    # No pool over-subscribed: GPUs in use per type never exceed the type's count, and no
    # worker ran more task instances at once than it has processes.
    figures = {}
    for gpu_type in cluster.gpu_types:
        mine = [r for r in rows if ran_on[r["job_id"]] == gpu_type.name]
        assert mine, f"no work ran on {gpu_type.name}"
        gpus_peak = peak([(r["start_s"], r["end_s"], r["pool_slots"]) for r in mine])
        assert gpus_peak <= gpu_type.count, f"{gpu_type.name}: {gpus_peak} GPUs in use, {gpu_type.count} exist"
        assert peak([(r["start_s"], r["end_s"], 1) for r in mine]) <= gpu_workers[gpu_type.name].concurrency
        window = max(r["end_s"] for r in mine) - min(r["start_s"] for r in mine)
        busy = sum(r["pool_slots"] * (r["end_s"] - r["start_s"]) for r in mine)
        figures[gpu_type.name] = {
            "jobs": len(mine),
            "any_type_jobs": sum(r["dag_id"] == "mixed_any" for r in mine),
            "peak_gpus": gpus_peak,
            "utilization": round(busy / (gpu_type.count * window), 2),
        }
    latency = sorted(r["start_s"] - r["queued_s"] for r in rows)
    print(
        "CELERY",
        json.dumps(
            {
                "startup_s": round(af.startup_s, 1),
                "planner_start_to_last_end_s": round(max(r["end_s"] for r in rows) - t0, 1),
                "jobs": len(rows),
                "plans": len(all_plans),
                "queued_to_start_s": {"median": round(latency[len(latency) // 2], 2), "max": round(latency[-1], 2)},
                "by_gpu_type": figures,
                "jobs_released_to_both_types": sum(len({j["gpu_type"] for j in due[r["job_id"]]}) > 1 for r in rows),
            }
        ),
    )
