"""Plan storage that stays bounded: a plan is stored only when its decisions change, cycles that change
nothing confirm it (the heartbeat the watchdog and page read), old plans are pruned, and ``airflow db
clean`` removes the planner's old DAG runs. On a database made by the real ``airflow db migrate``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from metadata_seed import Seeder
from sqlalchemy import func, select, text

from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.models import plan_job_table, plan_table
from airflow_gpu_scheduler.operators.schedule import KEEP_NEWEST_PLANS, PlanningLoop, prune_plans, schedule_cycle

pytestmark = pytest.mark.airflow

CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 4}}})
PLANNER = RolloutPlanner(PlannerConfig(step_s=60.0, time_limit_s=2.0))


@pytest.fixture
def seed(metadata_url, hook):
    seeder = Seeder(metadata_url)
    seeder.dag(
        "team",
        {
            "train": {"declaration": {"kind": "training", "gpus": 4, "estimate_s": 3600, "priority": 9}},
            "quantize": {"declaration": {"kind": "quantization", "gpus": 1, "estimate_s": 600}},
        },
    )
    yield seeder
    seeder.clear()


def rows(hook) -> tuple[int, int]:
    with hook.get_engine().connect() as conn:
        return (
            conn.execute(select(func.count()).select_from(plan_table)).scalar(),
            conn.execute(select(func.count()).select_from(plan_job_table)).scalar(),
        )


def test_a_cycle_that_decides_nothing_new_stores_nothing_and_confirms_the_plan(hook, seed):
    for run in ("r1", "r2"):
        seed.run("team", run)
    seed.task_instances(
        [
            {"dag_id": "team", "run_id": "r1", "task_id": "train", "pool_slots": 4},
            {"dag_id": "team", "run_id": "r1", "task_id": "quantize"},
            {"dag_id": "team", "run_id": "r2", "task_id": "quantize"},
        ]
    )
    now = time.time()
    loop = PlanningLoop(PLANNER, replan_interval_s=600.0)
    first = schedule_cycle(hook, loop, CLUSTER, now_s=now)
    assert first["solved"] and first["stored"] and rows(hook) == (1, 3)

    # The same work a few seconds later: nothing new is decided; the plan row is confirmed instead.
    for i in range(1, 6):
        again = schedule_cycle(hook, loop, CLUSTER, now_s=now + 5 * i)
        assert not again["stored"] and again["plan_id"] == first["plan_id"] and again["moved"] == 0
    assert rows(hook) == (1, 3)
    (plan,) = hook.get_plans()
    assert plan["created_s"] == now and plan["checked_s"] == now + 25
    # The watchdog reads the heartbeat as a sign of life; the page reads the plan's age from created_s.
    state = hook.collect_fail_open_state(now_s=now + 30)
    assert state.last_plan_s == now + 25

    # A new planning run (a new DAG run every minute) starts from the stored decisions: the same work,
    # solved again, gives the same plan, so nothing is stored.
    fresh = schedule_cycle(hook, PlanningLoop(PLANNER), CLUSTER, now_s=now + 30)
    assert fresh["solved"] and not fresh["stored"] and rows(hook) == (1, 3)

    # A new run of a GPU task while every GPU is taken: the rule keeps applying the plan (nothing could
    # start), and the stored plan is brought up to date in place: the newcomer, not placed yet.
    seed.run("team", "r3")
    seed.task_instances([{"dag_id": "team", "run_id": "r3", "task_id": "quantize"}])
    arrived = schedule_cycle(hook, loop, CLUSTER, now_s=now + 31)
    assert not arrived["solved"] and arrived["amended"] and arrived["plan_id"] == first["plan_id"]
    assert rows(hook) == (1, 4)
    assert {j["job_id"]: j["decision"] for j in hook.get_plans()[0]["jobs"]}["team/r3/quantize/-1"] == "unplanned"
    # The next solve places it: a new decision, a new plan.
    solved = schedule_cycle(hook, loop, CLUSTER, now_s=now + 700)
    assert solved["solved"] and solved["stored"] and solved["plan_id"] != first["plan_id"] and rows(hook) == (2, 8)


def test_plans_older_than_the_retention_are_pruned_but_the_newest_the_page_shows_are_kept(hook, monkeypatch):
    monkeypatch.setenv("AIRFLOW__GPU_SCHEDULER__PLAN_RETENTION_DAYS", "7")
    now = time.time()
    base = {
        "cluster": "{}",
        "method": "milp",
        "status": "optimal",
        "waiting": 1,
        "running": 0,
        "due": 0,
        "rejected": 0,
        "pool_slots": "{}",
        "streaming_reserve": "{}",
        "applied": True,
    }
    job = {"job_id": "d/r/t/-1", "dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1, "decision": "held"}
    ages_days = [30] * 10 + [8] * 5 + [1] * 3  # 15 older than a week, 3 recent
    ids = [hook.store_plan({**base, "created_s": now - days * 86400}, [job]) for days in ages_days]
    deleted = prune_plans(hook, now_s=now)
    kept = [p["id"] for p in hook.get_plans(limit=100)]
    # The newest 20 are kept whatever their age; here that is all 18.
    assert deleted == 0 and sorted(kept) == ids
    ids += [hook.store_plan({**base, "created_s": now - 3600}, [job]) for _ in range(KEEP_NEWEST_PLANS)]
    deleted = prune_plans(hook, now_s=now)
    assert deleted == 15 and rows(hook) == (3 + KEEP_NEWEST_PLANS, 3 + KEEP_NEWEST_PLANS)
    assert sorted(p["id"] for p in hook.get_plans(limit=100)) == ids[15:]


def test_airflow_db_clean_removes_old_runs_of_the_planner_dags(metadata_url, hook):
    seeder = Seeder(metadata_url)
    try:
        seeder.dag("gpu_scheduler", {"plan_and_apply": {}})
        for i in range(5):
            seeder.run("gpu_scheduler", f"scheduled__{i}", state="success")
        old = datetime.now(timezone.utc) - timedelta(days=40)
        dag_run = seeder.t["dag_run"]
        with seeder.engine.begin() as conn:
            for i in range(5):
                when = seeder._time(old + timedelta(minutes=i))
                conn.execute(
                    dag_run.update()
                    .where(dag_run.c.run_id == f"scheduled__{i}")
                    .values(start_date=when, queued_at=when, run_after=when, end_date=when, run_type="scheduled")
                )
        hook.store_plan(
            {
                "created_s": time.time(),
                "cluster": "{}",
                "method": "milp",
                "status": "optimal",
                "waiting": 0,
                "running": 0,
                "due": 0,
                "rejected": 0,
                "pool_slots": "{}",
                "streaming_reserve": "{}",
                "applied": True,
            },
            [],
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            AIRFLOW_HOME=str(Path(metadata_url.split("///")[-1]).parent)
            if metadata_url.startswith("sqlite")
            else os.environ.get("AIRFLOW_HOME", "/tmp"),
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=metadata_url,
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            PATH=str(Path(sys.executable).parent) + os.pathsep + env["PATH"],
        )
        cutoff = (datetime.now(timezone.utc) - timedelta(days=30)).strftime("%Y-%m-%d %H:%M:%S+00:00")
        done = subprocess.run(
            [
                "airflow",
                "db",
                "clean",
                "--clean-before-timestamp",
                cutoff,
                "--tables",
                "dag_run",
                "--skip-archive",
                "--yes",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        with seeder.engine.connect() as conn:
            left = [r for (r,) in conn.execute(text("SELECT run_id FROM dag_run WHERE dag_id = 'gpu_scheduler'"))]
        # Airflow keeps the newest run of each DAG; the rest of the planner's old runs are gone.
        assert left == ["scheduled__4"], left
        assert rows(hook)[0] == 1, "db clean leaves the provider's plan tables to the provider's own retention"
    finally:
        seeder.clear()


def test_rows_written_per_cycle_with_5000_held_task_instances(hook, metadata_url):
    """Quiet (all 8 GPUs busy with long jobs, nothing arrives): cycles store nothing. A stream (a job
    ends and one arrives before every 10 s cycle): the plan is stored when a solve changes it (at least
    every replan_interval_s), and amended in place between solves; before, every cycle stored one."""
    seeder = Seeder(metadata_url)
    try:
        seeder.dag("load", {"shard": {"declaration": {"kind": "batch_inference", "gpus": 1, "estimate_s": 3600}}})
        seeder.run("load", "big")
        seeder.task_instances(
            [{"dag_id": "load", "run_id": "big", "task_id": "shard", "map_index": i} for i in range(5000)]
        )
        running = [
            {
                "dag_id": "load",
                "run_id": "big",
                "task_id": "shard",
                "map_index": 5000 + i,
                "pool": "gpu_h100",
                "state": "running",
            }
            for i in range(8)
        ]
        seeder.task_instances(running)
        cluster = Cluster.from_dict({"gpu_types": {"h100": {"count": 8}}})
        loop = PlanningLoop(PLANNER, early_s=10.0, replan_interval_s=60.0)
        now = time.time()
        schedule_cycle(hook, loop, cluster, now_s=now)  # the first plan of a fresh database is stored
        figures = {}
        for phase, cycles in (("quiet", 6), ("stream", 6)):
            plans0, jobs0 = rows(hook)
            before = 0
            for i in range(cycles):
                if phase == "stream":  # one running job ends, one new task instance arrives
                    ti = seeder.t["task_instance"]
                    with seeder.engine.begin() as conn:
                        conn.execute(ti.update().where(ti.c.map_index == 5000 + i).values(state="success"))
                    seeder.task_instances(
                        [{"dag_id": "load", "run_id": "big", "task_id": "shard", "map_index": 6000 + i}]
                    )
                now += 10.0
                summary = schedule_cycle(hook, loop, cluster, now_s=now)
                before += 1 + summary["waiting"] + summary["running"]  # what every cycle stored before
            plans1, jobs1 = rows(hook)
            figures[phase] = {
                "cycles": cycles,
                "rows_before": before,
                "rows_after": plans1 - plans0 + jobs1 - jobs0,
                "plans_stored": plans1 - plans0,
            }
        per_hour = {
            phase: (f["rows_before"] * 360 // f["cycles"], f["rows_after"] * 360 // f["cycles"])
            for phase, f in figures.items()
        }
        print("STORAGE 5000 held", figures, "rows per hour at a 10 s cycle (before, after):", per_hour)
        assert figures["quiet"]["rows_after"] == 0
        assert figures["stream"]["rows_after"] <= figures["stream"]["rows_before"]
    finally:
        with seeder.engine.begin() as conn:
            conn.execute(text("DELETE FROM task_instance_note"))
        seeder.clear()
