"""Load: 5,000 GPU task instances waiting in a real Airflow 3.3 on PostgreSQL.

A mapped task expands to 5,000 task instances (Airflow creates them itself), all held in the
intake pool. Then one planning cycle is timed step by step (collect, plan, apply) while CPU DAG
runs are triggered: the scheduler must keep dispatching them meanwhile. Once the operator
stops, every GPU task instance a plan released must start and finish, and every other one must
still be held in the intake pool: nothing stranded, nothing lost. Timings are printed, not
asserted (2 shared cores).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
from gpu_airflow_support import database_url
from sqlalchemy import create_engine, text

from airflow_gpu_scheduler.core.levers import levers_for_plan
from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.embedded import EmbeddedAirflow
from airflow_gpu_scheduler.gpu_work import build_workload
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook, to_epoch
from airflow_gpu_scheduler.operators.schedule import PlanningLoop, plan_record, schedule_cycle

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.load]

N = 5000
CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 8}}})
DAGS_LOAD = Path(__file__).parent / "dags_load"


def counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            f"{state}:{pool}": n
            for state, pool, n in conn.execute(
                text("SELECT state, pool, count(*) FROM task_instance WHERE dag_id = 'load_gpu' GROUP BY state, pool")
            )
        }


def plan_table_rows(engine) -> tuple[int, int]:
    with engine.connect() as conn:
        return (
            conn.execute(text("SELECT count(*) FROM gpu_sched_plan")).scalar(),
            conn.execute(text("SELECT count(*) FROM gpu_sched_plan_job")).scalar(),
        )


def wait_until(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1.0)
    raise TimeoutError(f"timed out waiting for {what}")


def test_5000_waiting_gpu_task_instances_collect_plan_apply_while_airflow_keeps_dispatching(tmp_path, monkeypatch):
    with contextlib.ExitStack() as stack:
        url = database_url("postgres", tmp_path, stack)
        af = EmbeddedAirflow(
            tmp_path / "home",
            DAGS_LOAD,
            database_url=url,
            extra_env={
                "AIRFLOW__CORE__MAX_MAP_LENGTH": str(N + 100),
                "GPU_LOAD_TIS": str(N),
                "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(N),
            },
        )
        stack.callback(af.stop)
        af.start()
        af.wait_for_dags(["load_gpu", "load_cpu"], 180)
        engine = create_engine(url)
        stack.callback(engine.dispose)

        t0 = time.monotonic()
        af.trigger("load_gpu", "big")
        wait_until(lambda: counts(engine).get("scheduled:gpu_intake", 0) == N, 600, f"{N} scheduled task instances")
        expand_s = time.monotonic() - t0

        # Airflow's own work keeps flowing while the operator collects, plans and applies.
        cpu_runs = [("load_cpu", af.trigger("load_cpu", f"cpu_{i}")) for i in range(3)]
        monkeypatch.setenv("AIRFLOW_CONN_GPU_LOAD", af.metadata_connection_json())
        hook = GpuSchedulerMetadataHook("gpu_load")
        stack.callback(hook.close)
        hook.get_engine()

        window_start = time.time()
        t = time.perf_counter()
        snapshot = hook.collect_gpu_work()
        collect_s = time.perf_counter() - t
        t = time.perf_counter()
        workload = build_workload(snapshot, CLUSTER)
        plan = MilpPlanner(PlannerConfig(step_s=60.0, horizon_s=24 * 3600.0, time_limit_s=2.0)).plan(
            CLUSTER, workload.queued, workload.running, snapshot.now_s, workload.reserve
        )
        levers = levers_for_plan(plan, CLUSTER, workload.queued, workload.running, snapshot.now_s)
        plan_s = time.perf_counter() - t
        record = plan_record(CLUSTER, snapshot, workload, plan, levers, None, (None, None))
        t = time.perf_counter()
        result = hook.apply_levers(levers, snapshot.waiting, record=record)
        apply_s = time.perf_counter() - t
        t = time.perf_counter()
        again = hook.apply_levers(levers, hook.collect_gpu_work().waiting)
        reapply_s = time.perf_counter() - t

        # Keep cycling, as the operator does, until the CPU runs are done: they must be dispatched
        # while the operator works on 5,000 task instances, not after it stops.
        cycles = 1
        while not all(af.run_state(*r) in ("success", "failed") for r in cpu_runs) and cycles < 12:
            snap = hook.collect_gpu_work()
            work = build_workload(snap, CLUSTER)
            p = MilpPlanner(PlannerConfig(step_s=60.0, time_limit_s=2.0)).plan(
                CLUSTER, work.queued, work.running, snap.now_s, work.reserve
            )
            hook.apply_levers(levers_for_plan(p, CLUSTER, work.queued, work.running, snap.now_s), snap.waiting)
            cycles += 1
        window_end = time.time()
        cpu_states = af.wait_for_runs(cpu_runs, 300)
        with engine.connect() as conn:
            cpu_starts = [
                to_epoch(v)
                for (v,) in conn.execute(text("SELECT start_date FROM task_instance WHERE dag_id = 'load_cpu'"))
            ]
        due = [j for j, a in levers.assignments.items() if a.pool != "gpu_intake"]
        started = wait_until(
            lambda: sum(n for k, n in counts(engine).items() if k.split(":")[0] in ("queued", "running", "success")),
            300,
            "released GPU task instances to start",
        )
        figures = {
            "task_instances": len(snapshot.waiting),
            "expand_s": round(expand_s, 1),
            "collect_s": round(collect_s, 2),
            "plan_s": round(plan_s, 2),
            "method": plan.report.method,
            "apply_s": round(apply_s, 2),
            "moved": len(result.moved),
            "reapply_s": round(reapply_s, 2),
            "reapply_moved": len(again.moved),
            "due": len(due),
            "gpu_started": started,
            "cpu_runs": sorted(set(cpu_states.values())),
            "cpu_started_during_cycle": sum(1 for v in cpu_starts if v and window_start <= v <= window_end),
            "cycles_while_cpu_ran": cycles,
            "cycling_s": round(window_end - window_start, 1),
        }
        print("LOAD", json.dumps(figures))

        # Plan-table rows written per cycle by the operator's loop, while the released shards run and
        # end (a fast stream: each takes a second or two on 8 GPUs). Before, every cycle with work
        # waiting stored a plan and a row per waiting and running task instance.
        loop = PlanningLoop(RolloutPlanner(PlannerConfig(step_s=60.0, horizon_s=24 * 3600.0, time_limit_s=2.0)))
        before_rows = after_rows = cycles_run = 0
        plans0, jobs0 = plan_table_rows(engine)
        t = time.perf_counter()
        while cycles_run < 12:
            summary = schedule_cycle(hook, loop, CLUSTER)
            if summary["noop"]:
                break
            cycles_run += 1
            before_rows += 1 + summary["waiting"] + summary["running"]
        loop_s = time.perf_counter() - t
        plans1, jobs1 = plan_table_rows(engine)
        after_rows = (plans1 - plans0) + (jobs1 - jobs0)
        per_hour = 3600.0 / 10.0  # cycles an hour at the default cycle_interval_s
        storage = {
            "cycles": cycles_run,
            "loop_s": round(loop_s, 1),
            "solves": loop.solves,
            "plans_stored": plans1 - plans0,
            "rows_before": before_rows,
            "rows_after": after_rows,
            "rows_per_hour_before": round(before_rows / max(cycles_run, 1) * per_hour),
            "rows_per_hour_after": round(after_rows / max(cycles_run, 1) * per_hour),
        }
        print("STORAGE", json.dumps(storage))
        assert after_rows <= before_rows
        assert len(snapshot.waiting) == N and len(workload.queued) == N
        assert len(result.moved) == N, "every task instance gets its plan pool and weight"
        assert again.moved == ()
        assert set(cpu_states.values()) == {"success"}, "Airflow must keep dispatching non-GPU work"
        assert all(v and v <= window_end for v in cpu_starts), "CPU work must start while the operator cycles"

        # All released work starts, nothing is stranded: with the operator stopped, every task instance
        # that a plan moved to a GPU pool (those released ahead start as GPUs free) runs to success, and
        # every other one is still scheduled in the intake pool, where the next plan finds it.
        deadline = time.monotonic() + 600
        while True:
            final = counts(engine)
            unsettled = {k: n for k, n in final.items() if k != "scheduled:gpu_intake" and not k.startswith("success:")}
            if not unsettled or time.monotonic() > deadline:
                break
            time.sleep(2.0)
        assert not unsettled, f"released GPU task instances stranded or failed: {unsettled} (all: {final})"
        succeeded = sum(n for k, n in final.items() if k.startswith("success:"))
        assert succeeded + final.get("scheduled:gpu_intake", 0) == N, final
        assert succeeded >= len(due) >= 1, (succeeded, len(due))
        print(
            "RELEASED",
            json.dumps(
                {"first_plan_released": len(due), "succeeded": succeeded, "held": final.get("scheduled:gpu_intake", 0)}
            ),
        )
