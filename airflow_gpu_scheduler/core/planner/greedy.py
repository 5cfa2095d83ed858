"""The plan every cycle starts from: list scheduling in priority order.

Always feasible and cheap, it is the MILP's warm start and what a cycle falls back to
when the solver fails or runs out of time, so a plan is never worse than it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_gpu_scheduler.core.planner.candidates import Candidate
from airflow_gpu_scheduler.core.planner.grid import Capacity
from airflow_gpu_scheduler.core.workload import Job


def ranked(candidates: Mapping[int, list[Candidate]]) -> dict[int, list[Candidate]]:
    """Each job's candidates, most valuable first (stable: the earlier start wins a tie)."""
    return {j: sorted(cands, key=lambda c: -c.coefficient) for j, cands in candidates.items()}


def greedy_plan(
    jobs: Sequence[Job], candidates: Mapping[int, list[Candidate]], capacity: Capacity
) -> dict[int, Candidate]:
    """Each job in priority order (``jobs`` is sorted so) takes its best still-feasible start."""
    free = capacity.copy()
    by_value = ranked(candidates)
    chosen: dict[int, Candidate] = {}
    for j, job in enumerate(jobs):
        best = best_fitting(by_value[j], job, free)
        if best is not None:
            free.take(best.gpu_type, job.gpus, best.covers, job.is_streaming)
            chosen[j] = best
    return chosen


def best_fitting(by_value: list[Candidate], job: Job, free: Capacity) -> Candidate | None:
    """The most valuable start of ``job`` that still fits; ``by_value`` is most valuable first."""
    streaming = job.kind.is_streaming
    for c in by_value:
        if free.fits(c.gpu_type, job.gpus, c.covers, streaming):
            return c
    return None
