"""A dispatch rule's plan: when a rule such as EASY backfill would start each queued job, by the estimates.

A rule decides only what starts now; the rollout needs its whole future as a plan, so
that it can be compared with the MILP's and applied through the same levers. The rule
is run forward on the estimates (no new arrivals): at each expected job end it decides
again, and what it starts is recorded. Batch work keeps the plan's streaming reservation
free (the rule sees each GPU type minus the part of the reservation that running
endpoints do not cover), as every plan does.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from airflow_gpu_scheduler.core.levers import gpu_type_of_pool
from airflow_gpu_scheduler.core.planner.objective import job_value
from airflow_gpu_scheduler.core.planner.plan import Plan, PlannedStart, SolveReport
from airflow_gpu_scheduler.core.workload import Cluster, Job, JobKind, RunningJob, runtime_s

#: Job id prefix of the placeholder that holds a GPU type's streaming reservation in a projection.
RESERVED = "~reserved:"
_NEVER_S = 1e12


def projected_plan(
    rule,
    cluster: Cluster,
    queued: Sequence[Job],
    running: Sequence[RunningJob],
    now_s: float,
    until_s: float,
    reserve: Mapping[str, int],
    name: str,
) -> Plan:
    """The plan ``rule`` (a policy: ``decide(ClusterState)``) would follow from now until ``until_s``.

    Running jobs are expected to end at their estimate (a job past it: half a minute from
    now). Jobs the rule has not started by ``until_s`` are left unplanned (held).
    """
    from airflow_gpu_scheduler.core.policies.base import ClusterState

    streaming_running = dict.fromkeys(cluster.names, 0)
    for r in running:
        if r.job.is_streaming:
            streaming_running[r.gpu_type] += r.job.gpus
    # The rule sees what batch work may use: the part of the reservation that running endpoints
    # do not cover is held by a placeholder that never ends.
    now_running: dict[str, RunningJob] = {}
    for gpu in cluster.gpu_types:
        held = min(gpu.count, max(0, reserve.get(gpu.name, 0) - streaming_running[gpu.name]))
        if held:
            placeholder = Job(
                f"{RESERVED}{gpu.name}",
                now_s,
                JobKind.BATCH_INFERENCE,
                held,
                estimate_s=_NEVER_S,
                gpu_types=(gpu.name,),
            )
            now_running[placeholder.job_id] = RunningJob(placeholder, gpu.name, now_s)
    ends: list[tuple[float, str]] = []
    for r in running:
        expected = r.start_s + runtime_s(r.job, r.job.planning_estimate_s, cluster.gpu_type(r.gpu_type))
        heapq.heappush(ends, (max(expected, now_s + 30.0), r.job.job_id))
        now_running[r.job.job_id] = r
    waiting = {j.job_id: j for j in queued}
    starts: list[tuple[float, Job, str, float]] = []
    t = now_s
    while waiting and t <= until_s:
        decision = rule.decide(ClusterState(t, cluster, tuple(waiting.values()), tuple(now_running.values())))
        for job_id, assignment in decision.levers.assignments.items():
            gpu_type = gpu_type_of_pool(assignment.pool)
            job = waiting.get(job_id)
            if job is None or gpu_type is None:
                continue
            del waiting[job_id]
            end = t + runtime_s(job, job.planning_estimate_s, cluster.gpu_type(gpu_type))
            now_running[job_id] = RunningJob(job, gpu_type, t)
            heapq.heappush(ends, (end, job_id))
            starts.append((t, job, gpu_type, end))
        if not ends:
            break
        t, job_id = heapq.heappop(ends)
        now_running.pop(job_id, None)
        while ends and ends[0][0] <= t + 1e-9:
            now_running.pop(heapq.heappop(ends)[1], None)
    starts.sort(key=lambda s: (s[0], not s[1].is_streaming, -job_value(s[1])))
    planned = tuple(
        PlannedStart(job.job_id, gpu_type, start, end, rank, job.is_streaming)
        for rank, (start, job, gpu_type, end) in enumerate(starts)
    )
    report = SolveReport(name, "projected", 0.0, 0.0, None, None, 0.0)
    return Plan(now_s, planned, tuple(waiting), report, dict(reserve))
