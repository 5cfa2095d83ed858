"""The scheduling operator: collect queued GPU work, plan it, apply the plan, report."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.cluster_config import cluster_from_file, cluster_from_variable
from airflow_gpu_scheduler.core.levers import INTAKE_POOL, Assignment, Levers, pool_name
from airflow_gpu_scheduler.core.planner import Plan, PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.policies.base import ClusterState
from airflow_gpu_scheduler.core.replan import ReplanDecision, ReplanRule
from airflow_gpu_scheduler.core.waiting import waiting_reasons
from airflow_gpu_scheduler.core.workload import Cluster, expected_end_s
from airflow_gpu_scheduler.cycle_metrics import gpus_busy, reported
from airflow_gpu_scheduler.gpu_work import GpuWorkload, build_workload
from airflow_gpu_scheduler.hooks.metadata import ApplyResult, GpuSchedulerMetadataHook, GpuWorkSnapshot, is_gpu_pool
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

    Each cycle collects the waiting and running GPU task instances from the metadata database
    and asks the core's re-planning rule (:class:`~airflow_gpu_scheduler.core.replan.ReplanRule`,
    the same one the simulator's ``milp`` policy follows) whether to solve again with the MILP
    planner (Pyomo + HiGHS, greedy fallback) or to keep applying the current plan. It applies the
    plan through Airflow's own levers in one transaction: task instances due now move from the
    intake pool to the pool and the executor queue of their planned GPU type with priority weights
    in plan order (so on the CeleryExecutor only that type's workers take them), and so does the
    next job of each GPU type, which waits in its pool until enough GPUs free up (the pool's slots
    are the gate, so a freed GPU is refilled by Airflow's next scheduler loop and nothing smaller
    overtakes it); the others stay held in the intake pool, and each GPU-type pool gets as many
    slots as the type has GPUs (minus the streaming reservation).

    Between cycles the task looks at the GPU task instances every ``watch_every_s`` with one
    cheap query; a GPU task that arrives, starts or ends starts a cycle at once. A plan is stored
    in the provider's tables (``gpu_sched_plan``, ``gpu_sched_plan_job``) only when its decisions
    change; a cycle that changes nothing confirms the stored plan instead (the planner's heartbeat),
    and plans older than ``[gpu_scheduler] plan_retention_days`` are deleted. The last cycle's
    summary is returned (XCom ``return_value``), and each waiting task instance gets its plan as its
    Airflow note (never over a person's; :mod:`~airflow_gpu_scheduler.plan_notes`). With nothing
    waiting, a cycle writes no plan, only the notes of tasks that started.

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
        scheduled every minute keeps the loop running for most of the minute (templated, e.g.
        ``"{{ dag_run.conf.get('repeat_for_s', 0) }}"``).
    :param repeat_every_s: seconds between full cycles when nothing happens
        (default ``[gpu_scheduler] cycle_interval_s``).
    :param watch_every_s: seconds between the cheap looks for GPU work that arrived, started or
        ended (default ``[gpu_scheduler] watch_interval_s``).
    :param replan_interval_s: solve again at least this often while the work keeps changing
        (default ``[gpu_scheduler] replan_interval_s``).
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
        watch_every_s: float | None = None,
        replan_interval_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value in (("repeat_every_s", repeat_every_s), ("watch_every_s", watch_every_s),
                            ("replan_interval_s", replan_interval_s)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        self.gpu_scheduler_conn_id = gpu_scheduler_conn_id
        self.cluster_file = cluster_file
        self.cluster_variable = cluster_variable
        self.planner_config = planner_config
        self.repeat_for_s = repeat_for_s
        self.repeat_every_s = repeat_every_s
        self.watch_every_s = watch_every_s
        self.replan_interval_s = replan_interval_s

    def load_cluster(self) -> Cluster:
        """The cluster from ``cluster_file`` if given, else from the Airflow Variable."""
        if self.cluster_file:
            return cluster_from_file(self.cluster_file)
        return cluster_from_variable(self.cluster_variable or config.get_str("cluster_variable"))

    def execute(self, context: Context) -> dict[str, Any]:
        cluster = self.load_cluster()
        hook = GpuSchedulerMetadataHook(self.gpu_scheduler_conn_id)
        repeat_every_s = self.repeat_every_s or config.get_float("cycle_interval_s")
        watch_every_s = min(self.watch_every_s or config.get_float("watch_interval_s"), repeat_every_s)
        loop = PlanningLoop(RolloutPlanner(self.planner_config or configured_planner()), early_s=repeat_every_s,
                            replan_interval_s=self.replan_interval_s or config.get_float("replan_interval_s"))
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
        seen: tuple | None = None
        next_cycle = time.monotonic()
        try:
            while True:
                # One cheap look; a full cycle only when GPU work changed, the plan has a job due,
                # or the heartbeat is due. Read before the cycle, so a change during it is seen next time.
                look = hook.gpu_work_fingerprint()
                if look != seen or time.monotonic() >= next_cycle or loop.due(time.time()):
                    # One planner at a time: a cycle that finds the lock taken is skipped, and a run
                    # that cannot take it at its first cycle (another run is planning) ends cleanly.
                    planned = locked_cycle(hook, loop, cluster, origin, self.log,
                                           wait_s=0.0 if cycles else FIRST_LOCK_WAIT_S, prune=not cycles)
                    if planned is not None:
                        summary = planned
                        cycles += 1
                        seen, next_cycle = look, time.monotonic() + repeat_every_s
                    elif not cycles:
                        self.log.warning("Another planning run holds the planner lock; this run exits without "
                                         "planning (that run keeps planning, nothing is wrong).")
                        return {**locked_out_summary(), "cycles": 0}
                    else:
                        self.log.info("Planner lock busy (the fail-open watchdog or another run); cycle skipped.")
                if time.monotonic() + watch_every_s > stop_at:
                    break
                time.sleep(watch_every_s)
        finally:
            hook.close()
        return {**summary, "cycles": cycles, "solves": loop.solves}


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
    return PlannerConfig(step_s=config.get_float("planning_step_s"), horizon_s=config.get_float("planning_horizon_s"),
                         time_limit_s=config.get_float("planning_budget_s"))


def locked_out_summary() -> dict[str, Any]:
    """XCom of a run that did not plan because another run held the planner lock."""
    return {"plan_id": None, "noop": True, "locked_out": True, "waiting": None, "due": [], "held": 0, "rejected": {}}


#: Plans the review page's history lists: never pruned, however old.
KEEP_NEWEST_PLANS = 20


def prune_plans(hook: GpuSchedulerMetadataHook, now_s: float | None = None, log: Any = None) -> int:
    """Delete plans older than ``[gpu_scheduler] plan_retention_days``, keeping the newest the page shows."""
    now_s = time.time() if now_s is None else now_s
    deleted = hook.prune_plans(now_s - config.get_float("plan_retention_days") * 86400.0, KEEP_NEWEST_PLANS)
    if deleted and log:
        log.info("Deleted %d plans older than %s days (plan_retention_days).", deleted,
                 config.get_str("plan_retention_days"))
    return deleted


class PlanningLoop:
    """The operator's decision path, kept between cycles of one run: the core's re-planning rule, the
    planner where the rule says solve, and the plan's levers, which are applied either way.

    It also remembers the decisions of the newest stored plan, so a cycle that changes none of
    them stores nothing (see :func:`decisions_changed`).

    :param planner: the planner (the MILP and the rollout over candidate plans).
    :param early_s: a job ending this much before its expected end is a surprise (the full-cycle interval).
    :param replan_interval_s: solve again at least this often while the work keeps changing.
    """

    def __init__(self, planner: RolloutPlanner, early_s: float = 10.0, replan_interval_s: float = 60.0) -> None:
        self.planner = planner
        # At most one solve per cycle interval, as the simulator's policy (asked at every event) does.
        self.rule = ReplanRule(early_s=early_s, min_interval_s=replan_interval_s, release_next=True,
                               min_gap_s=early_s)
        self.solves = 0
        self.wake_at_s: float | None = None
        self.stored: tuple[int | None, dict[str, dict[str, Any]]] | None = None
        #: the plan (solve) the newest stored plan records, once this run stored or confirmed it
        self.stored_for: Plan | None = None

    def step(self, cluster: Cluster, workload: GpuWorkload, now_s: float,
             previous: Callable[[], Mapping[str, float]] = dict) -> tuple[Plan, Levers, ReplanDecision]:
        """Decide (solve or keep applying), solve if so, and return the plan, its levers and the decision.

        ``previous``: the promises of the newest stored plan, read only when this run has no plan yet.
        """
        decision = self.rule.decide(cluster, workload.queued, workload.running, now_s)
        if decision.solve:
            promises = self.rule.previous_starts() or previous()
            # What finished teaches the rollout the estimate errors and the endpoints to expect.
            seen = ClusterState(now_s, cluster, tuple(workload.queued), tuple(workload.running),
                                completed=tuple(workload.completed))
            plan = self.planner.plan(cluster, workload.queued, workload.running, now_s, workload.reserve,
                                     previous=promises, errors=seen.estimate_errors(), in_force=self.rule.plan,
                                     demand=seen.streaming_demand())
            self.rule.solved(plan, workload.queued, workload.running, now_s)
            self.solves += 1
        assert self.rule.plan is not None
        levers = self.rule.levers(cluster, workload.queued, workload.running, now_s)
        self.wake_at_s = self.rule.wake_at_s(workload.queued, workload.running, now_s)
        return self.rule.plan, levers, decision

    def due(self, now_s: float) -> bool:
        """Has a job of the current plan reached its planned start (or a solve become allowed)?"""
        return self.wake_at_s is not None and now_s >= self.wake_at_s


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

    ``planner``: the run's :class:`PlanningLoop`; a bare planner gets a loop of its own (one
    cycle, which solves).
    """
    loop = planner if isinstance(planner, PlanningLoop) else PlanningLoop(planner)
    check_metadata_schema(hook)
    snapshot = hook.collect_gpu_work(now_s)
    if snapshot.empty:
        write_notes(hook, notes_for_plan((), snapshot.running))  # a task that started says so, even when none waits
        loop.wake_at_s = None
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
    changed = decisions_changed(loop.stored[1], job_rows, tolerance_s=loop.planner.config.step_s)
    # Between solves the plan is only applied further (jobs released as it planned, newcomers not yet
    # placed): the stored plan of this solve is brought up to date in place instead of stored again.
    amend = changed and not decision.solve and loop.stored_for is plan and loop.stored[0] is not None
    store = changed and not amend
    predicted = None
    if store:
        predicted = predict(cluster, workload, snapshot.now_s, plan, log)
        plan_row["predicted"] = json.dumps(predicted) if predicted is not None else None
    amended = None
    if amend:
        assert loop.stored[0] is not None
        amended = (loop.stored[0], {k: plan_row[k] for k in ("waiting", "running", "due", "rejected", "pool_slots")}
                   | {"checked_s": snapshot.now_s},
                   # Running jobs keep the row that released them: the plan's record of what it decided.
                   [r for r in job_rows if r["decision"] != "running" and (
                       r["job_id"] not in loop.stored[1]
                       or decisions_changed({r["job_id"]: loop.stored[1][r["job_id"]]}, [r], loop.planner.config.step_s))])
    if store or amend or levers_differ(levers, snapshot):
        result = hook.apply_levers(levers, snapshot.waiting, record=(plan_row, job_rows) if store else None,
                                   notes=notes, amend=amended)
    else:
        result = ApplyResult(dict(levers.pool_slots), (), ())
        notes.counts = write_notes(hook, notes)
    plan_id = result.plan_id
    if store or amend:
        loop.stored = (plan_id, {**(loop.stored[1] if amend else {}),
                                 **{r["job_id"]: r for r in job_rows if r["decision"] != "running"}})
        loop.stored_for = plan
    elif loop.stored[0] is not None and hook.confirm_plan(loop.stored[0], snapshot.now_s):
        plan_id = loop.stored[0]
        loop.stored_for = plan
    else:  # another plan was stored meanwhile (a fail-open release): this one is the newest again
        plan_row["predicted"] = json.dumps(predict(cluster, workload, snapshot.now_s, plan, log))
        plan_id = hook.store_plan({"moved": len(result.moved), **plan_row}, job_rows)
        loop.stored, store = (plan_id, {r["job_id"]: r for r in job_rows if r["decision"] != "running"}), True
        loop.stored_for = plan
    due = [job_id for job_id, a in levers.assignments.items() if a.pool != INTAKE_POOL]
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
        "objective": _finite(plan.report.objective),
        "gap": _finite(plan.report.gap),
        "solve_wall_s": round(plan.report.wall_s, 3) if decision.solve else 0.0,
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
        log.info("Plan %s (%s, %s; %s): %d waiting, %d running, %d released (%s), %d held, %d rejected, %d moved; "
                 "pools %s", plan_id, plan.report.method, plan.report.status,
                 f"solved: {decision.reason}" if decision.solve else "kept applying",
                 len(snapshot.waiting), len(workload.running), len(due), ", ".join(due) or "-", summary["held"],
                 len(workload.rejected), len(result.moved), dict(result.pool_slots))
    return summary


