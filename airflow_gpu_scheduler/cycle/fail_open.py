"""Fail-open: when the planner is down, hand held GPU work back to Airflow's own order.

The planner holds GPU work in the zero-slot intake pool until a plan releases it. If no
plan has been applied for ``fail_open_after_s`` while work has waited that long, the
watchdog (:class:`~airflow_gpu_scheduler.operators.fail_open.GpuFailOpenOperator`, a DAG of
its own, so a crashing or hanging planning task cannot stop it) moves every held task
instance to the pool of a GPU type it may run on, restores the priority weight Airflow
itself would give it, and opens each type's pool to the GPUs not taken by streaming work.
Airflow then dispatches as if the provider were not installed. The next plan the planner
applies collects those task instances from the ``gpu_*`` pools like any others and takes
over again. Decisions only: the watchdog operator
(:func:`~airflow_gpu_scheduler.operators.fail_open.release_if_planner_down`) reads the state and writes
the release through the hook.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_gpu_scheduler.authoring.declare import parse_declaration
from airflow_gpu_scheduler.core.levers import INTAKE_POOL, Assignment, gpu_type_of_pool, pool_name
from airflow_gpu_scheduler.core.workload import Cluster, Job, WorkloadError, validate_job
from airflow_gpu_scheduler.cycle.snapshot import FailOpenState, GpuTaskInstance
from airflow_gpu_scheduler.db.records import Decision, JobRow, Method, PlanRecord, PlanRow, to_json


def fail_open_reason(state: FailOpenState, after_s: float) -> str | None:
    """Why held work must be released now, or ``None`` while the planner is alive (or nothing waits).

    The planner records a plan every cycle in which anything waits, so "no plan for
    ``after_s`` while something has waited longer than ``after_s``" means it is down. An idle
    planner makes no plans, which is why the age of the waiting work matters too. Once failed
    open, every later run releases what arrived since, until a plan is applied again.
    """
    now = state.now_s
    if state.last_plan_s is not None and now - state.last_plan_s <= after_s:
        return None
    last = "never" if state.last_plan_s is None else f"{now - state.last_plan_s:.0f} s ago"
    in_fail_open = state.last_release_s is not None and (
        state.last_plan_s is None or state.last_release_s > state.last_plan_s
    )
    if in_fail_open and (state.held or state.released):
        return f"still no plan (last applied {last}); releasing what arrived since"
    ready = [t.ready_s for t in state.waiting if t.state == "scheduled" and t.ready_s is not None]
    if ready and now - min(ready) > after_s:
        return (
            f"no plan applied for more than {after_s:.0f} s (last applied {last}) while GPU work has "
            f"waited {now - min(ready):.0f} s"
        )
    return None


@dataclass(frozen=True)
class FailOpenRelease:
    """Pools and weights that hand the waiting work to Airflow's default order.

    :param moves: ``{job_id: Assignment}`` for every waiting task instance that can run somewhere.
    :param pool_slots: slots per ``gpu_*`` pool: each type's GPUs minus those streaming work holds.
    :param kept: ``{job_id: reason}``: invalid declarations stay held, as they would under a plan.
    """

    moves: dict[str, Assignment]
    pool_slots: dict[str, int]
    kept: dict[str, str] = field(default_factory=dict)


def _target_pool(ti: GpuTaskInstance, cluster: Cluster) -> str:
    subject = ti.key.subject
    if ti.declaration is None:
        raise WorkloadError(subject, "executor_config.gpu_scheduler", "declares no GPU work", ti.key.job_id)
    declaration = parse_declaration(ti.declaration, subject)
    if ti.pool_slots != declaration.gpus:
        raise WorkloadError(subject, "pool_slots", f"is {ti.pool_slots} but the task declares {declaration.gpus} GPUs")
    job = Job(ti.key.job_id, 0.0, declaration.kind, declaration.gpus, gpu_types=declaration.gpu_types)
    validate_job(job, cluster)
    current = gpu_type_of_pool(ti.pool)
    names = [
        t.name for t in cluster.gpu_types if (not job.gpu_types or t.name in job.gpu_types) and t.count >= job.gpus
    ]
    # Keep a type the last plan chose; otherwise the first allowed type (cluster order) that fits.
    return pool_name(current if current in names else names[0])


def fail_open_release(state: FailOpenState, cluster: Cluster) -> FailOpenRelease:
    """Where each waiting task instance goes when the planner is down, and the pools' slots."""
    moves: dict[str, Assignment] = {}
    kept: dict[str, str] = {}
    for ti in state.waiting:
        weight = ti.default_weight if ti.default_weight is not None else 1
        try:
            moves[ti.key.job_id] = Assignment(_target_pool(ti, cluster), weight)
        except WorkloadError as error:
            kept[ti.key.job_id] = str(error)
            if ti.pool != INTAKE_POOL:
                moves[ti.key.job_id] = Assignment(INTAKE_POOL, 0)  # nothing unplannable takes GPUs
        except Exception as error:  # noqa: BLE001 - one unreadable declaration must not block the rest
            kept[ti.key.job_id] = f"unreadable declaration ({type(error).__name__}: {error})"
    slots: dict[str, int] = {INTAKE_POOL: 0}
    for gpu_type in cluster.gpu_types:
        streaming = pool_name(gpu_type.name, streaming=True)
        held_by_streaming = min(gpu_type.count, state.busy_slots.get(streaming, 0))
        slots[streaming] = held_by_streaming  # what runs there keeps running; nothing new starts there
        slots[pool_name(gpu_type.name)] = gpu_type.count - held_by_streaming
    for pool in state.pool_slots:
        if pool.startswith("gpu_") and pool not in slots:
            slots[pool] = 0  # a GPU type that left the cluster
    return FailOpenRelease(moves, slots, kept)


def fail_open_record(
    state: FailOpenState,
    cluster: Cluster,
    release: FailOpenRelease,
    reason: str,
    origin: tuple[str | None, str | None],
) -> PlanRecord:
    """The plan record of a release: method ``fail_open`` (the page's banner) and a row per waiting task instance,
    ``released`` or ``rejected`` (kept in the intake pool for an invalid declaration)."""
    released = [j for j, a in release.moves.items() if a.pool != INTAKE_POOL]
    plan_row: PlanRow = {
        "created_s": state.now_s,
        "dag_id": origin[0],
        "run_id": origin[1],
        "cluster": to_json(cluster.to_dict()),
        "method": Method.FAIL_OPEN.value,
        "status": "planner_down",
        "message": reason,
        "waiting": len(state.waiting),
        "running": sum(state.busy_slots.values()),
        "due": len(released),
        "rejected": len(release.kept),
        "pool_slots": to_json(release.pool_slots),
        "streaming_reserve": to_json({}),
        "applied": True,
    }
    rows: list[JobRow] = []
    for ti in state.waiting:
        job_id = ti.key.job_id
        assignment = release.moves.get(job_id)
        decision = Decision.REJECTED if job_id in release.kept else Decision.RELEASED
        rows.append(
            {
                "job_id": job_id,
                "dag_id": ti.key.dag_id,
                "run_id": ti.key.run_id,
                "task_id": ti.key.task_id,
                "map_index": ti.key.map_index,
                "decision": decision.value,
                "gpus": ti.pool_slots,
                "pool": assignment.pool if assignment else ti.pool,
                "weight": assignment.weight if assignment else ti.priority_weight,
                "reason": release.kept.get(job_id),
            }
        )
    return PlanRecord(plan_row, rows)
