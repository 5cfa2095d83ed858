"""The soak (``scripts/soak.sh``, ``tests/system/soak.py``): its half-applied-plan check, and a short soak.

The check is tried on a migrated PostgreSQL database against real planning cycles and a fail-open
release, and against the two ways an apply stopped half-way would show (a task instance left at the
previous plan's pool, a pool left at the previous plan's slots). The short soak runs the real thing
for three minutes, every kind of fault included, and must lose, strand and half-apply nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from metadata_seed import Seeder
from soak import plan_consistency
from sqlalchemy import create_engine, text
from test_reliability import CLUSTER, PLANNER, seed_workload

from airflow_gpu_scheduler.core.levers import INTAKE_POOL
from airflow_gpu_scheduler.operators.fail_open import release_if_planner_down
from airflow_gpu_scheduler.operators.schedule import schedule_cycle

SOAK = Path(__file__).with_name("soak.py")


@pytest.fixture
def postgres_seed(metadata_url):
    if not metadata_url.startswith("postgresql"):
        pytest.skip("the soak runs on PostgreSQL only (its check reads one REPEATABLE READ snapshot)")
    seeder = Seeder(metadata_url)
    yield seeder
    seeder.clear()


def test_the_check_tells_a_whole_plan_from_half_of_one(hook, postgres_seed, metadata_url):
    engine = create_engine(metadata_url)
    try:
        seed_workload(postgres_seed, bad=False)
        assert plan_consistency(engine)[0] == "no_plan"
        summary = schedule_cycle(hook, PLANNER, CLUSTER)
        assert summary["released"] and summary["held"], summary
        assert plan_consistency(engine) == ("consistent", summary["plan_id"], [])

        dag_id, run_id, task_id, _ = summary["released"][0].split("/")
        where = "dag_id = :d AND run_id = :r AND task_id = :t"
        keys = {"d": dag_id, "r": run_id, "t": task_id}
        with engine.begin() as conn:  # as if the apply had stopped before moving this one
            pool = conn.execute(text(f"SELECT pool FROM task_instance WHERE {where}"), keys).scalar()
            conn.execute(text(f"UPDATE task_instance SET pool = :p WHERE {where}"), {**keys, "p": INTAKE_POOL})
        verdict, plan_id, problems = plan_consistency(engine)
        assert verdict == "half_applied" and plan_id == summary["plan_id"]
        assert len(problems) == 1 and problems[0].startswith(f"{summary['released'][0]} in {INTAKE_POOL} ")
        assert f"plan {plan_id} says released {pool} " in problems[0], problems
        with engine.begin() as conn:
            conn.execute(text(f"UPDATE task_instance SET pool = :p WHERE {where}"), {**keys, "p": pool})
            # ... or before opening this pool to the slots the plan stored.
            conn.execute(text("UPDATE slot_pool SET slots = slots + 1 WHERE pool = :p"), {"p": pool})
        verdict, _, problems = plan_consistency(engine)
        assert verdict == "half_applied" and problems[0].startswith(f"pool {pool}: "), problems
        with engine.begin() as conn:
            conn.execute(text("UPDATE slot_pool SET slots = slots - 1 WHERE pool = :p"), {"p": pool})
        assert plan_consistency(engine)[0] == "consistent"

        # An hour later without a plan, the watchdog fails open: that state is its own, not a half plan.
        released = release_if_planner_down(hook, 300.0, lambda: CLUSTER, now_s=time.time() + 3600)
        assert released["action"] == "released"
        assert plan_consistency(engine)[0] == "fail_open"
    finally:
        engine.dispose()


@pytest.mark.airflow
@pytest.mark.postgres
def test_a_three_minute_soak_under_every_fault_loses_nothing(tmp_path):
    report_file = tmp_path / "soak.json"
    done = subprocess.run(
        [sys.executable, SOAK, "--minutes", "3", "--json", report_file, "--sample-s", "10"],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    print(done.stdout[-6000:])
    if done.returncode == 2:
        pytest.skip(done.stderr.strip())
    assert report_file.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert report["work"]["lost"] == {} and report["work"]["stranded"] == {}, report["work"]
    assert report["half_applied"] == [], report["half_applied"]
    assert set(report["faults"]) == {"kill_planner", "terminate_planner_db", "restart_scheduler", "pause_planner"}, (
        report["fault_log"]
    )
    assert report["cycles"] > 0 and report["checks"].get("consistent", 0) > 0, report["checks"]
    assert report["work"]["succeeded"] == report["work"]["submitted"] > 0
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
