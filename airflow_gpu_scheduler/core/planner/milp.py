"""One planning cycle of the MILP planner: greedy first (always feasible), then the MILP tries to beat it."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from airflow_gpu_scheduler.core.planner.candidates import Candidate, build_candidates
from airflow_gpu_scheduler.core.planner.greedy import greedy_plan
from airflow_gpu_scheduler.core.planner.grid import Capacity, room_for_gangs, start_grid
from airflow_gpu_scheduler.core.planner.lp_bound import lp_relaxation
from airflow_gpu_scheduler.core.planner.objective import TIME_DISCOUNT, job_value
from airflow_gpu_scheduler.core.planner.plan import Plan, PlannedStart, PlannerConfig, SolveReport
from airflow_gpu_scheduler.core.planner.windows import improve
from airflow_gpu_scheduler.core.workload import (
    Cluster,
    GpuType,
    Job,
    RunningJob,
    allowed_types,
    expected_end_s,
    runtime_s,
)

#: Seconds of the cycle's budget kept back for HiGHS returning after its time limit.
SOLVER_MARGIN_S = 0.1


@dataclass(frozen=True)
class Cycle:
    """One cycle's problem: queued jobs (priority order), their candidate starts, the capacity left."""

    jobs: list[Job]
    candidates: dict[int, list[Candidate]]
    capacity: Capacity


@dataclass(frozen=True)
class CyclePlans:
    """The MILP's plan and the greedy plan it started from (a candidate of the rollout too)."""

    milp: Plan
    greedy: Plan


class MilpPlanner:
    """Plans one cycle: greedy first (always feasible), then the MILP tries to beat it.

    Only estimates are used, never actual durations.
    """

    def __init__(self, config: PlannerConfig | None = None) -> None:
        self.config = config or PlannerConfig()

    def plan(
        self,
        cluster: Cluster,
        queued: Sequence[Job],
        running: Sequence[RunningJob],
        now_s: float,
        streaming_reserve: Mapping[str, int] | None = None,
        previous: Mapping[str, float] | None = None,
    ) -> Plan:
        """Plan the queued jobs around the running ones.

        ``previous``: planned start (seconds, same clock as ``now_s``) per job id of the last
        plan, so that its near-term promises are kept
        (:func:`~airflow_gpu_scheduler.core.planner.objective.commitment`).
        """
        return self.plans(cluster, queued, running, now_s, streaming_reserve, previous).milp

    def plans(
        self,
        cluster: Cluster,
        queued: Sequence[Job],
        running: Sequence[RunningJob],
        now_s: float,
        streaming_reserve: Mapping[str, int] | None = None,
        previous: Mapping[str, float] | None = None,
        deadline: float | None = None,
        streaming_value_rate: float = 0.0,
    ) -> CyclePlans:
        """The MILP's plan and the greedy plan of one cycle; ``deadline``: a ``perf_counter`` time
        the solve must end by (default: the config's ``time_limit_s`` from now);
        ``streaming_value_rate``: the value real-time endpoints brought per second recently, what a
        soft reservation (``reserve_penalty``) prices its GPUs by."""
        wall0 = time.perf_counter()
        cfg = self.config
        reserve = room_for_gangs(cluster, queued, streaming_reserve or {})
        if not queued:
            report = SolveReport("empty", "no queued jobs", 0.0, 0.0, 0.0, 0.0, 0.0)
            empty = Plan(now_s, (), (), report, reserve)
            return CyclePlans(empty, empty)

        cycle = self.prepare(cluster, queued, running, now_s, reserve, previous or {}, streaming_value_rate)
        jobs, candidates, capacity = cycle.jobs, cycle.candidates, cycle.capacity
        greedy = greedy_plan(jobs, candidates, capacity)
        greedy_obj = sum(c.coefficient for c in greedy.values())

        chosen, report = greedy, SolveReport("greedy", "solver disabled", greedy_obj, greedy_obj, None, None, 0.0)
        if cfg.use_solver:
            # HiGHS stops a little after its time limit (it still hands the solution back): leave it that margin.
            deadline = (wall0 + cfg.time_limit_s if deadline is None else deadline) - SOLVER_MARGIN_S
            chosen, report = improve(cfg, jobs, candidates, capacity, greedy, greedy_obj, deadline)
        report = replace(report, wall_s=time.perf_counter() - wall0)
        greedy_report = SolveReport("greedy", "greedy", greedy_obj, greedy_obj, None, None, report.wall_s)
        return CyclePlans(
            _to_plan(cfg, jobs, chosen, capacity, now_s, report, reserve),
            _to_plan(cfg, jobs, greedy, capacity, now_s, greedy_report, reserve),
        )

    def prepare(
        self,
        cluster: Cluster,
        queued: Sequence[Job],
        running: Sequence[RunningJob],
        now_s: float,
        reserve: Mapping[str, int],
        previous: Mapping[str, float],
        streaming_value_rate: float = 0.0,
    ) -> Cycle:
        """The grid, the capacity left by running jobs, and every candidate start of every queued job."""
        cfg = self.config
        running_spans = []
        for r in running:
            # A job past its estimate is assumed to end soon (half a step), not to run forever.
            remaining = expected_end_s(r, cluster.gpu_type(r.gpu_type), now_s, floor_s=cfg.step_s / 2) - now_s
            running_spans.append((r.gpu_type, r.job.gpus, remaining, r.job.is_streaming))

        longest = max(runtime_s(j, j.planning_estimate_s, t) for j in queued for t in allowed_types(j, cluster))
        latest_release = max(0.0, max(j.submit_s for j in queued) - now_s)
        horizon = max(cfg.horizon_s, 1.25 * longest + cfg.step_s * cfg.fine_points, latest_release + 1.25 * longest)
        points = start_grid(cfg, horizon, [end for *_, end, _ in running_spans])
        capacity = Capacity.build(cluster, points, running_spans, reserve)
        if cfg.reserve_penalty is not None:
            spare = sum(max(0, reserve.get(t.name, 0) - held) for t, held in _streaming_held(cluster, running))
            per_gpu_s = cfg.reserve_penalty * streaming_value_rate / max(1, spare)
            capacity.penalty = reserve_penalty(cfg, points, horizon, per_gpu_s, cluster.names)
        jobs = sorted(queued, key=lambda j: (-j.priority, j.submit_s, j.job_id))
        return Cycle(jobs, build_candidates(cfg, cluster, jobs, capacity, now_s, horizon, previous), capacity)

    def lp_bound(
        self,
        cluster: Cluster,
        queued: Sequence[Job],
        running: Sequence[RunningJob],
        now_s: float,
        streaming_reserve: Mapping[str, int] | None = None,
        time_limit_s: float = 600.0,
    ) -> tuple[float | None, int]:
        """The LP relaxation of this cycle's whole (undecomposed) model, and its number of variables."""
        if not queued:
            return 0.0, 0
        reserve = room_for_gangs(cluster, queued, streaming_reserve or {})
        cycle = self.prepare(cluster, queued, running, now_s, reserve, {})
        return lp_relaxation(cycle.jobs, cycle.candidates, cycle.capacity, time_limit_s)


