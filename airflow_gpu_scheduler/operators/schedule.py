"""The scheduling operator: collect queued GPU work, plan it, apply the plan, report."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.cluster_config import cluster_from_file, cluster_from_variable
from airflow_gpu_scheduler.core.levers import INTAKE_POOL, Assignment, Levers, levers_for_plan, pool_name
from airflow_gpu_scheduler.core.planner import MilpPlanner, Plan, PlannerConfig
from airflow_gpu_scheduler.core.waiting import waiting_reasons
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.cycle_metrics import gpus_busy, reported
from airflow_gpu_scheduler.gpu_work import GpuWorkload, build_workload
from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook, GpuWorkSnapshot, is_gpu_pool
from airflow_gpu_scheduler.hooks.notes import write_notes
from airflow_gpu_scheduler.plan_notes import notes_for_plan
from airflow_gpu_scheduler.schema_check import check_metadata_schema

if TYPE_CHECKING:
    from airflow.sdk import Context


#: How long a planning run's first cycle keeps trying for the planner lock before it concludes that
#: another planning run holds it (a watchdog check holds it for well under this).
FIRST_LOCK_WAIT_S = 5.0
LOCK_RETRY_S = 0.5


class GpuScheduleOperator(BaseOperator):
    """
    Plans the order in which queued GPU work starts, and makes Airflow's scheduler follow it.

    Each cycle collects the waiting and running GPU task instances from the metadata database,
    plans them with the core's MILP planner (Pyomo + HiGHS, greedy fallback), and applies the
    plan through Airflow's own levers in one transaction: task instances due now move from the
    intake pool to the pool and the executor queue of their planned GPU type with priority
    weights in plan order (so on the CeleryExecutor only that type's workers take them), the
    others stay held in the intake pool, and each GPU-type pool gets as many slots as the type
    has GPUs (minus the streaming reservation). Every plan is stored in the provider's tables
    (``gpu_sched_plan``, ``gpu_sched_plan_job``); the last cycle's summary is returned (XCom
    ``return_value``), and each waiting task instance gets its plan as its Airflow note (never over a
    person's; :mod:`~airflow_gpu_scheduler.plan_notes`). With nothing waiting, a cycle writes no
    plan, only the notes of tasks that started.

    Arguments left unset come from the ``[gpu_scheduler]`` settings (``airflow config list
    --section gpu_scheduler``), read when the task runs.

    :param gpu_scheduler_conn_id: connection to Airflow's metadata database
        (see :class:`~airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook`;
        default ``[gpu_scheduler] metadata_conn_id``).
    :param cluster_file: path of a cluster JSON file (templated); if not set, the Airflow
        Variable named by ``cluster_variable`` is read.
    :param cluster_variable: Airflow Variable holding the cluster JSON (default ``[gpu_scheduler] cluster_variable``).
    :param planner_config: planner knobs (grid step, horizon, HiGHS time limit, gap target); default
        ``[gpu_scheduler] planning_step_s``, ``planning_horizon_s`` and ``planning_budget_s``.
    :param repeat_for_s: keep planning for this many seconds (0: one cycle), so a DAG
        scheduled every minute can re-plan more often than its schedule (templated, e.g.
        ``"{{ dag_run.conf.get('repeat_for_s', 0) }}"``).
    :param repeat_every_s: seconds between cycles when repeating (default ``[gpu_scheduler] cycle_interval_s``).
    """

    template_fields: Sequence[str] = ("cluster_file", "repeat_for_s")
    ui_color = "#d6f5e3"

    def __init__(
        self,
        *,
        gpu_scheduler_conn_id: str | None = None,
        cluster_file: str | None = None,
        cluster_variable: str | None = None,
        planner_config: PlannerConfig | None = None,
        repeat_for_s: float | str = 0.0,
        repeat_every_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if repeat_every_s is not None and not repeat_every_s > 0:
            raise ValueError(f"repeat_every_s must be > 0, got {repeat_every_s!r}")
        self.gpu_scheduler_conn_id = gpu_scheduler_conn_id
        self.cluster_file = cluster_file
        self.cluster_variable = cluster_variable
        self.planner_config = planner_config
        self.repeat_for_s = repeat_for_s
        self.repeat_every_s = repeat_every_s

    def load_cluster(self) -> Cluster:
        """The cluster from ``cluster_file`` if given, else from the Airflow Variable."""
        if self.cluster_file:
            return cluster_from_file(self.cluster_file)
        return cluster_from_variable(self.cluster_variable or config.get_str("cluster_variable"))

    def execute(self, context: Context) -> dict[str, Any]:
        cluster = self.load_cluster()
        hook = GpuSchedulerMetadataHook(self.gpu_scheduler_conn_id)
        planner = MilpPlanner(self.planner_config or configured_planner())
        repeat_every_s = self.repeat_every_s or config.get_float("cycle_interval_s")
        origin = (context["dag_run"].dag_id, context["dag_run"].run_id) if context.get("dag_run") else (None, None)
        try:
            repeat_for_s = float(self.repeat_for_s)
        except (TypeError, ValueError):
            raise ValueError(f"repeat_for_s must be a number of seconds, got {self.repeat_for_s!r}") from None
        if not math.isfinite(repeat_for_s) or repeat_for_s < 0:
            raise ValueError(f"repeat_for_s must be >= 0, got {self.repeat_for_s!r}")
        stop_at = time.monotonic() + repeat_for_s
        cycles = 0
        summary: dict[str, Any] = {}
        try:
            while True:
                # One planner at a time: a cycle that finds the lock taken is skipped, and a run
                # that cannot take it at its first cycle (another run is planning) ends cleanly.
                planned = locked_cycle(hook, planner, cluster, origin, self.log,
                                       wait_s=0.0 if cycles else FIRST_LOCK_WAIT_S)
                if planned is not None:
                    summary = planned
                    cycles += 1
                elif not cycles:
                    self.log.warning("Another planning run holds the planner lock; this run exits without "
                                     "planning (that run keeps planning, nothing is wrong).")
                    return {**locked_out_summary(), "cycles": 0}
                else:
                    self.log.info("Planner lock busy (the fail-open watchdog or another run); cycle skipped.")
                if time.monotonic() + repeat_every_s > stop_at:
                    break
                time.sleep(repeat_every_s)
        finally:
            hook.close()
        return {**summary, "cycles": cycles}


def locked_cycle(
    hook: GpuSchedulerMetadataHook,
    planner: MilpPlanner,
    cluster: Cluster,
    origin: tuple[str | None, str | None],
    log: Any,
    wait_s: float,
) -> dict[str, Any] | None:
    """One cycle under the planner lock, trying for the lock up to ``wait_s``; ``None`` if it stayed taken.

    The fail-open watchdog takes the same lock for one short check, and its runs are due at the same
    moments as the planner's (both DAGs run every minute): without the wait, a planning run whose
    first cycle met a watchdog check took it for another planning run and gave up its whole minute.
    """
    give_up = time.monotonic() + wait_s
    while True:
        with hook.planning_lock() as mine:
            if mine:
                return schedule_cycle(hook, planner, cluster, origin, log=log)
        if time.monotonic() >= give_up:
            return None
        time.sleep(LOCK_RETRY_S)


def configured_planner() -> PlannerConfig:
    """The planner's knobs from ``[gpu_scheduler]`` (grid step, horizon, budget); the rest stay the core's."""
    return PlannerConfig(step_s=config.get_float("planning_step_s"), horizon_s=config.get_float("planning_horizon_s"),
                         time_limit_s=config.get_float("planning_budget_s"))


def locked_out_summary() -> dict[str, Any]:
    """XCom of a run that did not plan because another run held the planner lock."""
    return {"plan_id": None, "noop": True, "locked_out": True, "waiting": None, "due": [], "held": 0, "rejected": {}}


@reported
def schedule_cycle(
    hook: GpuSchedulerMetadataHook,
    planner: MilpPlanner,
    cluster: Cluster,
    origin: tuple[str | None, str | None] = (None, None),
    log: Any = None,
    now_s: float | None = None,
) -> dict[str, Any]:
    """One cycle: collect, plan, apply, report. Returns the plan summary (JSON-serializable)."""
    check_metadata_schema(hook)
    snapshot = hook.collect_gpu_work(now_s)
    if snapshot.empty:
        write_notes(hook, notes_for_plan((), snapshot.running))  # a task that started says so, even when none waits
        if log:
            log.info("No GPU work is waiting for a plan; nothing changed.")
        return {"plan_id": None, "noop": True, "now_s": snapshot.now_s, "waiting": 0,
                "running": len(snapshot.running), "due": [], "held": 0, "rejected": {},
                "gpus_busy": gpus_busy(snapshot.running, (t.name for t in cluster.gpu_types))}

    workload = build_workload(snapshot, cluster)
    for job_id, detail in workload.rejection_fields.items():
        if log:
            log.error("Cannot plan %s: task %s, field %r: %s. It stays held in pool %s.",
                      job_id, detail["task"], detail["field"], detail["reason"], INTAKE_POOL)
    plan = planner.plan(cluster, workload.queued, workload.running, snapshot.now_s, workload.reserve,
                        previous=hook.previous_starts())
    if log and plan.report.message:
        log.warning("Planner: %s (status %s)", plan.report.message, plan.report.status)
    levers = levers_for_plan(plan, cluster, workload.queued, workload.running, snapshot.now_s)
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

    predicted = predict(cluster, workload, snapshot.now_s, plan, log)
    plan_row, job_rows = plan_record(cluster, snapshot, workload, plan, levers, predicted, origin)
    notes = notes_for_plan(job_rows, snapshot.running)
    result = hook.apply_levers(levers, snapshot.waiting, record=(plan_row, job_rows), notes=notes)
    due = [job_id for job_id, a in levers.assignments.items() if a.pool != INTAKE_POOL]
    summary = {
        "plan_id": result.plan_id,
        "noop": False,
        "now_s": snapshot.now_s,
        "method": plan.report.method,
        "status": plan.report.status,
        "objective": _finite(plan.report.objective),
        "gap": _finite(plan.report.gap),
        "solve_wall_s": round(plan.report.wall_s, 3),
        "waiting": len(snapshot.waiting),
        "running": len(workload.running),
        "due": due,
        "held": len(levers.assignments) - len(due),
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
        log.info("Plan %s (%s, %s): %d waiting, %d running, %d due now (%s), %d held, %d rejected; pools %s",
                 result.plan_id, plan.report.method, plan.report.status, len(snapshot.waiting), len(workload.running),
                 len(due), ", ".join(due) or "-", summary["held"], len(workload.rejected), dict(result.pool_slots))
    return summary


def predict(cluster: Cluster, workload: GpuWorkload, now_s: float, plan: Plan, log: Any = None) -> dict | None:
    """Predicted metrics of the plan vs Airflow's own dispatch, when the core can forecast them."""
    try:
        from airflow_gpu_scheduler.core.forecast import predict_plan_vs_airflow
    except ImportError:
        return None
    try:
        return json.loads(json.dumps(predict_plan_vs_airflow(cluster, workload.queued, workload.running, now_s, plan),
                                     default=str))
    except Exception as error:  # noqa: BLE001 - a forecast must never block applying a plan
        if log:
            log.warning("Forecast failed: %s: %s", type(error).__name__, error)
        return {"error": f"{type(error).__name__}: {error}"}


def plan_record(
    cluster: Cluster,
    snapshot: GpuWorkSnapshot,
    workload: GpuWorkload,
    plan: Plan,
    levers: Levers,
    predicted: Mapping[str, Any] | None,
    origin: tuple[str | None, str | None],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Rows for ``gpu_sched_plan`` and ``gpu_sched_plan_job`` describing one cycle."""
    report = plan.report
    planned = plan.by_job()
    reasons = waiting_reasons(plan, cluster, workload.queued, workload.running, snapshot.now_s)
    due = sum(1 for a in levers.assignments.values() if a.pool != INTAKE_POOL)
    plan_row = {
        "created_s": snapshot.now_s, "dag_id": origin[0], "run_id": origin[1],
        "cluster": json.dumps(cluster.to_dict()), "method": report.method, "status": report.status,
        "objective": _finite(report.objective), "greedy_objective": _finite(report.greedy_objective),
        "bound": _finite(report.bound), "gap": _finite(report.gap), "wall_s": report.wall_s,
        "message": report.message or None, "waiting": len(snapshot.waiting), "running": len(workload.running),
        "due": due, "rejected": len(workload.rejected), "pool_slots": json.dumps(dict(levers.pool_slots)),
        "streaming_reserve": json.dumps(dict(plan.streaming_reserve)),
        "predicted": json.dumps(predicted) if predicted is not None else None, "applied": True,
    }
    rows: list[dict[str, Any]] = []
    jobs = {job.job_id: job for job in workload.queued}
    for ti in snapshot.waiting:
        job_id = ti.key.job_id
        job = jobs.get(job_id)
        start = planned.get(job_id)
        assignment = levers.assignments.get(job_id)
        if job_id in workload.rejected:
            decision = "rejected"
        elif start is None:
            decision = "unplanned"
        else:
            decision = "held" if assignment is None or assignment.pool == INTAKE_POOL else "due"
        wait = reasons.get(job_id) if decision in ("held", "unplanned") else None
        rows.append({
            "job_id": job_id, "dag_id": ti.key.dag_id, "run_id": ti.key.run_id, "task_id": ti.key.task_id,
            "map_index": ti.key.map_index, "decision": decision,
            "kind": job.kind.value if job else None, "gpus": job.gpus if job else ti.pool_slots,
            "priority": job.priority if job else None, "estimate_s": job.estimate_s if job else None,
            "estimate_source": workload.estimate_sources.get(job_id),
            "gpu_type": start.gpu_type if start else None,
            "pool": assignment.pool if assignment else ti.pool, "weight": assignment.weight if assignment else None,
            "rank": start.rank if start else None, "planned_start_s": start.start_s if start else None,
            "planned_end_s": start.end_s if start else None,
            "reason": workload.rejected.get(job_id) or (wait.text if wait else None),
            "reason_code": "rejected" if job_id in workload.rejected else (wait.code if wait else None),
            "deadline_s": job.deadline_s if job else None,
        })
    for running in workload.running:
        key = running.job.meta["key"]
        rows.append({
            "job_id": running.job.job_id, "dag_id": key[0], "run_id": key[1], "task_id": key[2],
            "map_index": int(key[3]), "decision": "running", "kind": running.job.kind.value,
            "gpus": running.job.gpus, "priority": running.job.priority, "estimate_s": running.job.estimate_s,
            "deadline_s": running.job.deadline_s, "gpu_type": running.gpu_type,
            "pool": pool_name(running.gpu_type, running.job.is_streaming), "planned_start_s": running.start_s,
            "planned_end_s": running.start_s + (running.job.estimate_s or 0.0) / cluster.gpu_type(running.gpu_type).speed,
        })
    return plan_row, rows


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
