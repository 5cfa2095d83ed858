"""From one cycle's plan to its record, and whether that record decides anything the stored one did not."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, Levers, pool_name
from airflow_gpu_scheduler.core.planner import Plan
from airflow_gpu_scheduler.core.waiting import waiting_reasons
from airflow_gpu_scheduler.core.workload import Cluster, expected_end_s
from airflow_gpu_scheduler.cycle.snapshot import GpuWorkSnapshot, JobKey, is_gpu_pool
from airflow_gpu_scheduler.cycle.workload import GpuWorkload
from airflow_gpu_scheduler.db.records import HELD_DECISIONS, Decision, JobRow, PlanRecord, PlanRow, to_json

#: Job-row columns whose change is a new decision (besides the decision itself and a moved planned start).
_DECIDING = ("decision", "gpu_type", "pool", "weight")


def released(levers: Levers) -> list[str]:
    """Job ids the levers put in a GPU-type pool (released: they start now or are next in line there)."""
    return [job_id for job_id, a in levers.assignments.items() if a.pool != INTAKE_POOL]


def held_count(job_rows: Sequence[Mapping[str, Any]]) -> int:
    """Jobs the plan keeps in the intake pool (held or not placed yet; rejected ones are counted apart)."""
    return sum(1 for row in job_rows if row["decision"] in HELD_DECISIONS)


def plan_record(
    cluster: Cluster,
    snapshot: GpuWorkSnapshot,
    workload: GpuWorkload,
    plan: Plan,
    levers: Levers,
    predicted: Mapping[str, Any] | None,
    origin: tuple[str | None, str | None],
) -> PlanRecord:
    """The record of one cycle: its ``gpu_sched_plan`` row and a row per waiting and running job.

    A running job's ``planned_end_s`` is :func:`~airflow_gpu_scheduler.core.workload.expected_end_s`,
    the one rule the planner, the policies and the page use.
    """
    report = plan.report
    planned = plan.by_job()
    reasons = waiting_reasons(plan, cluster, workload.queued, workload.running, snapshot.now_s)
    plan_row: PlanRow = {
        "created_s": snapshot.now_s,
        "dag_id": origin[0],
        "run_id": origin[1],
        "cluster": to_json(cluster.to_dict()),
        "method": report.method,
        "status": report.status,
        "objective": finite(report.objective),
        "greedy_objective": finite(report.greedy_objective),
        "bound": finite(report.bound),
        "gap": finite(report.gap),
        "wall_s": report.wall_s,
        "message": report.message or None,
        "waiting": len(snapshot.waiting),
        "running": len(workload.running),
        "due": len(released(levers)),
        "rejected": len(workload.rejected),
        "pool_slots": to_json(dict(levers.pool_slots)),
        "streaming_reserve": to_json(dict(plan.streaming_reserve)),
        "predicted": to_json(predicted),
        "applied": True,
    }
    rows: list[JobRow] = []
    jobs = {job.job_id: job for job in workload.queued}
    for ti in snapshot.waiting:
        job_id = ti.key.job_id
        job = jobs.get(job_id)
        start = planned.get(job_id)
        assignment = levers.assignments.get(job_id)
        if job_id in workload.rejected:
            decision = Decision.REJECTED
        elif start is None:
            decision = Decision.UNPLANNED
        elif assignment is None or assignment.pool == INTAKE_POOL:
            decision = Decision.HELD
        else:
            decision = Decision.RELEASED
        wait = reasons.get(job_id) if decision in HELD_DECISIONS else None
        rows.append(
            {
                "job_id": job_id,
                "dag_id": ti.key.dag_id,
                "run_id": ti.key.run_id,
                "task_id": ti.key.task_id,
                "map_index": ti.key.map_index,
                "decision": decision.value,
                "kind": job.kind.value if job else None,
                "gpus": job.gpus if job else ti.pool_slots,
                "priority": job.priority if job else None,
                "estimate_s": job.estimate_s if job else None,
                "estimate_source": workload.estimate_sources.get(job_id),
                "gpu_type": start.gpu_type if start else None,
                "pool": assignment.pool if assignment else ti.pool,
                "weight": assignment.weight if assignment else None,
                "rank": start.rank if start else None,
                "planned_start_s": start.start_s if start else None,
                "planned_end_s": start.end_s if start else None,
                "reason": workload.rejected.get(job_id) or (wait.text if wait else None),
                "reason_code": "rejected" if job_id in workload.rejected else (wait.code if wait else None),
                "deadline_s": job.deadline_s if job else None,
                # Released before its planned start: it waits in its pool for GPUs (not stored; the note says so).
                "released_ahead": decision is Decision.RELEASED
                and start is not None
                and start.start_s > snapshot.now_s + 1e-6,
            }
        )
    for running in workload.running:
        key = JobKey(*running.job.meta["key"])
        rows.append(
            {
                "job_id": running.job.job_id,
                "dag_id": key.dag_id,
                "run_id": key.run_id,
                "task_id": key.task_id,
                "map_index": int(key.map_index),
                "decision": Decision.RUNNING.value,
                "kind": running.job.kind.value,
                "gpus": running.job.gpus,
                "priority": running.job.priority,
                "estimate_s": running.job.estimate_s,
                "deadline_s": running.job.deadline_s,
                "gpu_type": running.gpu_type,
                "pool": pool_name(running.gpu_type, running.job.is_streaming),
                "planned_start_s": running.start_s,
                "planned_end_s": expected_end_s(running, cluster.gpu_type(running.gpu_type), snapshot.now_s),
            }
        )
    return PlanRecord(plan_row, rows)


def levers_differ(levers: Levers, snapshot: GpuWorkSnapshot) -> bool:
    """Would applying ``levers`` write anything (a task instance's pool, weight or queue, or a pool's slots)?"""
    if any(snapshot.pool_slots.get(pool) != slots for pool, slots in levers.pool_slots.items()):
        return True
    by_job = {t.key.job_id: t for t in snapshot.waiting}
    for job_id, a in levers.assignments.items():
        ti = by_job.get(job_id)
        if (
            ti is not None
            and is_gpu_pool(ti.pool)
            and (ti.pool != a.pool or ti.priority_weight != a.weight or (a.queue is not None and ti.queue != a.queue))
        ):
            return True
    return False


def decisions_changed(
    stored: Mapping[str, Mapping[str, Any]], job_rows: Sequence[Mapping[str, Any]], tolerance_s: float
) -> bool:
    """Does this cycle decide anything the stored plan did not: a job released or held, moved to another
    pool or GPU type, re-weighted, newly seen, or its planned start moved by more than ``tolerance_s``?

    Jobs that left the queue (they started) and running jobs are not decisions: Airflow ran what the
    plan released. A new plan is stored only when this is true; otherwise the stored one is confirmed.
    """
    for row in job_rows:
        if row["decision"] == Decision.RUNNING:
            continue
        old = stored.get(row["job_id"])
        if old is None or any(old.get(k) != row.get(k) for k in _DECIDING):
            return True
        a, b = old.get("planned_start_s"), row.get("planned_start_s")
        if row["decision"] == Decision.RELEASED:
            continue  # released: its planned start (now, at each solve) no longer decides anything
        if (a is None) != (b is None) or (a is not None and abs(a - b) > tolerance_s):
            return True
    return False


def predict(cluster: Cluster, workload: GpuWorkload, now_s: float, plan: Plan, log: Any = None) -> dict | None:
    """Predicted metrics of the plan vs Airflow's own dispatch, when the core can forecast them.

    Made JSON-safe here (what JSON cannot hold becomes its ``str``): it goes to XCom and to the plan row.
    """
    try:
        from airflow_gpu_scheduler.core.forecast import predict_plan_vs_airflow
    except ImportError:
        return None
    try:
        return json.loads(to_json(predict_plan_vs_airflow(cluster, workload.queued, workload.running, now_s, plan)))
    except Exception as error:  # noqa: BLE001 - a forecast must never block applying a plan
        if log:
            log.warning("Forecast failed: %s: %s", type(error).__name__, error)
        return {"error": f"{type(error).__name__}: {error}"}


def finite(value: float | None) -> float | None:
    """``value`` as a float, or ``None`` for a missing, infinite or NaN one (JSON and SQL hold neither)."""
    return float(value) if value is not None and math.isfinite(value) else None
