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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_gpu_scheduler.core.levers import gpu_type_of_pool
from airflow_gpu_scheduler.core.planner.objective import job_value
from airflow_gpu_scheduler.core.planner.plan import Plan, PlannedStart, SolveReport
from airflow_gpu_scheduler.core.workload import Cluster, Job, JobKind, RunningJob, runtime_s

if TYPE_CHECKING:
    from airflow_gpu_scheduler.core.policies.base import Policy

#: Job id prefix of the placeholder that holds a GPU type's streaming reservation in a projection.
RESERVED = "~reserved:"
_NEVER_S = 1e12


def projected_plan(
    rule: Policy,
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
    ends = {}
    for r in running:
        expected = r.start_s + runtime_s(r.job, r.job.planning_estimate_s, cluster.gpu_type(r.gpu_type))
        ends[r.job.job_id] = max(expected, now_s + 30.0)
        now_running[r.job.job_id] = r

    def estimated(job: Job, gpu_type: str) -> float:
        return runtime_s(job, job.planning_estimate_s, cluster.gpu_type(gpu_type))

    ran = run_rule(rule, cluster, queued, list(now_running.values()), ends, now_s, until_s, estimated)
    started = {job.job_id for _, job, _, _ in ran}
    waiting = [j.job_id for j in queued if j.job_id not in started]
    starts = [(t, job, gpu_type, t + runtime) for t, job, gpu_type, runtime in ran]
    starts.sort(key=lambda s: (s[0], not s[1].is_streaming, -job_value(s[1])))
    planned = tuple(
        PlannedStart(job.job_id, gpu_type, start, end, rank, job.is_streaming)
        for rank, (start, job, gpu_type, end) in enumerate(starts)
    )
    report = SolveReport(name, "projected", 0.0, 0.0, None, None, 0.0)
    return Plan(now_s, planned, tuple(waiting), report, dict(reserve))


def run_rule(
    rule: Policy,
    cluster: Cluster,
    waiting: Sequence[Job],
    running: Sequence[RunningJob],
    ends: Mapping[str, float],
    now_s: float,
    until_s: float,
    runtime_of: Callable[[Job, str], float],
    arrivals: Sequence[Job] = (),
) -> list[tuple[float, Job, str, float]]:
    """What ``rule`` starts from ``now_s`` until ``until_s``: (start, job, GPU type, runtime), in order.

    The rule is asked again at every start, end and arrival, and sees estimates only.
    ``ends``: when each running job ends (one not in it never ends); ``runtime_of(job,
    gpu_type)``: how long a job the rule starts holds its GPUs; ``arrivals``: jobs that join
    the queue at their ``submit_s``. Both the projection (everything as estimated) and the
    look-ahead of a rule followed live (sampled durations, endpoints arriving) run this loop.
    """
    from airflow_gpu_scheduler.core.policies.base import ClusterState

    now_running = {r.job.job_id: r for r in running}
    heap = [(ends[job_id], job_id) for job_id in now_running if job_id in ends]
    heapq.heapify(heap)
    queue = {j.job_id: j for j in waiting}
    coming = sorted(arrivals, key=lambda j: j.submit_s)
    next_arrival = 0
    out: list[tuple[float, Job, str, float]] = []
    t = now_s
    while True:
        while heap and heap[0][0] <= t + 1e-9:
            now_running.pop(heapq.heappop(heap)[1], None)
        while next_arrival < len(coming) and coming[next_arrival].submit_s <= t + 1e-6:
            queue[coming[next_arrival].job_id] = coming[next_arrival]
            next_arrival += 1
        if queue:
            decision = rule.decide(ClusterState(t, cluster, tuple(queue.values()), tuple(now_running.values())))
            for job_id, given in decision.levers.assignments.items():
                gpu_type = gpu_type_of_pool(given.pool)
                job = queue.get(job_id)
                if job is None or gpu_type is None:
                    continue
                del queue[job_id]
                runtime = runtime_of(job, gpu_type)
                out.append((t, job, gpu_type, runtime))
                now_running[job_id] = RunningJob(job, gpu_type, t)
                heapq.heappush(heap, (t + runtime, job_id))
        upcoming = []
        if next_arrival < len(coming):
            upcoming.append(coming[next_arrival].submit_s)
        if heap and queue:
            upcoming.append(heap[0][0])
        if not upcoming:
            return out
        t = max(t, min(upcoming))
        if t > until_s:
            return out
