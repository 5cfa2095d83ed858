"""One planning cycle's I/O, in order: take the lock, collect, decide, apply, record (and prune old plans).

The decisions are the glue's (:mod:`airflow_gpu_scheduler.cycle`) and the core's; the SQL is the
hook's. What is left here is the order of the steps and the cycle's summary (its XCom).
"""

from __future__ import annotations

import time
from typing import Any

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.core.levers import INTAKE_POOL, Assignment, Levers
from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.cycle.loop import PlanningLoop
from airflow_gpu_scheduler.cycle.notes import notes_for_plan
from airflow_gpu_scheduler.cycle.records import (
    decisions_changed,
    finite,
    held_count,
    levers_differ,
    plan_record,
    predict,
    released,
)
from airflow_gpu_scheduler.cycle.snapshot import is_gpu_pool
from airflow_gpu_scheduler.cycle.workload import build_workload
from airflow_gpu_scheduler.cycle_metrics import gpus_busy, reported
from airflow_gpu_scheduler.db.records import Decision, to_json
from airflow_gpu_scheduler.hooks.metadata import ApplyResult, GpuSchedulerMetadataHook
from airflow_gpu_scheduler.hooks.notes import write_notes
from airflow_gpu_scheduler.schema_check import check_metadata_schema

#: How long a planning run's first cycle keeps trying for the planner lock before it concludes that
#: another planning run holds it (a watchdog check holds it for well under this).
FIRST_LOCK_WAIT_S = 5.0
LOCK_RETRY_S = 0.5
#: Plans the review page's history lists: never pruned, however old.
KEEP_NEWEST_PLANS = 20
_RUNNING = Decision.RUNNING.value


def locked_cycle(
    hook: GpuSchedulerMetadataHook,
    planner: RolloutPlanner | PlanningLoop,
    cluster: Cluster,
    origin: tuple[str | None, str | None],
    log: Any,
    wait_s: float,
    prune: bool = False,
) -> dict[str, Any] | None:
    """One cycle under the planner lock, trying for the lock up to ``wait_s``; ``None`` if it stayed taken.
    ``prune``: first delete plans past their retention (a run's first cycle does).

    The fail-open watchdog takes the same lock for one short check, and its runs are due at the same
    moments as the planner's (both DAGs run every minute): without the wait, a planning run whose
    first cycle met a watchdog check took it for another planning run and gave up its whole minute.
    """
    give_up = time.monotonic() + wait_s
    while True:
        with hook.planning_lock() as mine:
            if mine:
                if prune:
                    prune_plans(hook, log=log)
                return schedule_cycle(hook, planner, cluster, origin, log=log)
        if time.monotonic() >= give_up:
            return None
        time.sleep(LOCK_RETRY_S)


def configured_planner() -> PlannerConfig:
    """The planner's knobs from ``[gpu_scheduler]`` (grid step, horizon, budget); the rest stay the core's."""
    return PlannerConfig(
        step_s=config.get_float("planning_step_s"),
        horizon_s=config.get_float("planning_horizon_s"),
        time_limit_s=config.get_float("planning_budget_s"),
    )


def locked_out_summary() -> dict[str, Any]:
    """XCom of a run that did not plan because another run held the planner lock."""
    return {
        "plan_id": None,
        "noop": True,
        "locked_out": True,
        "waiting": None,
        "released": [],
        "due": [],
        "held": 0,
        "rejected": {},
    }


def prune_plans(hook: GpuSchedulerMetadataHook, now_s: float | None = None, log: Any = None) -> int:
    """Delete plans older than ``[gpu_scheduler] plan_retention_days``, keeping the newest the page shows."""
    now_s = time.time() if now_s is None else now_s
    deleted = hook.prune_plans(now_s - config.get_float("plan_retention_days") * 86400.0, KEEP_NEWEST_PLANS)
    if deleted and log:
        log.info(
            "Deleted %d plans older than %s days (plan_retention_days).", deleted, config.get_str("plan_retention_days")
        )
    return deleted


