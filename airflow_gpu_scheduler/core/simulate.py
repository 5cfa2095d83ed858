"""A discrete-event simulator whose dispatch is Airflow's.

Time jumps from event to event (arrivals, completions, policy wake-ups). At each
event the policy may set Airflow's levers (pools, slots, weights); then Airflow's
own dispatch rule (:func:`~airflow_gpu_scheduler.core.levers.airflow_dispatch`)
decides what starts. Jobs run for their *actual* duration; policies only ever see
copies of jobs with the duration removed, and estimates learned from completions.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from airflow_gpu_scheduler.core.estimates import Estimator
from airflow_gpu_scheduler.core.levers import (
    INTAKE_POOL,
    Assignment,
    WaitingTask,
    airflow_dispatch,
    gpu_type_of_pool,
    pool_name,
)
from airflow_gpu_scheduler.core.planner import Plan
from airflow_gpu_scheduler.core.policies.base import ClusterState, Completion, Policy
from airflow_gpu_scheduler.core.streaming import StreamingInterval
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob, runtime_s


class SimulationError(RuntimeError):
    """The simulator caught a broken invariant (a bug, never bad input)."""


@dataclass(frozen=True)
class Outcome:
    """What happened to one job: where and when it ran (None: never started / not finished)."""

    job_id: str
    gpu_type: str | None
    submit_s: float
    start_s: float | None
    end_s: float | None


@dataclass
class SimResult:
    policy: str
    cluster: Cluster
    jobs: tuple[Job, ...]
    horizon_s: float
    outcomes: dict[str, Outcome]
    decision_wall_s: list[float] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)


#: Completions a policy is shown (the most recent): enough to learn estimate errors per kind.
COMPLETIONS_SEEN = 500
_ARRIVAL, _COMPLETION, _WAKE = 1, 0, 2  # completions first, so freed GPUs are seen by arrivals


def simulate(
    cluster: Cluster,
    jobs: Sequence[Job],
    policy: Policy,
    horizon_s: float,
    keep_plans: bool = False,
    running_at_start: Sequence[RunningJob] = (),
    running_pools: Mapping[str, str] | None = None,
) -> SimResult:
    """Run ``policy`` on ``jobs`` from time 0 until ``horizon_s``; every job must carry ``duration_s``.

    ``running_at_start``: jobs already holding GPUs at time 0 (started at or before it);
    they end at their start plus their runtime, or at once if that lies in the past. Each
    holds slots of the pool ``running_pools`` names for it (by job id), by default its GPU
    type's batch or streaming pool; policies see it like any running job, without its duration.
    """
    jobs = tuple(sorted((j for j in jobs if j.submit_s <= horizon_s), key=lambda j: (j.submit_s, j.job_id)))
    for job in jobs:
        if job.duration_s is None:
            raise ValueError(f"job {job.job_id!r}: field 'duration_s': the simulator needs actual durations")
    by_id = {j.job_id: j for j in jobs}
    estimator = Estimator()
    events: list[tuple[float, int, int, str]] = []
    seq = 0

    def push(t: float, kind: int, job_id: str = "") -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, kind, seq, job_id))

    for job in jobs:
        push(job.submit_s, _ARRIVAL, job.job_id)

    waiting: dict[str, Job] = {}  # policy's view: estimate filled, duration hidden
    assignment: dict[str, Assignment] = {}
    pool_slots: dict[str, int] = {INTAKE_POOL: 0}
    pool_used: dict[str, int] = {}
    running: dict[str, tuple[RunningJob, str]] = {}
    type_used = {t.name: 0 for t in cluster.gpu_types}
    streaming_history: list[StreamingInterval] = []
    completed: list[Completion] = []
    starts: dict[str, tuple[str, float]] = {}
    ends: dict[str, float] = {}
    result = SimResult(policy.name, cluster, jobs, horizon_s, {})
    for run in running_at_start:
        if run.job.duration_s is None:
            raise ValueError(f"job {run.job.job_id!r}: field 'duration_s': running jobs need a duration")
        pool = (running_pools or {}).get(run.job.job_id) or pool_name(run.gpu_type, run.job.is_streaming)
        pool_used[pool] = pool_used.get(pool, 0) + run.job.gpus
        type_used[run.gpu_type] += run.job.gpus
        running[run.job.job_id] = (replace(run, job=estimator.fill(replace(run.job, duration_s=None))), pool)
        by_id[run.job.job_id] = run.job
        end = run.start_s + runtime_s(run.job, run.job.duration_s, cluster.gpu_type(run.gpu_type))
        push(max(end, 0.0), _COMPLETION, run.job.job_id)
    cadence = policy.cadence_s
    pending_tick: float | None = None
    wake_at: float | None = None

    def next_tick(t: float) -> float:
        return t if cadence is None else math.ceil(t / cadence - 1e-9) * cadence

    while events:
        now = events[0][0]
        if now > horizon_s:
            break
        policy_due = False
        while events and events[0][0] == now:
            _, kind, _, job_id = heapq.heappop(events)
            if kind == _COMPLETION:
                run, pool = running.pop(job_id)
                pool_used[pool] -= run.job.gpus
                type_used[run.gpu_type] -= run.job.gpus
                ends[job_id] = now
                true = by_id[job_id]
                estimator.observe(true.kind, true.group, true.duration_s or 0.0)
                if true.is_streaming:
                    streaming_history.append(StreamingInterval(run.gpu_type, true.gpus, run.start_s, now))
                completed.append(Completion(run.job, run.gpu_type, run.start_s, now))
                policy_due = True
            elif kind == _ARRIVAL:
                visible = replace(by_id[job_id], duration_s=None)
                waiting[job_id] = estimator.fill(visible)
                assignment[job_id] = Assignment(INTAKE_POOL, 0)
                policy_due = True
            else:
                policy_due = True
        if policy_due:
            tick = next_tick(now)
            if tick > now:
                if pending_tick is None or tick < pending_tick:
                    pending_tick = tick
                    push(tick, _WAKE)
            else:
                pending_tick = None
                state = ClusterState(
                    now,
                    cluster,
                    tuple(waiting.values()),
                    tuple(r for r, _ in running.values()),
                    tuple(streaming_history[-500:])
                    + tuple(
                        StreamingInterval(r.gpu_type, r.job.gpus, r.start_s, None)
                        for r, _ in running.values()
                        if r.job.is_streaming
                    ),
                    tuple(completed[-COMPLETIONS_SEEN:]),
                )
                t0 = time.perf_counter()
                decision = policy.decide(state)
                result.decision_wall_s.append(
                    decision.plan.report.wall_s if decision.plan is not None else time.perf_counter() - t0
                )
                if keep_plans and decision.plan is not None:
                    result.plans.append(decision.plan)
                pool_slots.update(decision.levers.pool_slots)
                for job_id, a in decision.levers.assignments.items():
                    if job_id in waiting:
                        assignment[job_id] = a
                _check_pools(cluster, pool_slots)
                if decision.wake_at_s is not None and decision.wake_at_s > now and decision.wake_at_s != wake_at:
                    wake_at = next_tick(decision.wake_at_s)
                    push(wake_at, _WAKE)

        # Airflow's scheduler loop: dispatch until nothing more starts.
        tasks = [
            WaitingTask(
                j.job_id,
                assignment[j.job_id].pool,
                j.gpus,
                assignment[j.job_id].weight,
                j.submit_s,
                j.group or j.job_id,
            )
            for j in waiting.values()
        ]
        for job_id in airflow_dispatch(tasks, pool_slots, pool_used):
            job = waiting.pop(job_id)
            pool = assignment.pop(job_id).pool
            gpu_type = gpu_type_of_pool(pool)
            if gpu_type is None:
                raise SimulationError(f"job {job_id!r} started from pool {pool!r}, which holds no GPUs")
            type_used[gpu_type] += job.gpus
            if type_used[gpu_type] > cluster.gpu_type(gpu_type).count:
                raise SimulationError(f"GPU type {gpu_type} over-subscribed at t={now} by job {job_id!r}")
            if job.gpu_types and gpu_type not in job.gpu_types:
                raise SimulationError(f"job {job_id!r} started on {gpu_type}, not one of {job.gpu_types}")
            pool_used[pool] = pool_used.get(pool, 0) + job.gpus
            running[job_id] = (RunningJob(job, gpu_type, now), pool)
            starts[job_id] = (gpu_type, now)
            true = by_id[job_id]
            push(now + runtime_s(true, true.duration_s or 0.0, cluster.gpu_type(gpu_type)), _COMPLETION, job_id)

    for job in jobs:
        gpu_type, start = starts.get(job.job_id, (None, None))
        ended = ends.get(job.job_id)
        result.outcomes[job.job_id] = Outcome(
            job.job_id, gpu_type, job.submit_s, start, ended if ended is not None and ended <= horizon_s else None
        )
    return result


def _check_pools(cluster: Cluster, pool_slots: dict[str, int]) -> None:
    """Pools of one GPU type may never promise more GPUs than the type has."""
    total: dict[str, int] = {}
    for pool, slots in pool_slots.items():
        gpu_type = gpu_type_of_pool(pool)
        if gpu_type is not None:
            total[gpu_type] = total.get(gpu_type, 0) + slots
    for name, slots in total.items():
        if slots > cluster.gpu_type(name).count:
            raise SimulationError(
                f"pools of GPU type {name} hold {slots} slots for {cluster.gpu_type(name).count} GPUs"
            )
