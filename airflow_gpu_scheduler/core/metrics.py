"""Metrics over a fixed evaluation window [0, horizon], the same for every policy.

- ``utilization``: busy GPU-seconds inside the window / (total GPUs x window).
- ``weighted_output``: for batch jobs completed inside the window (and by their
  deadline, if any): priority x GPUs x duration at speed 1.0 (the job's work, so a
  slow GPU earns nothing extra); for streaming jobs: priority x GPUs x seconds
  served inside the window, only if the job started within its wait budget.
  This is the published result's measure; it has a cliff at the window's end (a
  gang ending a minute after it is worth nothing).
- ``weighted_goodput``: the same value without the cliff: a batch job that meets its
  deadline earns the share of its work done inside the window (nothing is
  preempted, so a started job's end is known). Streaming as in ``weighted_output``.
- waits: from submit to start; a job that never started counts as waiting until
  the end of the window (censored), so starvation is never hidden.
- ``streaming_on_time_rate``: the share of endpoints started within their wait budget,
  of those whose budget ends inside the window: the service level real-time users see,
  and what the goodput metrics pay for. The p95 wait says how long the rest waited; a
  policy that serves more endpoints in time by letting the ones already late wait
  longer scores better here and worse there, so both are reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_gpu_scheduler.core.simulate import SimResult
from airflow_gpu_scheduler.core.workload import Job, JobKind, runtime_s


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def streaming_on_time(job: Job, start_s: float | None) -> bool:
    return start_s is not None and start_s - job.submit_s <= (job.max_wait_s or 0.0) + 1e-6


def job_output(job: Job, start_s: float | None, end_s: float | None, horizon_s: float) -> float:
    """Priority-weighted output one job earned inside the window."""
    if start_s is None or start_s >= horizon_s:
        return 0.0
    if job.is_streaming:
        if not streaming_on_time(job, start_s):
            return 0.0
        served = (end_s if end_s is not None else horizon_s) - start_s
        return job.priority * job.gpus * max(0.0, min(served, horizon_s - start_s))
    if end_s is None or end_s > horizon_s:
        return 0.0
    if job.deadline_s is not None and end_s > job.deadline_s + 1e-6:
        return 0.0
    return job.priority * job.gpus * (job.duration_s or 0.0)


def job_goodput(job: Job, start_s: float | None, runtime_s: float | None, horizon_s: float) -> float:
    """Priority-weighted work one job did inside the window, pro rata, if it meets its deadline.

    ``runtime_s``: how long the job holds its GPUs (its actual duration on its GPU type).
    A streaming job earns as in :func:`job_output`.
    """
    if start_s is None or start_s >= horizon_s or runtime_s is None:
        return 0.0
    end_s = start_s + runtime_s
    if job.is_streaming:
        return job_output(job, start_s, end_s if end_s <= horizon_s else None, horizon_s)
    if job.deadline_s is not None and end_s > job.deadline_s + 1e-6:
        return 0.0
    share = 1.0 if runtime_s <= 0 else (min(end_s, horizon_s) - start_s) / runtime_s
    return job.priority * job.gpus * (job.duration_s or 0.0) * share


@dataclass(frozen=True)
class PolicyMetrics:
    utilization: float
    weighted_output: float
    weighted_goodput: float
    streaming_p95_wait_s: float | None
    streaming_on_time_rate: float | None
    deadline_hit_rate: float | None
    mean_wait_s: dict[str, float | None]
    max_wait_s: float | None
    plan_p95_s: float | None
    jobs_started: int
    jobs_completed: int

    def as_dict(self) -> dict[str, object]:
        return {
            "utilization": self.utilization,
            "weighted_output": self.weighted_output,
            "weighted_goodput": self.weighted_goodput,
            "streaming_p95_wait_s": self.streaming_p95_wait_s,
            "streaming_on_time_rate": self.streaming_on_time_rate,
            "deadline_hit_rate": self.deadline_hit_rate,
            "mean_wait_s": self.mean_wait_s,
            "max_wait_s": self.max_wait_s,
            "plan_p95_s": self.plan_p95_s,
            "jobs_started": self.jobs_started,
            "jobs_completed": self.jobs_completed,
        }


def evaluate(result: SimResult) -> PolicyMetrics:
    """All metrics of one simulated run."""
    horizon = result.horizon_s
    busy = 0.0
    output = goodput = 0.0
    waits_by_kind: dict[str, list[float]] = {k.value: [] for k in JobKind}
    streaming_waits: list[float] = []
    on_time = due = 0
    deadlines_met = deadlines_total = 0
    started = completed = 0
    for job in result.jobs:
        o = result.outcomes[job.job_id]
        if o.start_s is not None:
            started += 1
            end_in_window = o.end_s if o.end_s is not None else horizon
            busy += job.gpus * max(0.0, min(end_in_window, horizon) - o.start_s)
        if o.end_s is not None:
            completed += 1
        output += job_output(job, o.start_s, o.end_s, horizon)
        if o.start_s is not None and o.gpu_type is not None:
            runtime = runtime_s(job, job.duration_s or 0.0, result.cluster.gpu_type(o.gpu_type))
            goodput += job_goodput(job, o.start_s, runtime, horizon)
        wait = (o.start_s if o.start_s is not None else horizon) - job.submit_s
        waits_by_kind[job.kind.value].append(wait)
        if job.is_streaming:
            streaming_waits.append(wait)
            if job.submit_s + (job.max_wait_s or 0.0) <= horizon:
                due += 1
                on_time += int(streaming_on_time(job, o.start_s))
        if job.deadline_s is not None and job.deadline_s <= horizon:
            deadlines_total += 1
            deadlines_met += int(o.end_s is not None and o.end_s <= job.deadline_s + 1e-6)
    all_waits = [w for ws in waits_by_kind.values() for w in ws]
    return PolicyMetrics(
        utilization=busy / (result.cluster.total_gpus * horizon),
        weighted_output=output,
        weighted_goodput=goodput,
        streaming_p95_wait_s=percentile(streaming_waits, 95),
        streaming_on_time_rate=on_time / due if due else None,
        deadline_hit_rate=deadlines_met / deadlines_total if deadlines_total else None,
        mean_wait_s={k: (sum(v) / len(v) if v else None) for k, v in waits_by_kind.items()},
        max_wait_s=max(all_waits) if all_waits else None,
        plan_p95_s=percentile(result.decision_wall_s, 95),
        jobs_started=started,
        jobs_completed=completed,
    )
