"""Airflow's levers and Airflow's dispatch rule, in plain Python.

A plan can only act on Airflow through three levers: which pool a task instance
is in, how many slots each pool has, and the task instance's priority weight.
A fourth setting routes rather than orders: the executor queue of a released task
instance names its planned GPU type's queue, so that on a distributed executor
(Celery, one queue per GPU type) only workers on that hardware pick it up.
:class:`Levers` is that set of settings; :func:`airflow_dispatch` is what
Airflow's scheduler does with them (``SchedulerJobRunner.
_executable_task_instances_to_queued`` in Airflow 3.3): order waiting task
instances by priority weight (descending), then arrival, and start each one
whose pool has enough open slots; one that does not fit is skipped, and smaller,
later ones may take the slots (no reservation). The simulator dispatches with
exactly this function, so a plan proven in simulation is a plan Airflow executes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from airflow_gpu_scheduler.core.planner.plan import PlannedStart
from airflow_gpu_scheduler.core.workload import Cluster, GpuType, Job, RunningJob, allowed_types, runtime_s

if TYPE_CHECKING:
    from airflow_gpu_scheduler.core.planner import Plan

#: Pool where declared GPU work waits for a plan. It has no slots: nothing in it starts.
INTAKE_POOL = "gpu_intake"
POOL_PREFIX = "gpu_"
STREAMING_SUFFIX = "_streaming"
#: Default executor queue of a GPU type: ``gpu-h100`` (a cluster config may name another).
QUEUE_PREFIX = "gpu-"
#: Weights are written as integers spaced by this much, leaving room for Airflow's own
#: weight rules to add small amounts without reordering the plan.
WEIGHT_STEP = 10
WEIGHT_BASE = 1_000_000


def pool_name(gpu_type: str, streaming: bool = False) -> str:
    """The Airflow pool of a GPU type: ``gpu_h100`` (batch) or ``gpu_h100_streaming``."""
    return f"{POOL_PREFIX}{gpu_type}{STREAMING_SUFFIX if streaming else ''}"


def gpu_type_of_pool(pool: str) -> str | None:
    """Inverse of :func:`pool_name`; ``None`` for the intake pool and foreign pools."""
    if pool == INTAKE_POOL or not pool.startswith(POOL_PREFIX):
        return None
    name = pool[len(POOL_PREFIX) :]
    return name.removesuffix(STREAMING_SUFFIX)


def executor_queue(gpu_type: GpuType) -> str:
    """The executor queue of a GPU type's workers: its configured ``queue``, else ``gpu-<type>``."""
    return gpu_type.queue or f"{QUEUE_PREFIX}{gpu_type.name}"


def plan_weight(rank: int) -> int:
    """Priority weight for the job at ``rank`` in plan order (0 = first): higher starts first."""
    return WEIGHT_BASE - WEIGHT_STEP * rank


@dataclass(frozen=True)
class Assignment:
    """Where one waiting task instance sits, how it is weighted, and (once released) which
    executor queue it goes to; ``queue=None`` leaves the task instance's queue as it is.

    Held task instances get no queue: Airflow hands a task instance to an executor only
    when its pool has an open slot, and the intake pool has none, so a held task's queue
    is never read.
    """

    pool: str
    weight: int
    queue: str | None = None


@dataclass(frozen=True)
class Levers:
    """Everything a policy may set in Airflow: pool slots, and pool + weight per waiting job.

    Waiting jobs missing from ``assignments`` stay where they are (in the intake pool
    for a fresh job); pools missing from ``pool_slots`` keep their slots.
    """

    pool_slots: Mapping[str, int] = field(default_factory=dict)
    assignments: Mapping[str, Assignment] = field(default_factory=dict)


@dataclass(frozen=True)
class WaitingTask:
    """What Airflow's dispatch looks at for one scheduled task instance."""

    job_id: str
    pool: str
    slots: int
    weight: int
    arrival: float
    #: ``dag_id.task_id``: Airflow skips every task instance of a task that found its
    #: pool full for the rest of that scheduling loop (``starved_tasks``).
    task_key: str


def airflow_dispatch(
    waiting: Sequence[WaitingTask],
    pool_slots: Mapping[str, int],
    pool_used: Mapping[str, int],
) -> list[str]:
    """Job ids Airflow's scheduler would start now, in the order it starts them.

    Mirrors one scheduling loop: sort by ``-priority_weight``, then arrival; skip a
    task instance whose pool lacks open slots (and, like Airflow, every other
    instance of the same task in this loop); tasks in pools that do not exist never
    start. Called repeatedly by the simulator until nothing more starts.
    """
    open_slots = {pool: slots - pool_used.get(pool, 0) for pool, slots in pool_slots.items()}
    starved_tasks: set[str] = set()
    started: list[str] = []
    for task in sorted(waiting, key=lambda t: (-t.weight, t.arrival, t.job_id)):
        if task.pool not in open_slots or task.task_key in starved_tasks:
            continue
        if open_slots[task.pool] >= task.slots:
            open_slots[task.pool] -= task.slots
            started.append(task.job_id)
        else:
            starved_tasks.add(task.task_key)
    return started


