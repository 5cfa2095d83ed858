"""Improving the greedy plan with MILPs until the cycle's budget is spent.

A queue whose model fits ``max_milp_vars`` is solved as one MILP; a larger one is
improved window by window (fix-and-optimize), so the cost of a cycle grows gently with
the queue. If the solver fails or finds nothing better in time, the greedy plan is used,
and the report says so: a plan is never worse than greedy.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence

from airflow_gpu_scheduler.core.planner.candidates import Candidate
from airflow_gpu_scheduler.core.planner.grid import Capacity
from airflow_gpu_scheduler.core.planner.model import MIN_SOLVE_S, SolveStats, plan_value, solve_subproblem
from airflow_gpu_scheduler.core.planner.plan import PlannerConfig, SolveReport
from airflow_gpu_scheduler.core.workload import Job

#: A window of the windowed search lets its jobs start this many grid points after the
#: latest incumbent start in it (so work can also move later to make room).
WINDOW_SLACK_POINTS = 2


def improve(
    cfg: PlannerConfig,
    jobs: Sequence[Job],
    candidates: Mapping[int, list[Candidate]],
    capacity: Capacity,
    greedy: dict[int, Candidate],
    greedy_obj: float,
    deadline: float,
) -> tuple[dict[int, Candidate], SolveReport]:
    """Improve the greedy plan with MILPs until the cycle's budget is spent.

    A queue whose model fits ``max_milp_vars`` is solved as one MILP. A larger one is
    improved window by window (fix-and-optimize, a large-neighbourhood search): the
    jobs the incumbent plan starts in one stretch of time are freed, every other job
    keeps its place, and a sub-MILP re-plans the freed ones, warm-started from the
    incumbent; it is accepted only if it is better. Windows overlap and slide from now
    outward, so a job can move earlier by one window per pass, and the near term,
    which is what gets applied, is optimized first. Every accepted step is feasible
    for the whole cycle, so the plan is never worse than greedy.
    """
    sizes = {j: len(candidates[j]) for j in range(len(jobs))}
    total_vars = sum(sizes.values())
    incumbent = dict(greedy)
    stats = SolveStats()
    if total_vars == 0:
        return greedy, SolveReport("greedy", "nothing to optimize", greedy_obj, greedy_obj, greedy_obj, 0.0, 0.0)
    # One MILP over everything when it fits, else windows (``whole`` None).
    whole = [(list(range(len(jobs))), range(len(capacity.points)))] if total_vars <= cfg.max_milp_vars else None
    status, bound = "not solved", None
    passes = 0
    while True:
        todo = whole if whole is not None else windows(cfg, jobs, incumbent, candidates, len(capacity.points))
        improved = False
        for free_jobs, stretch in todo:
            remaining = deadline - time.perf_counter()
            if remaining < MIN_SOLVE_S:
                stats.last_status = stats.last_status or "time_limit"
                break
            if whole is None:
                remaining = min(remaining, cfg.window_time_limit_s)
            result = solve_subproblem(cfg, jobs, candidates, capacity, incumbent, free_jobs, stretch, remaining, stats)
            if result is None:
                continue
            chosen, sub_status, sub_bound, gain = result
            status = sub_status
            if len(todo) == 1 and len(free_jobs) == len(jobs):
                bound = sub_bound
            if gain > 1e-9 * max(1.0, greedy_obj):
                incumbent = chosen
                improved = True
        passes += 1
        if (
            whole is not None
            or not improved
            or passes >= cfg.max_window_passes
            or deadline - time.perf_counter() < MIN_SOLVE_S
        ):
            break
    objective = plan_value(capacity, jobs, incumbent)
    if stats.subproblems == 0:
        msg = stats.message or f"time limit {cfg.time_limit_s:g} s used up before the MILP; greedy plan used"
        return greedy, SolveReport(
            "greedy",
            stats.last_status or "time_limit",
            greedy_obj,
            greedy_obj,
            None,
            None,
            0.0,
            stats.build_s,
            stats.solve_s,
            handoff_s=stats.handoff_s,
            message=msg,
            **stats.size(),
        )
    if objective < greedy_obj - 1e-6:  # cannot happen (every step is accepted only if better); kept as a guard
        incumbent, objective = greedy, greedy_obj
    if status == "not solved":
        # HiGHS ran but no (sub-)MILP came back with a plan at least as good as its warm start.
        return greedy, SolveReport(
            "greedy",
            stats.last_status or status,
            greedy_obj,
            greedy_obj,
            bound,
            gap(greedy_obj, bound),
            0.0,
            stats.build_s,
            stats.solve_s,
            handoff_s=stats.handoff_s,
            subproblems=stats.subproblems,
            message=stats.message or "MILP found nothing better; greedy plan kept",
            **stats.size(),
        )
    method = "milp" if whole is not None else "milp-windows"
    message = stats.message if whole is not None else f"{stats.subproblems} windows in {passes} pass(es)"
    return incumbent, SolveReport(
        method,
        status,
        objective,
        greedy_obj,
        bound,
        gap(objective, bound),
        0.0,
        stats.build_s,
        stats.solve_s,
        handoff_s=stats.handoff_s,
        subproblems=stats.subproblems,
        message=message,
        **stats.size(),
    )


def windows(
    cfg: PlannerConfig,
    jobs: Sequence[Job],
    incumbent: Mapping[int, Candidate],
    candidates: Mapping[int, list[Candidate]],
    n_points: int,
) -> list[tuple[list[int], range]]:
    """Overlapping windows of the incumbent plan, each small enough for one sub-MILP.

    A window is a run of jobs in the incumbent's start order and the stretch of grid
    points where they start (plus ``WINDOW_SLACK_POINTS`` later): the sub-MILP may
    reorder them within that stretch, so a window holds many jobs with a few starts
    each rather than a few jobs with all their starts. Unplanned jobs come last, with
    the stretch open to the end of the grid, so the final windows look for room for them.
    """
    order = sorted(range(len(jobs)), key=lambda j: (incumbent[j].point if j in incumbent else n_points, j))
    # Candidate grid points of each job, sorted, to count a job's starts inside a stretch.
    starts = {j: sorted(c.point for c in candidates[j]) for j in order}
    limit = cfg.window_vars

    def size(members: list[int], lo: int, hi: int) -> int:
        return sum(bisect_right(starts[j], hi) - bisect_left(starts[j], lo) for j in members)

    windows: list[tuple[list[int], range]] = []
    first = 0
    while first < len(order):
        lo = incumbent[order[first]].point if order[first] in incumbent else 0
        stop, hi = first, lo
        while stop < len(order):
            j = order[stop]
            new_hi = min(n_points - 1, (incumbent[j].point if j in incumbent else n_points) + WINDOW_SLACK_POINTS)
            new_hi = max(hi, new_hi)
            if stop > first and size(order[first : stop + 1], lo, new_hi) > limit:
                break
            hi, stop = new_hi, stop + 1
        windows.append((order[first:stop], range(lo, hi + 1)))
        if stop >= len(order):
            break
        first = max(first + 1, (first + stop) // 2)  # half-window overlap
    return windows


def gap(objective: float, bound: float | None) -> float | None:
    if bound is None:
        return None
    return max(0.0, (bound - objective) / max(abs(bound), 1e-9))