def reserve_penalty(
    cfg: PlannerConfig, points: Sequence[float], horizon: float, per_gpu_s: float, names: Sequence[str]
) -> dict[str, list[float]]:
    """What one reserved GPU used by batch work costs at each grid point: the streaming value it is
    expected to turn away until the next point, discounted like the work it makes room for."""
    ends = [*points[1:], points[-1] + cfg.step_s]
    row = [
        per_gpu_s * (end - p) * (1.0 - TIME_DISCOUNT * (p + end) / (2 * horizon))
        for p, end in zip(points, ends, strict=True)
    ]
    return {name: row for name in names}


def _streaming_held(cluster: Cluster, running: Sequence[RunningJob]) -> list[tuple[GpuType, int]]:
    held = dict.fromkeys(cluster.names, 0)
    for r in running:
        if r.job.is_streaming:
            held[r.gpu_type] += r.job.gpus
    return [(t, held[t.name]) for t in cluster.gpu_types]


def _to_plan(
    cfg: PlannerConfig,
    jobs: Sequence[Job],
    chosen: Mapping[int, Candidate],
    capacity: Capacity,
    now_s: float,
    report: SolveReport,
    reserve: Mapping[str, int],
) -> Plan:
    points = capacity.points
    placed = sorted(
        chosen.items(),
        # Plan order: earlier start first; at the same start, streaming, then more valuable first.
        key=lambda item: (points[item[1].point], not jobs[item[0]].is_streaming, -job_value(jobs[item[0]])),
    )
    starts = tuple(
        PlannedStart(jobs[j].job_id, c.gpu_type, now_s + points[c.point], now_s + c.end, rank, jobs[j].is_streaming)
        for rank, (j, c) in enumerate(placed)
    )
    unplanned = tuple(job.job_id for j, job in enumerate(jobs) if j not in chosen)
    kept = dict(reserve)
    if capacity.penalty is not None:
        # Batch work the plan starts into a soft reservation before the next cycle shrinks it, so
        # the pools Airflow dispatches from let that work start (the next plan re-weighs it).
        near = [i for i, p in enumerate(points) if p <= cfg.step_s]
        for name, row in capacity.intrusion(jobs, chosen).items():
            kept[name] = max(0, kept.get(name, 0) - max(row[i] for i in near))
    return Plan(now_s, starts, unplanned, report, kept)
