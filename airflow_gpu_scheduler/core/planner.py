"""The constraint-aware planner: a time-indexed MILP in Pyomo, solved with HiGHS.

One planning cycle, in the order the problem is explained:

1. **Grid.** Start times are allowed at grid points: every ``step_s`` near now, with
   spacing that doubles further out, plus the expected end of every running job (that
   is when capacity frees). Capacity only rises at job ends and only falls at starts,
   and starts happen at grid points, so checking capacity at the grid points is exact.
2. **Variables.** ``start[j, k, p]`` = 1 if job *j* starts on GPU type *k* at point *p*,
   built only for allowed types and for starts whose expected end fits the horizon.
3. **Constraints.** ``one_start_per_job``; ``capacity[k, p]``: the gangs of every job
   running at point *p* fit the GPUs of type *k* left by already-running jobs;
   ``batch_capacity[k, p]``: batch work leaves the streaming reservation free.
4. **Objective.** Priority-weighted output first (a job is worth priority x GPUs x
   estimated duration at speed 1.0, and only if it meets its deadline or, when
   streaming, its wait budget); earlier completion second (which is utilization
   within any window); earlier starts break ties.
5. **Solve.** HiGHS through Pyomo's ``appsi_highs`` interface, warm-started from the
   greedy plan, under a time limit and a relative gap target. If the solver fails,
   times out without a solution, or returns something worse than greedy, the greedy
   plan is used, and the report says so.

Only estimates are used, never actual durations.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob, allowed_types, runtime_s

#: A batch job that misses its deadline still runs, but only for the utilization it
#: brings: worth this fraction of its on-time value.
LATE_VALUE_FRACTION = 0.02
#: HiGHS is only started if at least this much of the time limit is left after building the model.
MIN_SOLVE_S = 0.05
#: Completing at the end of the horizon is worth this much less than completing now.
COMPLETION_DISCOUNT = 0.5


@dataclass(frozen=True)
class PlannerConfig:
    """Knobs of one planning cycle.

    :param step_s: spacing of the start grid near now.
    :param fine_points: how many grid points use ``step_s`` before spacing doubles.
    :param horizon_s: how far ahead to plan (extended to fit the longest queued job).
    :param time_limit_s: HiGHS time limit per cycle; the best plan so far is used after it.
    :param mip_rel_gap: stop once the plan is proven this close to the bound.
    :param max_milp_jobs: jobs beyond this many (by value) are placed greedily around the
        MILP's plan, keeping every cycle within its budget on large queues.
    """

    step_s: float = 300.0
    fine_points: int = 12
    horizon_s: float = 24 * 3600.0
    time_limit_s: float = 2.0
    mip_rel_gap: float = 0.02
    max_milp_jobs: int = 80
    use_solver: bool = True


@dataclass(frozen=True)
class PlannedStart:
    """One job's place in the plan."""

    job_id: str
    gpu_type: str
    start_s: float
    end_s: float
    rank: int
    streaming: bool


@dataclass(frozen=True)
class SolveReport:
    """How one cycle was solved: enough to judge the plan's quality."""

    method: str  # "milp" | "greedy" | "empty"
    status: str
    objective: float
    greedy_objective: float
    bound: float | None
    gap: float | None
    wall_s: float
    build_s: float = 0.0
    solve_s: float = 0.0
    variables: int = 0
    constraints: int = 0
    nonzeros: int = 0
    message: str = ""


@dataclass(frozen=True)
class Plan:
    """A plan made at ``now_s``: when and where each queued job should start."""

    now_s: float
    starts: tuple[PlannedStart, ...]
    unplanned: tuple[str, ...]
    report: SolveReport
    streaming_reserve: Mapping[str, int] = field(default_factory=dict)

    def by_job(self) -> dict[str, PlannedStart]:
        return {s.job_id: s for s in self.starts}


# --------------------------------------------------------------------------- grid