def levers_differ(levers: Levers, snapshot: GpuWorkSnapshot) -> bool:
    """Would applying ``levers`` write anything (a task instance's pool, weight or queue, or a pool's slots)?"""
    if any(snapshot.pool_slots.get(pool) != slots for pool, slots in levers.pool_slots.items()):
        return True
    by_job = {t.key.job_id: t for t in snapshot.waiting}
    for job_id, a in levers.assignments.items():
        ti = by_job.get(job_id)
        if ti is not None and is_gpu_pool(ti.pool) and (
                ti.pool != a.pool or ti.priority_weight != a.weight or (a.queue is not None and ti.queue != a.queue)):
            return True
    return False


def decisions_changed(stored: Mapping[str, Mapping[str, Any]], job_rows: Sequence[Mapping[str, Any]],
                      tolerance_s: float) -> bool:
    """Does this cycle decide anything the stored plan did not: a job released or held, moved to another
    pool or GPU type, re-weighted, newly seen, or its planned start moved by more than ``tolerance_s``?

    Jobs that left the queue (they started) and running jobs are not decisions: Airflow ran what the
    plan released. A new plan is stored only when this is true; otherwise the stored one is confirmed.
    """
    for row in job_rows:
        if row["decision"] == "running":
            continue
        old = stored.get(row["job_id"])
        if old is None or any(old.get(k) != row.get(k) for k in ("decision", "gpu_type", "pool", "weight")):
            return True
        a, b = old.get("planned_start_s"), row.get("planned_start_s")
        if row["decision"] == "due":
            continue  # released: its planned start (now, at each solve) no longer decides anything
        if (a is None) != (b is None) or (a is not None and abs(a - b) > tolerance_s):
            return True
    return False


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
            # Released before its planned start: it waits in its pool for GPUs (not stored; the note says so).
            "released_ahead": decision == "due" and start is not None and start.start_s > snapshot.now_s + 1e-6,
        })
    for running in workload.running:
        key = running.job.meta["key"]
        rows.append({
            "job_id": running.job.job_id, "dag_id": key[0], "run_id": key[1], "task_id": key[2],
            "map_index": int(key[3]), "decision": "running", "kind": running.job.kind.value,
            "gpus": running.job.gpus, "priority": running.job.priority, "estimate_s": running.job.estimate_s,
            "deadline_s": running.job.deadline_s, "gpu_type": running.gpu_type,
            "pool": pool_name(running.gpu_type, running.job.is_streaming), "planned_start_s": running.start_s,
            "planned_end_s": expected_end_s(running, cluster.gpu_type(running.gpu_type), snapshot.now_s),
        })
    return plan_row, rows


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
