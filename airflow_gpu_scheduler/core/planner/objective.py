"""What a start is worth: the MILP's objective, priced per candidate start.

Priority-weighted output first (a job is worth priority x GPUs x estimated duration at
speed 1.0, and only if it meets its deadline or, when streaming, its wait budget);
sooner second: each second of a job's work is discounted by how far ahead it is done, so
a job is worth its value discounted at its midpoint (the benchmark's weighted goodput over
a window whose end the planner does not know); earlier starts break ties. Two promises are
priced in: an endpoint started within its wait budget, and a batch job kept at the start the
previous plan gave it when that start is near (so replanning does not waste a drain).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from airflow_gpu_scheduler.core.planner.plan import PlannerConfig
from airflow_gpu_scheduler.core.workload import Job

#: A batch job that misses its deadline still runs, but only for the utilization it
#: brings: worth this fraction of its on-time value.
LATE_VALUE_FRACTION = 0.02
#: Work done at the end of the horizon is worth this much less than work done now.
TIME_DISCOUNT = 0.5
#: A streaming job started within its wait budget is worth this many times its value more
#: than one started late: real-time work that waits past its budget has lost its users,
#: while a batch job delayed by it usually still completes (the time discount is
#: only a proxy for utilization and must not outweigh an endpoint served in time).
STREAMING_ON_TIME_BONUS = 2.0


def time_weight(start: float, end: float, horizon: float) -> float:
    """The share of a batch job's value earned if it runs from ``start`` to ``end`` (offsets from now).

    Work is discounted linearly with how far ahead it is done, so the whole job is discounted at
    its midpoint. Discounting at the *end* instead (completion time) values a long job's work
    below a short one's of the same priority: a long training gang then loses its GPUs to
    shorter, less valuable work, and more of it falls outside any window the plan is judged on.
    """
    return 1.0 - TIME_DISCOUNT * (start + end) / (2 * horizon) - 1e-4 * start / horizon


def job_value(job: Job) -> float:
    """Priority-weighted output of a job done on time: priority x GPUs x duration at speed 1.0."""
    return job.priority * job.work


def commitment(cfg: PlannerConfig, job: Job, previous: Mapping[str, float], now_s: float) -> float:
    """Offset from now up to which a start keeps the previous plan's promise to ``job`` (-inf: none).

    Replanning on every arrival would otherwise let a newcomer take the GPUs a gang has
    been draining towards: the drain is wasted and the gang slips again at the next
    arrival, until it misses the day (Slurm keeps its top job's reservation for the same
    reason). A start no later than the promised one (give or take half a step) is worth
    ``commit_bonus`` more, on a GPU type where the drain has begun (see
    :func:`~airflow_gpu_scheduler.core.planner.candidates.build_candidates`): some of its
    GPUs already sit idle for the job. Elsewhere nothing has been spent on the promise and
    the plan stays free (a fixed bonus would otherwise freeze the order of short jobs, whose
    reordering gains are tiny next to it). A promise already past (the job is due, but what
    it waits for overran its estimate) binds nothing: pricing it in at "now" favours due
    small jobs over the drain the plan is running (measured in the benchmark's notes).
    """
    promised = previous.get(job.job_id)
    if (
        promised is None
        or job.is_streaming
        or cfg.commit_bonus <= 0
        or promised < now_s
        or promised - now_s > cfg.commit_horizon_s
    ):
        return -math.inf
    # Half a step of slack: a running job due within half a step is assumed to end half a
    # step from now, so the start a promise named can move that much later.
    return promised - now_s + cfg.step_s / 2 + 1e-6


def streaming_budget_left(job: Job, now_s: float) -> float:
    """Seconds from now within which a streaming job still starts within its wait budget."""
    return job.submit_s + (job.max_wait_s or 0.0) - now_s + 1e-6