def start_grid(cfg: PlannerConfig, horizon_s: float, extra_points: Sequence[float] = ()) -> list[float]:
    """Offsets from now where starts are allowed: fine near now, doubling spacing further out."""
    points = [0.0]
    t, step, run = 0.0, cfg.step_s, 0
    while t + step < horizon_s:
        t += step
        points.append(t)
        run += 1
        if run >= cfg.fine_points:
            step *= 2
            run = cfg.fine_points // 2
    for extra in extra_points:
        if 0 < extra < horizon_s:
            points.append(round(extra, 3))
    return sorted(set(points))


# --------------------------------------------------------------------------- values


def job_value(job: Job) -> float:
    """Priority-weighted output of a job done on time: priority x GPUs x duration at speed 1.0."""
    return job.priority * job.work


def start_coefficient(job: Job, start: float, end: float, now_s: float, horizon_s: float) -> float:
    """Objective coefficient of starting ``job`` at offset ``start`` and ending at ``end``."""
    value = job_value(job)
    if job.is_streaming:
        # An endpoint that missed its wait budget is still wanted as soon as possible:
        # value its start, not its completion, and never write it off.
        return value * (1.0 - start / horizon_s)
    if job.deadline_s is not None and now_s + end > job.deadline_s + 1e-6:
        value *= LATE_VALUE_FRACTION
    # Earlier completion first; a tiny term on the start breaks ties between equal ends.
    return value * (1.0 - COMPLETION_DISCOUNT * end / horizon_s - 1e-4 * start / horizon_s)


# --------------------------------------------------------------------------- capacity


@dataclass
class _Capacity:
    """GPUs free per type at each grid point, after running jobs (and reservation for batch)."""

    points: list[float]
    free: dict[str, list[int]]
    free_batch: dict[str, list[int]]

    @classmethod
    def build(
        cls,
        cluster: Cluster,
        points: list[float],
        running: Sequence[tuple[str, int, float, bool]],
        reserve: Mapping[str, int],
    ) -> _Capacity:
        free = {t.name: [t.count] * len(points) for t in cluster.gpu_types}
        streaming_running = {t.name: [0] * len(points) for t in cluster.gpu_types}
        for gpu_type, gpus, end, streaming in running:
            for i, p in enumerate(points):
                if p < end:
                    free[gpu_type][i] -= gpus
                    if streaming:
                        streaming_running[gpu_type][i] += gpus
        free_batch = {}
        for name, row in free.items():
            # Batch work must leave the reservation free, but running streaming jobs already
            # use part of it: reserve only what they do not cover.
            r = reserve.get(name, 0)
            # Never below zero: batch work already running beyond it just means no new batch starts.
            free_batch[name] = [max(0, f - max(0, r - s)) for f, s in zip(row, streaming_running[name])]
        return cls(points, free, free_batch)

    def span(self, start_index: int, duration: float) -> range:
        end = self.points[start_index] + duration
        stop = start_index
        while stop < len(self.points) and self.points[stop] < end - 1e-9:
            stop += 1
        return range(start_index, max(stop, start_index + 1))

    def fits(self, gpu_type: str, gpus: int, idx: range, streaming: bool) -> bool:
        row = self.free[gpu_type]
        batch = self.free_batch[gpu_type]
        return all(row[i] >= gpus and (streaming or batch[i] >= gpus) for i in idx)

    def take(self, gpu_type: str, gpus: int, idx: range) -> None:
        for i in idx:
            self.free[gpu_type][i] -= gpus
            self.free_batch[gpu_type][i] -= gpus


# --------------------------------------------------------------------------- the cycle


@dataclass(frozen=True)
class _Candidate:
    job_index: int
    gpu_type: str
    point: int
    end: float
    coefficient: float
    covers: range


