"""The constraint-aware planner: a time-indexed MILP in Pyomo, solved with HiGHS.

One planning cycle, in the order the problem is explained:

1. **Grid.** Start times are allowed at grid points: every ``step_s`` near now, with
   spacing that doubles further out, plus the expected end of a running job (that is
   when capacity frees; at most one such point per grid interval). Capacity only rises
   at job ends and only falls at starts, and starts happen at grid points, so checking
   capacity at the grid points is exact.
2. **Variables.** ``start[j, k, p]`` = 1 if job *j* starts on GPU type *k* at point *p*,
   built only for allowed types and for starts whose expected end fits the horizon.
3. **Constraints.** ``one_start_per_job``; ``capacity[k, p]``: the gangs of every job
   running at point *p* fit the GPUs of type *k* left by already-running jobs;
   ``batch_capacity[k, p]``: batch work leaves the streaming reservation free.
4. **Objective.** Priority-weighted output first (a job is worth priority x GPUs x
   estimated duration at speed 1.0, and only if it meets its deadline or, when
   streaming, its wait budget); earlier completion second (which is utilization
   within any window); earlier starts break ties. Two promises are priced in: an
   endpoint started within its wait budget, and a batch job kept at the start the
   previous plan gave it when that start is near (so replanning does not waste a drain).
5. **Solve.** HiGHS through Pyomo's ``appsi_highs`` interface, warm-started from the
   greedy plan, under the cycle's time budget, a node limit and a relative gap target.
   A queue too large for one MILP is improved window by window (fix-and-optimize), so
   the cost of a cycle grows gently with the queue. If the solver fails or finds
   nothing better in time, the greedy plan is used, and the report says so: a plan is
   never worse than greedy.

Only estimates are used, never actual durations.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob, allowed_types, expected_end_s, runtime_s

#: A batch job that misses its deadline still runs, but only for the utilization it
#: brings: worth this fraction of its on-time value.
LATE_VALUE_FRACTION = 0.02
#: HiGHS is only started if at least this much of the cycle's budget is left after building the model.
MIN_SOLVE_S = 0.05
#: Seconds of the cycle's budget kept back for HiGHS returning after its time limit.
SOLVER_MARGIN_S = 0.1
#: A window of the windowed search lets its jobs start this many grid points after the
#: latest incumbent start in it (so work can also move later to make room).
WINDOW_SLACK_POINTS = 2
#: Completing at the end of the horizon is worth this much less than completing now.
COMPLETION_DISCOUNT = 0.5
#: A streaming job started within its wait budget is worth this many times its value more
#: than one started late: real-time work that waits past its budget has lost its users,
#: while a batch job delayed by it usually still completes (the completion discount is
#: only a proxy for utilization and must not outweigh an endpoint served in time).
STREAMING_ON_TIME_BONUS = 2.0


@dataclass(frozen=True)
class PlannerConfig:
    """Knobs of one planning cycle.

    :param step_s: spacing of the start grid near now.
    :param fine_points: how many grid points use ``step_s`` before spacing doubles.
    :param horizon_s: how far ahead to plan (extended to fit the longest queued job).
    :param time_limit_s: wall-clock budget of one cycle, model building included; the
        best plan found by then is used (at worst the greedy plan).
    :param mip_rel_gap: stop once the plan is proven this close to the bound.
    :param max_milp_vars: the largest MILP solved at once; a bigger cycle is improved
        window by window (see :meth:`MilpPlanner._solve`), so its cost grows gently.
    :param window_vars: the size of one window's sub-MILP: small enough that HiGHS proves
        it in a fraction of a second, so many windows fit in one budget.
    :param window_time_limit_s: solver time per window, so one hard window cannot eat
        the whole budget.
    :param window_mip_rel_gap: gap target of a window. Tighter than ``mip_rel_gap``: a
        window's bound includes work it cannot improve, so a loose target stops at once.
    :param max_nodes: branch-and-bound nodes per MILP. Work limits, unlike time limits,
        give the same plan on a busy and an idle machine (the time limits stay as a guard).
    :param max_window_passes: sweeps of the windowed search over the queue.
    :param commit_horizon_s: a batch job the previous plan started within this much of now,
        and for which GPUs already sit idle, keeps that start unless the new plan gains more
        than ``commit_bonus`` of its value by moving it (see :func:`commitment`).
    :param commit_bonus: what breaking such a commitment costs, as a fraction of the job's value.
    """

    step_s: float = 300.0
    fine_points: int = 12
    horizon_s: float = 24 * 3600.0
    time_limit_s: float = 2.0
    mip_rel_gap: float = 0.02
    max_milp_vars: int = 3000
    window_vars: int = 1000
    window_time_limit_s: float = 1.0
    window_mip_rel_gap: float = 0.002
    max_nodes: int = 1000
    max_window_passes: int = 3
    commit_horizon_s: float = 3600.0
    commit_bonus: float = 0.5
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
    handoff_s: float = 0.0
    subproblems: int = 0
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
    # Capacity frees when a running job ends: let a start happen right then, but add at
    # most one such point (the earliest) per grid interval, so a cluster with hundreds of
    # running jobs does not multiply the grid. Later ends in the interval wait for the
    # next grid point, as they would with one planning cycle per interval.
    grid = points
    earliest: dict[int, float] = {}
    for extra in extra_points:
        if 0 < extra < horizon_s:
            i = bisect_right(grid, extra) - 1
            if grid[i] != extra:
                earliest[i] = min(earliest.get(i, math.inf), round(extra, 3))
    return sorted(set(grid) | set(earliest.values()))


# --------------------------------------------------------------------------- values


def job_value(job: Job) -> float:
    """Priority-weighted output of a job done on time: priority x GPUs x duration at speed 1.0."""
    return job.priority * job.work


def commitment(cfg: PlannerConfig, job: Job, previous: Mapping[str, float], now_s: float) -> float:
    """Offset from now up to which a start keeps the previous plan's promise to ``job`` (-inf: none).

    Replanning on every arrival would otherwise let a newcomer take the GPUs a gang has
    been draining towards: the drain is wasted and the gang slips again at the next
    arrival, until it misses the day (Slurm keeps its top job's reservation for the same
    reason). A start no later than the promised one (give or take half a step) is worth
    ``commit_bonus`` more, on a GPU type where the drain has begun (see ``_candidates``):
    some of its GPUs already sit idle for the job. Elsewhere nothing has been spent on the
    promise and the plan stays free (a fixed bonus would otherwise freeze the order of
    short jobs, whose reordering gains are tiny next to it). A promise already past (the
    job is due, but what it waits for overran its estimate) binds nothing: pricing it in
    at "now" was measured to cost 7 % of deadline_crunch's output, by favouring due small
    jobs over the drain the plan is running.
    """
    promised = previous.get(job.job_id)
    if (promised is None or job.is_streaming or cfg.commit_bonus <= 0 or promised < now_s
            or promised - now_s > cfg.commit_horizon_s):
        return -math.inf
    # Half a step of slack: a running job due within half a step is assumed to end half a
    # step from now, so the start a promise named can move that much later.
    return promised - now_s + cfg.step_s / 2 + 1e-6


def streaming_budget_left(job: Job, now_s: float) -> float:
    """Seconds from now within which a streaming job still starts within its wait budget."""
    return job.submit_s + (job.max_wait_s or 0.0) - now_s + 1e-6


# --------------------------------------------------------------------------- reservation


def room_for_gangs(cluster: Cluster, queued: Sequence[Job], reserve: Mapping[str, int]) -> dict[str, int]:
    """The streaming reservation, shrunk so that every queued batch job fits beside it somewhere.

    Batch work must leave the reservation free, so a gang larger than a type's GPUs minus
    its reservation could never be planned there: on a cluster that always has some
    streaming work, a whole-cluster gang would wait forever. While such a gang waits, the
    reservation of the type it fits best (fastest, then largest) shrinks just enough to let
    it start; the MILP then weighs it against the streaming work it delays, as for any job.
    """
    out = {t.name: int(reserve.get(t.name, 0)) for t in cluster.gpu_types}
    for job in queued:
        if job.is_streaming:
            continue
        types = [t for t in allowed_types(job, cluster) if t.count >= job.gpus]
        if not types or any(job.gpus <= t.count - out[t.name] for t in types):
            continue
        best = max(types, key=lambda t: (t.speed, t.count))
        out[best.name] = best.count - job.gpus
    return out


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

    def copy(self) -> _Capacity:
        return _Capacity(self.points, {k: list(v) for k, v in self.free.items()},
                         {k: list(v) for k, v in self.free_batch.items()})

    def span(self, start_index: int, duration: float) -> range:
        """Grid points a job started at ``start_index`` occupies: those before its end."""
        stop = bisect_left(self.points, self.points[start_index] + duration - 1e-9, lo=start_index)
        return range(start_index, max(stop, start_index + 1))

    def fits(self, gpu_type: str, gpus: int, idx: range, streaming: bool) -> bool:
        if min(self.free[gpu_type][idx.start:idx.stop]) < gpus:
            return False
        return streaming or min(self.free_batch[gpu_type][idx.start:idx.stop]) >= gpus

    def take(self, gpu_type: str, gpus: int, idx: range, streaming: bool) -> None:
        """Occupy GPUs. Streaming work may use the reservation, so it does not count against
        what batch work may use (as in the MILP's ``batch_capacity`` rows)."""
        for i in idx:
            self.free[gpu_type][i] -= gpus
            if not streaming:
                self.free_batch[gpu_type][i] -= gpus


# --------------------------------------------------------------------------- the cycle


class _Candidate(NamedTuple):
    """One possible start: job, GPU type, grid point (a tuple: hundreds of thousands are made per cycle)."""

    job_index: int
    gpu_type: str
    point: int
    end: float
    coefficient: float
    covers: range


@dataclass(frozen=True)
class _Cycle:
    jobs: list[Job]
    candidates: dict[int, list[_Candidate]]
    capacity: _Capacity


@dataclass
class _SolveStats:
    """What the MILP part of a cycle cost, summed over its sub-problems (sizes: the largest one)."""

    build_s: float = 0.0
    handoff_s: float = 0.0
    solve_s: float = 0.0
    subproblems: int = 0
    variables: int = 0
    constraints: int = 0
    nonzeros: int = 0
    last_status: str = ""
    message: str = ""

    def size(self) -> dict[str, int]:
        return {"variables": self.variables, "constraints": self.constraints, "nonzeros": self.nonzeros}


def _build_model(jobs: Sequence[Job], candidates: Mapping[int, list[_Candidate]], room: _Capacity,
                 index: list[tuple[int, int]]):
    """The Pyomo model of one (sub-)problem: a binary start per candidate, capacity per type and point.

    Rows are built as Pyomo ``LinearExpression`` objects from coefficient and variable lists:
    the same model as ``sum(g * start[j, n] ...)``, without Pyomo building and then walking
    an expression tree per row (that walk was most of the build time on large queues).
    """
    import pyomo.environ as pyo
    from pyomo.core.expr.numeric_expr import LinearExpression

    covering: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    nnz = 0
    for j, n in index:
        c = candidates[j][n]
        for i in c.covers:
            covering[c.gpu_type, i].append((j, n))
        nnz += len(c.covers) + 1
    by_job: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for key in index:
        by_job[key[0]].append(key)
    gpus = {j: jobs[j].gpus for j in by_job}
    streaming = {j: jobs[j].is_streaming for j in by_job}

    m = pyo.ConcreteModel(name="gpu_plan")
    m.CANDIDATES = pyo.Set(initialize=index, dimen=2, ordered=True)
    m.start = pyo.Var(m.CANDIDATES, domain=pyo.Binary)
    start = m.start

    def linear(terms: list[tuple[int, int]], coefs: list[float]) -> LinearExpression:
        return LinearExpression(constant=0, linear_coefs=coefs, linear_vars=[start[k] for k in terms])

    m.JOBS = pyo.Set(initialize=sorted(by_job))
    m.one_start_per_job = pyo.Constraint(m.JOBS, rule=lambda m, j: linear(by_job[j], [1] * len(by_job[j])) <= 1)
    # Only points where the candidates could exceed what is free need a row.
    cap_keys = [key for key in sorted(covering)
                if sum(gpus[j] for j, _ in covering[key]) > room.free[key[0]][key[1]]]
    m.CAPACITY_POINTS = pyo.Set(initialize=cap_keys, dimen=2, ordered=True)

    def capacity_rule(m, gpu_type, i):
        terms = covering[gpu_type, i]
        return linear(terms, [gpus[j] for j, _ in terms]) <= room.free[gpu_type][i]

    def batch_capacity_rule(m, gpu_type, i):
        terms = [(j, n) for j, n in covering[gpu_type, i] if not streaming[j]]
        limit = room.free_batch[gpu_type][i]
        if not terms or limit >= room.free[gpu_type][i] or sum(gpus[j] for j, _ in terms) <= limit:
            return pyo.Constraint.Skip
        return linear(terms, [gpus[j] for j, _ in terms]) <= limit

    m.capacity = pyo.Constraint(m.CAPACITY_POINTS, rule=capacity_rule)
    m.BATCH_POINTS = pyo.Set(initialize=sorted(covering), dimen=2, ordered=True)
    m.batch_capacity = pyo.Constraint(m.BATCH_POINTS, rule=batch_capacity_rule)
    m.value = pyo.Objective(expr=linear(index, [candidates[j][n].coefficient for j, n in index]),
                            sense=pyo.maximize)
    return m, nnz, len(m.JOBS) + len(m.capacity) + len(m.batch_capacity)


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
        previous: Mapping[str, float] | None = None,
    ) -> Plan:
        """Plan the queued jobs around the running ones.

        ``previous``: planned start (seconds, same clock as ``now_s``) per job id of the last
        plan, so that its near-term promises are kept (:func:`commitment`).
        """
        wall0 = time.perf_counter()
        cfg = self.config
        reserve = room_for_gangs(cluster, queued, streaming_reserve or {})
        if not queued:
            report = SolveReport("empty", "no queued jobs", 0.0, 0.0, 0.0, 0.0, 0.0)
            return Plan(now_s, (), (), report, reserve)

        cycle = self._prepare(cluster, queued, running, now_s, reserve, previous or {})
        jobs, candidates, capacity = cycle.jobs, cycle.candidates, cycle.capacity
        greedy = self._greedy(jobs, candidates, capacity)
        greedy_obj = sum(c.coefficient for c in greedy.values())

        chosen, report = greedy, SolveReport(
            "greedy", "solver disabled", greedy_obj, greedy_obj, None, None, 0.0
        )
        if cfg.use_solver:
            # HiGHS stops a little after its time limit (it still hands the solution back): leave it that margin.
            deadline = wall0 + cfg.time_limit_s - SOLVER_MARGIN_S
            chosen, report = self._solve(jobs, candidates, capacity, greedy, greedy_obj, deadline)
        report = _with_wall(report, time.perf_counter() - wall0)
        return self._to_plan(cluster, jobs, chosen, cycle.capacity.points, now_s, report, reserve)

    def _prepare(self, cluster: Cluster, queued: Sequence[Job], running: Sequence[RunningJob], now_s: float,
                 reserve: Mapping[str, int], previous: Mapping[str, float]) -> _Cycle:
        """The grid, the capacity left by running jobs, and every candidate start of every queued job."""
        cfg = self.config
        running_spans = []
        for r in running:
            gpu_type = cluster.gpu_type(r.gpu_type)
            remaining = expected_end_s(r, gpu_type, now_s, floor_s=cfg.step_s / 2) - now_s
            running_spans.append((r.gpu_type, r.job.gpus, remaining, r.job.is_streaming))

        longest = max(runtime_s(j, j.planning_estimate_s, t) for j in queued for t in allowed_types(j, cluster))
        horizon = max(cfg.horizon_s, 1.25 * longest + cfg.step_s * cfg.fine_points)
        points = start_grid(cfg, horizon, [end for *_, end, _ in running_spans])
        capacity = _Capacity.build(cluster, points, running_spans, reserve)
        jobs = sorted(queued, key=lambda j: (-j.priority, j.submit_s, j.job_id))
        return _Cycle(jobs, self._candidates(cluster, jobs, capacity, now_s, horizon, previous), capacity)

    # -- candidates ---------------------------------------------------------------

    def _candidates(
        self, cluster: Cluster, jobs: Sequence[Job], capacity: _Capacity, now_s: float, horizon: float,
        previous: Mapping[str, float],
    ) -> dict[int, list[_Candidate]]:
        """Every start of every job that could fit and end within the horizon, with its objective coefficient.

        A batch job is worth its value (a small fraction of it when it would miss its deadline),
        less a discount growing with its completion time (earlier completion first; a tiny term
        on the start breaks ties), plus ``commit_bonus`` of its value at a start that keeps the
        previous plan's promise where GPUs are being drained for it. An endpoint that missed its wait budget is still wanted as
        soon as possible: its start is valued, not its completion, and it is never written
        off; within its budget it earns ``STREAMING_ON_TIME_BONUS`` more. This loop runs
        hundreds of thousands of times per cycle on a large queue, so it stays flat.
        """
        points = capacity.points
        out: dict[int, list[_Candidate]] = {}
        for j, job in enumerate(jobs):
            cands: list[_Candidate] = []
            value = job_value(job)
            streaming = job.kind.is_streaming
            late_after = math.inf if job.deadline_s is None or streaming else job.deadline_s - now_s + 1e-6
            on_time_until = streaming_budget_left(job, now_s) if streaming else -math.inf
            promised_until = commitment(self.config, job, previous, now_s)
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
                    if free[p] < job.gpus:
                        continue
                    if streaming:
                        coef = value * (1.0 - start / horizon)
                        if start <= on_time_until:
                            coef += STREAMING_ON_TIME_BONUS * value
                    else:
                        v = value * LATE_VALUE_FRACTION if end > late_after else value
                        coef = v * (1.0 - COMPLETION_DISCOUNT * end / horizon - 1e-4 * start / horizon)
                        if start <= promised_here:
                            coef += self.config.commit_bonus * v
                    stop = bisect_left(points, end - 1e-9, p)  # = capacity.span(p, runtime)
                    cands.append(_Candidate(j, name, p, end, coef, range(p, stop if stop > p else p + 1)))
            out[j] = cands
        return out

    @staticmethod
    def _ranked(candidates: Mapping[int, list[_Candidate]]) -> dict[int, list[_Candidate]]:
        """Each job's candidates, most valuable first (stable: the earlier start wins a tie)."""
        return {j: sorted(cands, key=lambda c: -c.coefficient) for j, cands in candidates.items()}

    # -- greedy -------------------------------------------------------------------

    def _greedy(
        self, jobs: Sequence[Job], candidates: Mapping[int, list[_Candidate]], capacity: _Capacity
    ) -> dict[int, _Candidate]:
        """List scheduling in priority order: each job takes its best still-feasible start."""
        free = capacity.copy()
        ranked = self._ranked(candidates)
        chosen: dict[int, _Candidate] = {}
        for j, job in enumerate(jobs):
            best = _best_fitting(ranked[j], job, free)
            if best is not None:
                free.take(best.gpu_type, job.gpus, best.covers, job.is_streaming)
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
        deadline: float,
    ) -> tuple[dict[int, _Candidate], SolveReport]:
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
        cfg = self.config
        sizes = {j: len(candidates[j]) for j in range(len(jobs))}
        total_vars = sum(sizes.values())
        incumbent = dict(greedy)
        stats = _SolveStats()
        if total_vars == 0:
            return greedy, SolveReport("greedy", "nothing to optimize", greedy_obj, greedy_obj, greedy_obj, 0.0, 0.0)
        if total_vars <= cfg.max_milp_vars:
            windows = [(list(range(len(jobs))), range(len(capacity.points)))]
        else:
            windows = None
        status, bound = "not solved", None
        passes = 0
        while True:
            todo = windows if windows is not None else self._windows(jobs, incumbent, candidates,
                                                                     len(capacity.points))
            improved = False
            for free_jobs, stretch in todo:
                remaining = deadline - time.perf_counter()
                if remaining < MIN_SOLVE_S:
                    stats.last_status = stats.last_status or "time_limit"
                    break
                if windows is None:
                    remaining = min(remaining, cfg.window_time_limit_s)
                result = self._solve_window(jobs, candidates, capacity, incumbent, free_jobs, stretch, remaining,
                                            stats)
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
            if (windows is not None or not improved or passes >= cfg.max_window_passes
                    or deadline - time.perf_counter() < MIN_SOLVE_S):
                break
        objective = sum(c.coefficient for c in incumbent.values())
        if stats.subproblems == 0:
            msg = stats.message or f"time limit {cfg.time_limit_s:g} s used up before the MILP; greedy plan used"
            return greedy, SolveReport("greedy", stats.last_status or "time_limit", greedy_obj, greedy_obj, None,
                                       None, 0.0, stats.build_s, stats.solve_s, handoff_s=stats.handoff_s,
                                       message=msg, **stats.size())
        if objective < greedy_obj - 1e-6:  # cannot happen (every step is accepted only if better); kept as a guard
            incumbent, objective = greedy, greedy_obj
        if status == "not solved":
            # HiGHS ran but no (sub-)MILP came back with a plan at least as good as its warm start.
            return greedy, SolveReport("greedy", stats.last_status or status, greedy_obj, greedy_obj, bound,
                                       _gap(greedy_obj, bound), 0.0, stats.build_s, stats.solve_s,
                                       handoff_s=stats.handoff_s, subproblems=stats.subproblems,
                                       message=stats.message or "MILP found nothing better; greedy plan kept",
                                       **stats.size())
        method = "milp" if windows is not None else "milp-windows"
        message = stats.message if windows is not None else f"{stats.subproblems} windows in {passes} pass(es)"
        return incumbent, SolveReport(method, status, objective, greedy_obj, bound, _gap(objective, bound), 0.0,
                                      stats.build_s, stats.solve_s, handoff_s=stats.handoff_s,
                                      subproblems=stats.subproblems, message=message, **stats.size())

    def _windows(self, jobs: Sequence[Job], incumbent: Mapping[int, _Candidate],
                 candidates: Mapping[int, list[_Candidate]], n_points: int) -> list[tuple[list[int], range]]:
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
        limit = self.config.window_vars

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
                if stop > first and size(order[first:stop + 1], lo, new_hi) > limit:
                    break
                hi, stop = new_hi, stop + 1
            windows.append((order[first:stop], range(lo, hi + 1)))
            if stop >= len(order):
                break
            first = max(first + 1, (first + stop) // 2)  # half-window overlap
        return windows

    def _solve_window(
        self,
        jobs: Sequence[Job],
        candidates: Mapping[int, list[_Candidate]],
        capacity: _Capacity,
        incumbent: Mapping[int, _Candidate],
        free_jobs: Sequence[int],
        stretch: range,
        time_left_s: float,
        stats: _SolveStats,
    ) -> tuple[dict[int, _Candidate], str, float | None, float] | None:
        """Re-plan ``free_jobs`` (starts within ``stretch``) with every other job fixed; None if nothing better."""
        from pyomo.contrib.appsi.solvers import Highs

        cfg = self.config
        t0 = time.perf_counter()
        free_set = set(free_jobs)
        room = capacity.copy()
        for j, c in incumbent.items():
            if j not in free_set:
                room.take(c.gpu_type, jobs[j].gpus, c.covers, jobs[j].is_streaming)
        # Only starts that fit around the fixed jobs, and the incumbent's own (it always fits).
        index = [(j, n) for j in free_jobs for n, c in enumerate(candidates[j])
                 if c is incumbent.get(j) or (c.point in stretch
                                              and room.fits(c.gpu_type, jobs[j].gpus, c.covers, jobs[j].is_streaming))]
        if not index:
            return None
        m, nnz, n_cons = _build_model(jobs, candidates, room, index)
        # Warm start: the incumbent's starts of the freed jobs (feasible by construction).
        for key in index:
            m.start[key].value = 0
        before = 0.0
        for j in free_jobs:
            c = incumbent.get(j)
            if c is not None:
                m.start[j, candidates[j].index(c)].value = 1
                before += c.coefficient
        build_s = time.perf_counter() - t0
        stats.build_s += build_s
        stats.variables, stats.constraints, stats.nonzeros = (max(stats.variables, len(index)),
                                                              max(stats.constraints, n_cons), max(stats.nonzeros, nnz))

        opt = Highs()
        opt.config.mip_gap = cfg.mip_rel_gap if len(free_jobs) == len(jobs) else cfg.window_mip_rel_gap
        opt.config.warmstart = True
        opt.config.load_solution = False
        opt.config.stream_solver = False
        opt.highs_options = {"mip_max_nodes": cfg.max_nodes}
        # The model is solved once: no need for Pyomo to re-scan it for changes after set_instance.
        for flag in ("check_for_new_or_removed_constraints", "check_for_new_or_removed_vars",
                     "check_for_new_or_removed_params", "check_for_new_objective", "update_constraints",
                     "update_vars", "update_params", "update_named_expressions", "update_objective"):
            setattr(opt.update_config, flag, False)
        if time_left_s - build_s < MIN_SOLVE_S:
            # Building the model used the budget: HiGHS is not started at all, so a cycle
            # never runs past its budget by more than one model build.
            stats.last_status = "time_limit"
            stats.message = f"time limit used up building the model ({build_s:.2f} s); greedy plan used"
            return None
        t1 = time.perf_counter()
        try:
            opt.set_instance(m)
            t2 = time.perf_counter()
            stats.handoff_s += t2 - t1
            opt.config.time_limit = max(0.05, time_left_s - (t2 - t0))
            result = opt.solve(m)
        except Exception as error:  # noqa: BLE001 - any solver failure keeps the incumbent
            stats.message = f"HiGHS failed: {type(error).__name__}: {error}"
            stats.last_status = "error"
            stats.solve_s += time.perf_counter() - t1
            return None
        stats.solve_s += time.perf_counter() - t2
        stats.subproblems += 1
        status = str(result.termination_condition).rsplit(".", 1)[-1]
        stats.last_status = status
        bound = result.best_objective_bound
        bound = float(bound) if bound is not None and math.isfinite(bound) else None
        if result.best_feasible_objective is None:
            stats.message = "no MILP solution in time; incumbent kept"
            return None
        result.solution_loader.load_vars()
        chosen = {j: c for j, c in incumbent.items() if j not in free_set}
        after = 0.0
        for j, n in index:
            if (m.start[j, n].value or 0) > 0.5:
                chosen[j] = candidates[j][n]
                after += candidates[j][n].coefficient
        if after < before - 1e-9:
            return None
        if bound is not None:
            # The bound is on the freed jobs; the fixed ones add their value to both sides.
            bound += sum(c.coefficient for j, c in chosen.items() if j not in free_set)
        return chosen, status, bound, after - before

    # -- LP bound -------------------------------------------------------------------

    def lp_bound(self, cluster: Cluster, queued: Sequence[Job], running: Sequence[RunningJob], now_s: float,
                 streaming_reserve: Mapping[str, int] | None = None,
                 time_limit_s: float = 600.0) -> tuple[float | None, int]:
        """The LP relaxation of this cycle's whole (undecomposed) model, and its number of variables.

        No plan of this cycle can score above it, so ``(bound - objective) / bound`` is a true
        optimality gap. Built with highspy directly: it is a yardstick, not part of a cycle.
        """
        import highspy
        import numpy as np

        from airflow_gpu_scheduler.core.bound import add_le_row

        if not queued:
            return 0.0, 0
        reserve = room_for_gangs(cluster, queued, streaming_reserve or {})
        cycle = self._prepare(cluster, queued, running, now_s, reserve, {})
        jobs, candidates, capacity = cycle.jobs, cycle.candidates, cycle.capacity
        cost: list[float] = []
        job_rows: list[list[int]] = []
        cap_rows: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
        batch_rows: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
        for j, job in enumerate(jobs):
            cols = []
            for c in candidates[j]:
                col = len(cost)
                cost.append(c.coefficient)
                cols.append(col)
                for i in c.covers:
                    cap_rows[c.gpu_type, i].append((col, job.gpus))
                    if not job.is_streaming:
                        batch_rows[c.gpu_type, i].append((col, job.gpus))
            if cols:
                job_rows.append(cols)
        n = len(cost)
        if n == 0:
            return 0.0, 0
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", time_limit_s)
        h.addVars(n, np.zeros(n), np.ones(n))
        h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(cost))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)

        for cols in job_rows:
            add_le_row(h, [(c, 1.0) for c in cols], 1.0)
        for (name, i), entries in cap_rows.items():
            add_le_row(h, entries, capacity.free[name][i])
        for (name, i), entries in batch_rows.items():
            if capacity.free_batch[name][i] < capacity.free[name][i]:
                add_le_row(h, entries, capacity.free_batch[name][i])
        h.run()
        if h.modelStatusToString(h.getModelStatus()) != "Optimal":
            return None, n
        return float(h.getInfo().objective_function_value), n

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


def _best_fitting(ranked: list[_Candidate], job: Job, free: _Capacity) -> _Candidate | None:
    """The most valuable start of ``job`` that still fits; ``ranked`` is most valuable first."""
    streaming = job.kind.is_streaming
    for c in ranked:
        if free.fits(c.gpu_type, job.gpus, c.covers, streaming):
            return c
    return None


def _gap(objective: float, bound: float | None) -> float | None:
    if bound is None:
        return None
    return max(0.0, (bound - objective) / max(abs(bound), 1e-9))


def _with_wall(report: SolveReport, wall_s: float) -> SolveReport:
    from dataclasses import replace

    return replace(report, wall_s=wall_s)