def levers_for_plan(
    plan: Plan,
    cluster: Cluster,
    waiting: Sequence[Job],
    running: Sequence[RunningJob],
    now_s: float,
    release_ahead_s: float = 0.0,
    release_next: bool = False,
) -> Levers:
    """Express a plan through Airflow's levers.

    ``release_ahead_s``: also release jobs planned to start that soon (the next
    planning cycle), so GPUs freed between cycles are not left idle; a job released
    early can only start where its pool has room, and by starting early it ends early.

    Jobs due now (planned start <= now) go to the pool of their planned GPU type with
    weights in plan order, and to that type's executor queue. With ``release_next``, so
    do, on each GPU type, the held batch jobs next in plan order while they fit the GPUs
    free now and claimed by no released job (a job that ended before its estimate freed
    them), and then the next one, which waits in its pool until enough GPUs free up (the
    pool's slots are the gate): a GPU that frees is refilled by Airflow's next scheduler
    loop, not at the next plan. Nothing behind that one is released, and nothing at all
    while a due job on the type still waits for GPUs, so no smaller job can take GPUs a
    job planned before it waits for (Airflow's dispatch skips a gang that does not fit
    and starts whatever does); a gang being drained for keeps its drain. A real-time
    endpoint the plan has not placed (it arrived since) goes first at once (the oldest
    first), to the streaming pool of its freest allowed type. Every other waiting job is
    held in the intake pool, so Airflow's greedy dispatch cannot take GPUs the plan
    reserved for someone else.
    Each GPU type's GPUs are split between a batch pool and a streaming pool: the
    streaming pool keeps the plan's reservation for real-time inference, never more
    than the GPUs running batch work leaves, so the two pools together never exceed
    the GPUs that exist.
    """
    planned = plan.by_job()
    batch_running: dict[str, int] = {name: 0 for name in cluster.names}
    streaming_running: dict[str, int] = {name: 0 for name in cluster.names}
    for r in running:
        (streaming_running if r.job.is_streaming else batch_running)[r.gpu_type] += r.job.gpus

    assignments: dict[str, Assignment] = {}
    streaming_due: dict[str, int] = {name: 0 for name in cluster.names}
    claimed: dict[str, int] = {name: 0 for name in cluster.names}
    later: list[tuple[int, Job]] = []

    def release(job: Job, start: PlannedStart) -> None:
        assignments[job.job_id] = Assignment(
            pool_name(start.gpu_type, job.is_streaming),
            plan_weight(start.rank),
            executor_queue(cluster.gpu_type(start.gpu_type)),
        )
        claimed[start.gpu_type] += job.gpus
        if job.is_streaming:
            streaming_due[start.gpu_type] += job.gpus

    unplaced_endpoints: list[Job] = []
    for job in waiting:
        start = planned.get(job.job_id)
        if start is None and job.is_streaming:
            unplaced_endpoints.append(job)
        elif start is not None and start.start_s <= now_s + release_ahead_s + 1e-6 and job.submit_s <= now_s + 1e-6:
            release(job, start)
        else:
            assignments[job.job_id] = Assignment(INTAKE_POOL, 0)
            if start is not None:
                later.append((start.rank, job))
    free = {t.name: t.count - batch_running[t.name] - streaming_running[t.name] for t in cluster.gpu_types}
    unmet = {
        t.name: max(0, plan.streaming_reserve.get(t.name, 0) - streaming_running[t.name]) for t in cluster.gpu_types
    }
    # What each GPU type is being drained for: the first held batch job in plan order, if the
    # GPUs free now are too few for it; and the released batch jobs, whose GPUs an endpoint
    # given the next free ones would take first (its weight is the highest).
    drains: dict[str, Drain | None] = dict.fromkeys(cluster.names)
    due_rate: dict[str, float] = dict.fromkeys(cluster.names, 0.0)
    for job in waiting:
        start = planned.get(job.job_id)
        if start is not None and not job.is_streaming and assignments[job.job_id].pool != INTAKE_POOL:
            due_rate[start.gpu_type] = max(due_rate[start.gpu_type], job.priority * job.gpus)
    first_held: set[str] = set()
    for _, job in sorted(later, key=lambda item: item[0]):
        start = planned[job.job_id]
        name = start.gpu_type
        if job.is_streaming or name in first_held:
            continue
        first_held.add(name)
        if job.gpus > free[name] - claimed[name] - unmet[name]:
            drains[name] = Drain(max(now_s, start.start_s), job.priority * job.gpus)
    # Endpoints that arrived since the plan go ahead of every planned job, oldest first. Their weights
    # are distinct: Airflow breaks ties by the run's logical date (NULL for manual runs), not arrival.
    by_arrival = sorted(unplaced_endpoints, key=lambda job: (job.submit_s, job.job_id))
    arrival_rank = {job.job_id: i - len(by_arrival) for i, job in enumerate(by_arrival)}
    for job in unplaced_endpoints:
        # An endpoint that arrived after the plan was made cannot wait for the next solve: it goes
        # first, to the streaming pool of the allowed type with the most GPUs free, unless that would
        # delay a more valuable job the plan is draining GPUs for (the next solve weighs the two).
        options = []
        for t in allowed_types(job, cluster):
            drain = drains[t.name]
            if due_rate[t.name] and claimed[t.name] + job.gpus > free[t.name]:
                drain = Drain.stronger(drain, Drain(now_s, due_rate[t.name]))
            if endpoint_may_go(job, t, now_s, unmet[t.name] - streaming_due[t.name], drain):
                options.append(t)
        if options:
            name = endpoint_type(job, cluster, batch_running, streaming_running, claimed, options)
            release(job, PlannedStart(job.job_id, name, now_s, now_s, arrival_rank[job.job_id], True))
        else:
            assignments[job.job_id] = Assignment(INTAKE_POOL, 0)
    if release_next:
        blocked: set[str] = set()
        for _, job in sorted(later, key=lambda item: item[0]):
            start = planned[job.job_id]
            name = start.gpu_type
            if name in blocked:
                continue
            # Batch work leaves the part of the streaming reservation no endpoint holds.
            room = free[name] - claimed[name] - (0 if job.is_streaming else unmet[name])
            # A job that has not arrived (only a planner that knows the future plans one) keeps its GPUs.
            if room < 0 or (job.gpus > room and job.is_streaming) or job.submit_s > now_s + 1e-6:
                blocked.add(name)  # a released job still waits for GPUs here: nothing may queue behind it
                continue
            release(job, start)
            if job.gpus > room:
                blocked.add(name)  # the head of the order waits in its pool for GPUs; the rest stay held

    slots: dict[str, int] = {INTAKE_POOL: 0}
    for gpu_type in cluster.gpu_types:
        name = gpu_type.name
        batch, streaming = split_pools(
            gpu_type.count,
            plan.streaming_reserve.get(name, 0),
            batch_running[name],
            streaming_running[name],
            streaming_due[name],
        )
        slots[pool_name(name)], slots[pool_name(name, streaming=True)] = batch, streaming
    return Levers(slots, assignments)