class MilpPlanner:
    """Plans one cycle: greedy first (always feasible), then the MILP tries to beat it."""

    def __init__(self, config: PlannerConfig | None = None) -> None:
        self.config = config or PlannerConfig()

    def plan(
        self,
        cluster: Cluster,
        queued: Sequence[Job],
        running: Sequence[RunningJob],
        now_s: float,
        streaming_reserve: Mapping[str, int] | None = None,
    ) -> Plan:
        wall0 = time.perf_counter()
        cfg = self.config
        reserve = dict(streaming_reserve or {})
        if not queued:
            report = SolveReport("empty", "no queued jobs", 0.0, 0.0, 0.0, 0.0, 0.0)
            return Plan(now_s, (), (), report, reserve)

        running_spans = []
        for r in running:
            gpu_type = cluster.gpu_type(r.gpu_type)
            expected_end = r.start_s + runtime_s(r.job, r.job.planning_estimate_s, gpu_type)
            # A job past its estimate is assumed to end soon, not to run forever.
            remaining = max(expected_end - now_s, cfg.step_s / 2)
            running_spans.append((r.gpu_type, r.job.gpus, remaining, r.job.is_streaming))

        longest = max(runtime_s(j, j.planning_estimate_s, t) for j in queued for t in allowed_types(j, cluster))
        horizon = max(cfg.horizon_s, 1.25 * longest + cfg.step_s * cfg.fine_points)
        points = start_grid(cfg, horizon, [end for *_, end, _ in running_spans])
        capacity = _Capacity.build(cluster, points, running_spans, reserve)

        jobs = sorted(queued, key=lambda j: (-j.priority, j.submit_s, j.job_id))
        candidates = self._candidates(cluster, jobs, capacity, now_s, horizon)
        greedy = self._greedy(jobs, candidates, capacity)
        greedy_obj = sum(c.coefficient for c in greedy.values())

        chosen, report = greedy, SolveReport(
            "greedy", "solver disabled", greedy_obj, greedy_obj, None, None, 0.0
        )
        if cfg.use_solver:
            chosen, report = self._solve(jobs, candidates, capacity, greedy, greedy_obj)
        report = _with_wall(report, time.perf_counter() - wall0)
        return self._to_plan(cluster, jobs, chosen, points, now_s, report, reserve)

    # -- candidates ---------------------------------------------------------------

    def _candidates(
        self, cluster: Cluster, jobs: Sequence[Job], capacity: _Capacity, now_s: float, horizon: float
    ) -> dict[int, list[_Candidate]]:
        points = capacity.points
        out: dict[int, list[_Candidate]] = {}
        for j, job in enumerate(jobs):
            cands: list[_Candidate] = []
            for gpu_type in allowed_types(job, cluster):
                runtime = runtime_s(job, job.planning_estimate_s, gpu_type)
                for p, start in enumerate(points):
                    end = start + runtime
                    if end > horizon + 1e-6:
                        break
                    covers = capacity.span(p, runtime)
                    # A start that can never fit, even on an otherwise idle grid, is no candidate.
                    if min(capacity.free[gpu_type.name][i] for i in covers) < job.gpus:
                        continue
                    coef = start_coefficient(job, start, end, now_s, horizon)
                    cands.append(_Candidate(j, gpu_type.name, p, end, coef, covers))
            out[j] = cands
        return out

    # -- greedy -------------------------------------------------------------------

    def _greedy(
        self, jobs: Sequence[Job], candidates: Mapping[int, list[_Candidate]], capacity: _Capacity
    ) -> dict[int, _Candidate]:
        """List scheduling in priority order: each job takes its best still-feasible start."""
        free = _Capacity(capacity.points, {k: list(v) for k, v in capacity.free.items()},
                         {k: list(v) for k, v in capacity.free_batch.items()})
        chosen: dict[int, _Candidate] = {}
        for j, job in enumerate(jobs):
            best = _best_fitting(candidates[j], job, free)
            if best is not None:
                free.take(best.gpu_type, job.gpus, best.covers)
                chosen[j] = best
        return chosen

    # -- MILP ---------------------------------------------------------------------

    def _solve(
        self,
        jobs: Sequence[Job],
        candidates: Mapping[int, list[_Candidate]],
        capacity: _Capacity,
        greedy: dict[int, _Candidate],
        greedy_obj: float,
    ) -> tuple[dict[int, _Candidate], SolveReport]:
        import pyomo.environ as pyo
        from pyomo.contrib.appsi.solvers import Highs

        cfg = self.config
        t0 = time.perf_counter()
        # Large queues: the most valuable jobs go to the MILP, the tail is placed greedily
        # after it (see _complete_with_tail), so a cycle stays within its budget.
        order = sorted(range(len(jobs)), key=lambda j: (not jobs[j].is_streaming, -job_value(jobs[j])))
        in_milp = set(order[: cfg.max_milp_jobs])
        index = [(j, n) for j in sorted(in_milp) for n in range(len(candidates[j]))]
        if not index:
            return greedy, SolveReport("greedy", "nothing to optimize", greedy_obj, greedy_obj, greedy_obj, 0.0, 0.0)

        covering: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        nnz = 0
        for j, n in index:
            c = candidates[j][n]
            for i in c.covers:
                covering[c.gpu_type, i].append((j, n))
            nnz += len(c.covers) + 1

        m = pyo.ConcreteModel(name="gpu_plan")
        m.CANDIDATES = pyo.Set(initialize=index, dimen=2, ordered=True)
        m.start = pyo.Var(m.CANDIDATES, domain=pyo.Binary)
        by_job: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for key in index:
            by_job[key[0]].append(key)
        m.JOBS = pyo.Set(initialize=sorted(by_job))
        m.one_start_per_job = pyo.Constraint(m.JOBS, rule=lambda m, j: sum(m.start[k] for k in by_job[j]) <= 1)
        cap_keys = sorted(covering)
        m.CAPACITY_POINTS = pyo.Set(initialize=cap_keys, dimen=2, ordered=True)

        def capacity_rule(m, gpu_type, i):
            terms = covering[gpu_type, i]
            return sum(jobs[j].gpus * m.start[j, n] for j, n in terms) <= capacity.free[gpu_type][i]

        def batch_capacity_rule(m, gpu_type, i):
            terms = [(j, n) for j, n in covering[gpu_type, i] if not jobs[j].is_streaming]
            limit = capacity.free_batch[gpu_type][i]
            if not terms or limit >= capacity.free[gpu_type][i]:
                return pyo.Constraint.Skip
            return sum(jobs[j].gpus * m.start[j, n] for j, n in terms) <= limit

        m.capacity = pyo.Constraint(m.CAPACITY_POINTS, rule=capacity_rule)
        m.batch_capacity = pyo.Constraint(m.CAPACITY_POINTS, rule=batch_capacity_rule)
        m.value = pyo.Objective(
            expr=sum(candidates[j][n].coefficient * m.start[j, n] for j, n in index), sense=pyo.maximize
        )
        # Warm start: the greedy plan restricted to the MILP's jobs (feasible by construction).
        for j, n in index:
            m.start[j, n].value = 0
        for j, c in greedy.items():
            if j in in_milp:
                m.start[j, candidates[j].index(c)].value = 1
        build_s = time.perf_counter() - t0

        size = dict(variables=len(index), constraints=len(m.JOBS) + len(cap_keys), nonzeros=nnz)
        remaining_s = cfg.time_limit_s - build_s
        if remaining_s < MIN_SOLVE_S:
            # Building the model used the cycle's budget: HiGHS is not started at all, so a
            # cycle never runs past its limit by more than the build itself.
            return greedy, SolveReport("greedy", "time_limit", greedy_obj, greedy_obj, None, None, 0.0, build_s, 0.0,
                                       message=f"time limit {cfg.time_limit_s:g} s used up building the model "
                                               f"({build_s:.2f} s); greedy plan used", **size)
        opt = Highs()
        opt.config.time_limit = remaining_s
        opt.config.mip_gap = cfg.mip_rel_gap
        opt.config.warmstart = True
        opt.config.load_solution = False
        opt.config.stream_solver = False
        t1 = time.perf_counter()
        try:
            result = opt.solve(m)
        except Exception as error:  # noqa: BLE001 - any solver failure falls back to greedy
            msg = f"HiGHS failed: {type(error).__name__}: {error}"
            return greedy, SolveReport("greedy", "error", greedy_obj, greedy_obj, None, None, 0.0,
                                       build_s, time.perf_counter() - t1, message=msg, **size)
        solve_s = time.perf_counter() - t1
        status = str(result.termination_condition).rsplit(".", 1)[-1]
        bound = result.best_objective_bound
        bound = float(bound) if bound is not None and math.isfinite(bound) else None
        if result.best_feasible_objective is None:
            return greedy, SolveReport("greedy", status, greedy_obj, greedy_obj, bound, _gap(greedy_obj, bound),
                                       0.0, build_s, solve_s, message="no MILP solution; greedy plan used", **size)
        result.solution_loader.load_vars()
        chosen: dict[int, _Candidate] = {}
        for j, n in index:
            if (m.start[j, n].value or 0) > 0.5:
                chosen[j] = candidates[j][n]
        chosen = self._complete_with_tail(jobs, candidates, capacity, chosen, in_milp)
        objective = sum(c.coefficient for c in chosen.values())
        if bound is not None:
            # The tail (outside the MILP) adds to both sides of the gap.
            bound += objective - sum(c.coefficient for j, c in chosen.items() if j in in_milp)
        if objective < greedy_obj - 1e-6:
            return greedy, SolveReport("greedy", status, greedy_obj, greedy_obj, bound, _gap(greedy_obj, bound),
                                       0.0, build_s, solve_s, message="MILP plan worse than greedy; greedy kept", **size)
        return chosen, SolveReport("milp", status, objective, greedy_obj, bound, _gap(objective, bound), 0.0,
                                   build_s, solve_s, **size)

    def _complete_with_tail(
        self,
        jobs: Sequence[Job],
        candidates: Mapping[int, list[_Candidate]],
        capacity: _Capacity,
        chosen: dict[int, _Candidate],
        in_milp: set[int],
    ) -> dict[int, _Candidate]:
        if len(in_milp) == len(jobs):
            return chosen
        free = _Capacity(capacity.points, {k: list(v) for k, v in capacity.free.items()},
                         {k: list(v) for k, v in capacity.free_batch.items()})
        for j, c in chosen.items():
            free.take(c.gpu_type, jobs[j].gpus, c.covers)
        out = dict(chosen)
        for j, job in enumerate(jobs):
            if j in in_milp:
                continue
            best = _best_fitting(candidates[j], job, free)
            if best is not None:
                free.take(best.gpu_type, job.gpus, best.covers)
                out[j] = best
        return out

    # -- output -------------------------------------------------------------------

    def _to_plan(self, cluster: Cluster, jobs: Sequence[Job], chosen: Mapping[int, _Candidate],
                 points: list[float], now_s: float, report: SolveReport, reserve: Mapping[str, int]) -> Plan:
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
        return Plan(now_s, starts, unplanned, report, dict(reserve))


def _best_fitting(candidates: list[_Candidate], job: Job, free: _Capacity) -> _Candidate | None:
    """The most valuable start of ``job`` that still fits (first on ties); fit is checked only when it would win."""
    best = None
    for c in candidates:
        if (best is None or c.coefficient > best.coefficient) and free.fits(c.gpu_type, job.gpus, c.covers,
                                                                             job.is_streaming):
            best = c
    return best


def _gap(objective: float, bound: float | None) -> float | None:
    if bound is None:
        return None
    return max(0.0, (bound - objective) / max(abs(bound), 1e-9))


def _with_wall(report: SolveReport, wall_s: float) -> SolveReport:
    from dataclasses import replace

    return replace(report, wall_s=wall_s)
