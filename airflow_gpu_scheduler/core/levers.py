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
from typing import TYPE_CHECKING

from airflow_gpu_scheduler.core.workload import Cluster, GpuType, Job, RunningJob

if TYPE_CHECKING:
    from airflow_gpu_scheduler.core.planner import Plan, PlannedStart

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

    ``release_next``: on each GPU type, also release held batch jobs in plan order while
    they fit the GPUs free now, and then the next one, which waits in its pool until
    enough GPUs free up (the pool's slots are the gate): a GPU that frees is refilled by
    Airflow's next scheduler loop, not at the next plan. Only the head of the plan order
    is ever released ahead, and only while every job due on that type fits, so no
    smaller job can take GPUs a job planned before it waits for (Airflow's dispatch
    skips a gang that does not fit and starts whatever does). Starting the head of the
    order earlier, on GPUs that are free, never takes capacity a later start needs: it
    ends earlier too.

    Jobs due now (planned start <= now) go to the pool of their planned GPU type with
    weights in plan order, and to that type's executor queue; every other waiting job is held in the intake pool, so
    Airflow's greedy dispatch cannot take GPUs the plan reserved for someone else.
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
    batch_due: dict[str, int] = {name: 0 for name in cluster.names}
    for job in waiting:
        start = planned.get(job.job_id)
        if start is not None and start.start_s <= now_s + release_ahead_s + 1e-6:
            assignments[job.job_id] = Assignment(pool_name(start.gpu_type, job.is_streaming), plan_weight(start.rank),
                                                 executor_queue(cluster.gpu_type(start.gpu_type)))
            (streaming_due if job.is_streaming else batch_due)[start.gpu_type] += job.gpus
        else:
            assignments[job.job_id] = Assignment(INTAKE_POOL, 0)

    slots: dict[str, int] = {INTAKE_POOL: 0}
    for gpu_type in cluster.gpu_types:
        name = gpu_type.name
        wanted = max(plan.streaming_reserve.get(name, 0), streaming_running[name] + streaming_due[name])
        streaming_slots = max(0, min(wanted, gpu_type.count - batch_running[name]))
        slots[pool_name(name, streaming=True)] = streaming_slots
        slots[pool_name(name)] = gpu_type.count - streaming_slots
    if release_next:
        for gpu_type in cluster.gpu_types:
            _release_next(gpu_type, planned, waiting, assignments,
                          slots[pool_name(gpu_type.name)] - batch_running[gpu_type.name] - batch_due[gpu_type.name])
    return Levers(slots, assignments)


def _release_next(gpu_type: GpuType, planned: Mapping[str, PlannedStart], waiting: Sequence[Job],
                  assignments: dict[str, Assignment], free: int) -> None:
    """Release held batch jobs of one GPU type in plan order: those that fit ``free`` GPUs, then one more."""
    if free < 0:
        return  # a due job still waits for GPUs: nothing may be queued behind it
    held = sorted((planned[job.job_id].rank, job) for job in waiting
                  if not job.is_streaming and assignments[job.job_id].pool == INTAKE_POOL
                  and job.job_id in planned and planned[job.job_id].gpu_type == gpu_type.name)
    for rank, job in held:
        assignments[job.job_id] = Assignment(pool_name(gpu_type.name), plan_weight(rank), executor_queue(gpu_type))
        free -= job.gpus
        if free < 0:
            return  # the head of the order waits in its pool for GPUs; everything behind it stays held


def default_levers(cluster: Cluster) -> dict[str, int]:
    """Pool slots without a plan: one pool per GPU type holding all its GPUs."""
    slots = {INTAKE_POOL: 0}
    for gpu_type in cluster.gpu_types:
        slots[pool_name(gpu_type.name)] = gpu_type.count
        slots[pool_name(gpu_type.name, streaming=True)] = 0
    return slots