def split_pools(
    count: int, reserve: int, batch_running: int, streaming_running: int, streaming_due: int
) -> tuple[int, int]:
    """(batch, streaming) pool slots of one GPU type: the streaming pool keeps the reservation (or
    what endpoints hold and wait for), never more than batch work leaves; together never more than
    the GPUs that exist.

    An endpoint released but still waiting for GPUs (batch work holds them) must get the next ones
    that free: Airflow starts from the pools as last set, before the planner looks again, so the
    batch pool is closed below what runs in it by what the endpoint waits for.
    """
    wanted = max(reserve, streaming_running + streaming_due)
    streaming = max(0, min(wanted, count - batch_running))
    batch = count - streaming
    waiting_for = streaming_running + streaming_due - streaming
    if waiting_for > 0:
        batch = max(0, min(batch, batch_running - waiting_for))
    return batch, streaming


class Drain(NamedTuple):
    """GPUs of a type held idle (or the next ones to free) for a job the plan starts there:
    when it is planned to start, and what it earns per second (priority x GPUs)."""

    start_s: float
    rate: float

    @staticmethod
    def stronger(a: Drain | None, b: Drain) -> Drain:
        return b if a is None or b.rate > a.rate else a


def endpoint_may_go(job: Job, gpu_type: GpuType, now_s: float, reserved_free: int, drain: Drain | None) -> bool:
    """May an endpoint no plan has placed start on ``gpu_type`` at once?

    Into the streaming reservation, always: that is what it is kept for. Elsewhere unless it
    would delay a drain for a job that earns more per second than the endpoint (a gang): GPUs
    held for a gang are the gang's, as EASY backfill keeps its head job's reservation, or a
    stream of endpoints, each taking a GPU the drain waited for, would postpone it for ever.
    """
    if job.gpus <= reserved_free or drain is None or drain.rate <= job.priority * job.gpus:
        return True
    return now_s + runtime_s(job, job.planning_estimate_s, gpu_type) <= drain.start_s


def endpoint_type(
    job: Job,
    cluster: Cluster,
    batch_running: Mapping[str, int],
    streaming_running: Mapping[str, int],
    claimed: Mapping[str, int],
    options: Sequence[GpuType] | None = None,
) -> str:
    """Where an endpoint no plan has placed yet goes: the allowed type (of ``options``) with the most
    GPUs free, then the fastest."""
    return max(
        allowed_types(job, cluster) if options is None else options,
        key=lambda t: (t.count - batch_running[t.name] - streaming_running[t.name] - claimed[t.name], t.speed),
    ).name


def default_levers(cluster: Cluster) -> dict[str, int]:
    """Pool slots without a plan: one pool per GPU type holding all its GPUs."""
    slots = {INTAKE_POOL: 0}
    for gpu_type in cluster.gpu_types:
        slots[pool_name(gpu_type.name)] = gpu_type.count
        slots[pool_name(gpu_type.name, streaming=True)] = 0
    return slots
