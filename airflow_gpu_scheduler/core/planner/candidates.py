"""Every start a queued job could take: its GPU type, grid point, expected end and worth.

``start[j, k, p]`` = 1 if job *j* starts on GPU type *k* at grid point *p*: a candidate
is made only for allowed types, for starts whose expected end fits the horizon, not
before the job is released (its submit time: only the clairvoyant yardstick plans jobs
that have not arrived), and where the job could fit if no other queued job existed.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from airflow_gpu_scheduler.core.planner import objective
from airflow_gpu_scheduler.core.planner.grid import Capacity
from airflow_gpu_scheduler.core.planner.objective import (
    LATE_VALUE_FRACTION,
    STREAMING_ON_TIME_BONUS,
    commitment,
    job_value,
    streaming_budget_left,
)
from airflow_gpu_scheduler.core.planner.plan import PlannerConfig
from airflow_gpu_scheduler.core.workload import Cluster, Job, allowed_types, runtime_s


class Candidate(NamedTuple):
    """One possible start: job, GPU type, grid point (a tuple: hundreds of thousands are made per cycle)."""

    job_index: int
    gpu_type: str
    point: int
    end: float
    coefficient: float
    covers: range


def build_candidates(
    cfg: PlannerConfig,
    cluster: Cluster,
    jobs: Sequence[Job],
    capacity: Capacity,
    now_s: float,
    horizon: float,
    previous: Mapping[str, float],
) -> dict[int, list[Candidate]]:
    """Every start of every job that could fit and end within the horizon, with its objective coefficient.

    A batch job is worth its value (a small fraction of it when it would miss its deadline),
    less a discount growing with its completion time (earlier completion first; a tiny term
    on the start breaks ties), plus ``commit_bonus`` of its value at a start that keeps the
    previous plan's promise where GPUs are being drained for it. An endpoint that missed its
    wait budget is still wanted as soon as possible: its start is valued, not its completion,
    and it is never written off; within its budget it earns ``STREAMING_ON_TIME_BONUS`` more.
    This loop runs hundreds of thousands of times per cycle on a large queue, so it stays flat.
    """
    points = capacity.points
    out: dict[int, list[Candidate]] = {}
    for j, job in enumerate(jobs):
        cands: list[Candidate] = []
        value = job_value(job)
        streaming = job.kind.is_streaming
        late_after = math.inf if job.deadline_s is None or streaming else job.deadline_s - now_s + 1e-6
        on_time_until = streaming_budget_left(job, now_s) if streaming else -math.inf
        promised_until = commitment(cfg, job, previous, now_s)
        released = job.submit_s - now_s - 1e-6
        for gpu_type in allowed_types(job, cluster):
            runtime = runtime_s(job, job.planning_estimate_s, gpu_type)
            name = gpu_type.name
            free = capacity.free[name]
            # A promise binds only where the drain has begun: GPUs idle now, too few to start.
            promised_here = promised_until if 0 < free[0] < job.gpus else -math.inf
            for p, start in enumerate(points):
                end = start + runtime
                if end > horizon + 1e-6:
                    break
                # A start that can never fit, even with no other queued job, is no candidate.
                # Free capacity only grows over time (running jobs end), so the first point decides.
                if free[p] < job.gpus or start < released:
                    continue
                if streaming:
                    coef = value * (1.0 - start / horizon)
                    if start <= on_time_until:
                        coef += STREAMING_ON_TIME_BONUS * value
                else:
                    v = value * LATE_VALUE_FRACTION if end > late_after else value
                    coef = v * objective.time_weight(start, end, horizon)
                    if start <= promised_here:
                        coef += cfg.commit_bonus * v
                stop = bisect_left(points, end - 1e-9, p)  # the grid points before the job's end
                cands.append(Candidate(j, name, p, end, coef, range(p, stop if stop > p else p + 1)))
        out[j] = cands
    return out