@reported
def schedule_cycle(
    hook: GpuSchedulerMetadataHook,
    planner: RolloutPlanner | PlanningLoop,
    cluster: Cluster,
    origin: tuple[str | None, str | None] = (None, None),
    log: Any = None,
    now_s: float | None = None,
) -> dict[str, Any]:
    """One cycle: collect, decide (solve or keep applying), apply, record. Returns the summary (JSON-serializable).

    ``planner``: the run's :class:`~airflow_gpu_scheduler.cycle.loop.PlanningLoop`; a bare planner gets a
    loop of its own (one cycle, which solves). The summary's ``released`` lists the job ids released to a
    GPU pool (``due`` is the same list under its earlier name), ``held`` counts the jobs kept in the
    intake pool as the plan and the API count them (held or not placed yet; ``rejected`` apart).
    """
    loop = planner if isinstance(planner, PlanningLoop) else PlanningLoop(planner)
    check_metadata_schema(hook)
    snapshot = hook.collect_gpu_work(now_s)
    if snapshot.empty:
        write_notes(hook, notes_for_plan((), snapshot.running))  # a task that started says so, even when none waits
        loop.wake_at_s = None
        if log:
            log.info("No GPU work is waiting for a plan; nothing changed.")
        return {
            "plan_id": None,
            "noop": True,
            "now_s": snapshot.now_s,
            "waiting": 0,
            "running": len(snapshot.running),
            "released": [],
            "due": [],
            "held": 0,
            "rejected": {},
            "gpus_busy": gpus_busy(snapshot.running, (t.name for t in cluster.gpu_types)),
        }

    workload = build_workload(snapshot, cluster)
    for job_id, detail in workload.rejection_fields.items():
        if log:
            log.error(
                "Cannot plan %s: task %s, field %r: %s. It stays held in pool %s.",
                job_id,
                detail["task"],
                detail["field"],
                detail["reason"],
                INTAKE_POOL,
            )
    plan, levers, decision = loop.step(cluster, workload, snapshot.now_s, previous=hook.previous_starts)
    if log and decision.solve and plan.report.message:
        log.warning("Planner: %s (status %s)", plan.report.message, plan.report.status)
    # A rejected task instance sitting in a GPU pool (a retry, a hand edit) goes back to intake:
    # nothing unplanned may take GPUs.
    assignments = dict(levers.assignments)
    for job_id in workload.rejected:
        assignments[job_id] = Assignment(INTAKE_POOL, 0)
    # GPU pools of types no longer in the cluster are closed: no slots outside the plan.
    pool_slots = dict(levers.pool_slots)
    for pool in snapshot.pool_slots:
        if is_gpu_pool(pool) and pool not in pool_slots:
            pool_slots[pool] = 0
    levers = Levers(pool_slots, assignments)

    plan_row, job_rows = plan_record(cluster, snapshot, workload, plan, levers, None, origin)
    notes = notes_for_plan(job_rows, snapshot.running)
    if loop.stored is None or loop.stored[0] != hook.newest_plan_id():
        loop.stored = hook.newest_plan()  # first cycle of a run, or another writer stored a plan meanwhile
        loop.stored_for = None
    step_s = loop.planner.config.step_s
    changed = decisions_changed(loop.stored[1], job_rows, tolerance_s=step_s)
    # Between solves the plan is only applied further (jobs released as it planned, newcomers not yet
    # placed): the stored plan of this solve is brought up to date in place instead of stored again.
    amend = changed and not decision.solve and loop.stored_for is plan and loop.stored[0] is not None
    store = changed and not amend
    predicted = None
    if store:
        predicted = predict(cluster, workload, snapshot.now_s, plan, log)
        plan_row["predicted"] = to_json(predicted)
    amended = None
    if amend:
        assert loop.stored[0] is not None
        amended = (
            loop.stored[0],
            {k: plan_row[k] for k in ("waiting", "running", "due", "rejected", "pool_slots")}
            | {"checked_s": snapshot.now_s},
            # Running jobs keep the row that released them: the plan's record of what it decided.
            [
                r
                for r in job_rows
                if r["decision"] != _RUNNING
                and (
                    r["job_id"] not in loop.stored[1]
                    or decisions_changed({r["job_id"]: loop.stored[1][r["job_id"]]}, [r], step_s)
                )
            ],
        )
    if store or amend or levers_differ(levers, snapshot):
        result = hook.apply_levers(
            levers, snapshot.waiting, record=(plan_row, job_rows) if store else None, notes=notes, amend=amended
        )
    else:
        result = ApplyResult(dict(levers.pool_slots), (), ())
        notes.counts = write_notes(hook, notes)
    plan_id = result.plan_id
    if store or amend:
        loop.stored = (
            plan_id,
            {**(loop.stored[1] if amend else {}), **{r["job_id"]: r for r in job_rows if r["decision"] != _RUNNING}},
        )
        loop.stored_for = plan
    elif loop.stored[0] is not None and hook.confirm_plan(loop.stored[0], snapshot.now_s):
        plan_id = loop.stored[0]
        loop.stored_for = plan
    else:  # another plan was stored meanwhile (a fail-open release): this one is the newest again
        plan_row["predicted"] = to_json(predict(cluster, workload, snapshot.now_s, plan, log))
        plan_id = hook.store_plan({"moved": len(result.moved), **plan_row}, job_rows)
        loop.stored, store = (plan_id, {r["job_id"]: r for r in job_rows if r["decision"] != _RUNNING}), True
        loop.stored_for = plan
    out = released(levers)
    summary = {
        "plan_id": plan_id,
        "noop": False,
        "now_s": snapshot.now_s,
        "solved": decision.solve,
        "replan_reason": decision.reason,
        "stored": store,
        "amended": amend,
        "method": plan.report.method,
        "status": plan.report.status,
        "objective": finite(plan.report.objective),
        "gap": finite(plan.report.gap),
        "solve_wall_s": round(plan.report.wall_s, 3) if decision.solve else 0.0,
        "waiting": len(snapshot.waiting),
        "running": len(workload.running),
        "released": out,
        "due": list(out),
        "held": held_count(job_rows),
        "rejected": dict(workload.rejected),
        "rejected_fields": dict(workload.rejection_fields),
        "pool_slots": dict(result.pool_slots),
        "moved": len(result.moved),
        "skipped": list(result.skipped),
        "predicted": predicted,
        "gpus_busy": gpus_busy(snapshot.running, (t.name for t in cluster.gpu_types)),
        "notes": notes.counts.as_dict(),
    }
    if log:
        log.info(
            "Plan %s (%s, %s; %s): %d waiting, %d running, %d released (%s), %d held, %d rejected, %d moved; pools %s",
            plan_id,
            plan.report.method,
            plan.report.status,
            f"solved: {decision.reason}" if decision.solve else "kept applying",
            len(snapshot.waiting),
            len(workload.running),
            len(out),
            ", ".join(out) or "-",
            summary["held"],
            len(workload.rejected),
            len(result.moved),
            dict(result.pool_slots),
        )
    return summary
