"""The MILP of one (sub-)problem in Pyomo, and one HiGHS solve of it.

Variables: a binary start per candidate. Constraints: ``one_start_per_job``;
``capacity[k, p]``: the gangs of every job running at point *p* fit the GPUs of type *k*
left by already-running (and fixed) jobs; ``batch_capacity[k, p]``: batch work leaves
the streaming reservation free (or, when it is soft, pays for the reserved GPUs it uses:
a variable ``intrude[k, p]`` priced in the objective). Its rows are read straight into HiGHS
(:mod:`.highs`), which solves it warm-started from the incumbent, under the time left, a node
limit and a gap target.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from airflow_gpu_scheduler.core.planner.candidates import Candidate
from airflow_gpu_scheduler.core.planner.grid import Capacity
from airflow_gpu_scheduler.core.planner.highs import to_highs, use_threads
from airflow_gpu_scheduler.core.planner.plan import PlannerConfig
from airflow_gpu_scheduler.core.workload import Job

#: HiGHS is only started if at least this much of the cycle's budget is left after building the model.
MIN_SOLVE_S = 0.05


class ModelSize(TypedDict):
    """The size fields of a :class:`~airflow_gpu_scheduler.core.planner.plan.SolveReport`."""

    variables: int
    constraints: int
    nonzeros: int


@dataclass
class SolveStats:
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

    def size(self) -> ModelSize:
        return {"variables": self.variables, "constraints": self.constraints, "nonzeros": self.nonzeros}


def build_model(
    jobs: Sequence[Job], candidates: Mapping[int, list[Candidate]], room: Capacity, index: list[tuple[int, int]]
):
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
    cap_keys = [key for key in sorted(covering) if sum(gpus[j] for j, _ in covering[key]) > room.free[key[0]][key[1]]]
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
    value = linear(index, [candidates[j][n].coefficient for j, n in index])
    if room.penalty is None:
        m.BATCH_POINTS = pyo.Set(initialize=sorted(covering), dimen=2, ordered=True)
        m.batch_capacity = pyo.Constraint(m.BATCH_POINTS, rule=batch_capacity_rule)
    else:
        # A soft reservation: batch work may exceed what it leaves free by ``intrude[k, i]``
        # reserved GPUs (at most those the reservation holds there), each at its penalty.
        penalty = room.penalty
        soft_keys = [
            key
            for key in sorted(covering)
            if batch_capacity_rule(m, *key) is not pyo.Constraint.Skip and penalty[key[0]][key[1]] > 0
        ]
        m.BATCH_POINTS = pyo.Set(initialize=soft_keys, dimen=2, ordered=True)

        def reserved(m, gpu_type, i):
            return (0, max(0, room.free[gpu_type][i] - room.free_batch[gpu_type][i]))

        m.intrude = pyo.Var(m.BATCH_POINTS, domain=pyo.NonNegativeReals, bounds=reserved)

        def soft_rule(m, gpu_type, i):
            terms = [(j, n) for j, n in covering[gpu_type, i] if not streaming[j]]
            row = LinearExpression(
                constant=0,
                linear_coefs=[gpus[j] for j, _ in terms] + [-1.0],
                linear_vars=[start[k] for k in terms] + [m.intrude[gpu_type, i]],
            )
            return row <= room.free_batch[gpu_type][i]

        m.batch_capacity = pyo.Constraint(m.BATCH_POINTS, rule=soft_rule)
        value = LinearExpression(
            constant=0,
            linear_coefs=[candidates[j][n].coefficient for j, n in index] + [-penalty[k][i] for k, i in soft_keys],
            linear_vars=[start[k] for k in index] + [m.intrude[k] for k in soft_keys],
        )
    m.value = pyo.Objective(expr=value, sense=pyo.maximize)
    return m, nnz, len(m.JOBS) + len(m.capacity) + len(m.batch_capacity)


def solve_subproblem(
    cfg: PlannerConfig,
    jobs: Sequence[Job],
    candidates: Mapping[int, list[Candidate]],
    capacity: Capacity,
    incumbent: Mapping[int, Candidate],
    free_jobs: Sequence[int],
    stretch: range,
    time_left_s: float,
    stats: SolveStats,
) -> tuple[dict[int, Candidate], str, float | None, float] | None:
    """Re-plan ``free_jobs`` (starts within ``stretch``) with every other job fixed; None if nothing better."""
    t0 = time.perf_counter()
    free_set = set(free_jobs)
    room = capacity.copy()
    for j, c in incumbent.items():
        if j not in free_set:
            room.take(c.gpu_type, jobs[j].gpus, c.covers, jobs[j].is_streaming)
    # Only starts that fit around the fixed jobs, and the incumbent's own (it always fits).
    index = [
        (j, n)
        for j in free_jobs
        for n, c in enumerate(candidates[j])
        if c is incumbent.get(j)
        or (c.point in stretch and room.fits(c.gpu_type, jobs[j].gpus, c.covers, jobs[j].is_streaming, soft=True))
    ]
    if not index:
        return None
    m, nnz, n_cons = build_model(jobs, candidates, room, index)
    # Warm start: the incumbent's starts of the freed jobs (feasible by construction).
    for key in index:
        m.start[key].value = 0
    warm_plan = {j: incumbent[j] for j in free_jobs if j in incumbent}
    for j, warm in warm_plan.items():
        m.start[j, candidates[j].index(warm)].value = 1
    if room.penalty is not None:
        used = room.intrusion(jobs, warm_plan)
        for k, i in m.BATCH_POINTS:
            m.intrude[k, i].value = used[k][i]
    before = plan_value(room, jobs, warm_plan)
    build_s = time.perf_counter() - t0
    stats.build_s += build_s
    stats.variables, stats.constraints, stats.nonzeros = (
        max(stats.variables, len(index)),
        max(stats.constraints, n_cons),
        max(stats.nonzeros, nnz),
    )

    if time_left_s - build_s < MIN_SOLVE_S:
        # Building the model used the budget: HiGHS is not started at all, so a cycle
        # never runs past its budget by more than one model build.
        stats.last_status = "time_limit"
        stats.message = f"time limit used up building the model ({build_s:.2f} s); greedy plan used"
        return None
    t1 = time.perf_counter()
    try:
        use_threads(cfg.threads)
        solver = to_highs(m)
        t2 = time.perf_counter()
        stats.handoff_s += t2 - t1
        left_s = time_left_s - (t2 - t0)
        if left_s < MIN_SOLVE_S:
            # Handing the model to HiGHS used the rest of the budget (a loaded machine
            # stretches it): starting HiGHS now would only run past the cycle's deadline.
            stats.last_status = "time_limit"
            stats.message = f"time limit used up building the model ({t2 - t0:.2f} s); greedy plan used"
            return None
        gap = cfg.mip_rel_gap if len(free_jobs) == len(jobs) else cfg.window_mip_rel_gap
        result = solver.run(left_s, gap, {"mip_max_nodes": cfg.max_nodes, "threads": cfg.threads})
    except Exception as error:  # noqa: BLE001 - any solver failure keeps the incumbent
        stats.message = f"HiGHS failed: {type(error).__name__}: {error}"
        stats.last_status = "error"
        stats.solve_s += time.perf_counter() - t1
        return None
    stats.solve_s += time.perf_counter() - t2
    stats.subproblems += 1
    stats.last_status = result.status
    bound = result.bound
    if result.objective is None:
        stats.message = "no MILP solution in time; incumbent kept"
        return None
    chosen = {j: c for j, c in incumbent.items() if j not in free_set}
    freed = {j: candidates[j][n] for j, n in index if (m.start[j, n].value or 0) > 0.5}
    after = plan_value(room, jobs, freed)
    if after < before - 1e-9:
        return None
    chosen.update(freed)
    if bound is not None:
        # The bound is on the freed jobs; the fixed ones add their value to both sides.
        bound += sum(c.coefficient for j, c in chosen.items() if j not in free_set)
    return chosen, result.status, bound, after - before


def plan_value(room: Capacity, jobs: Sequence[Job], chosen: Mapping[int, Candidate]) -> float:
    """The MILP's objective for ``chosen`` placed into ``room``: its starts' values, less what
    using a soft streaming reservation costs."""
    return sum(c.coefficient for c in chosen.values()) - room.intrusion_cost(jobs, chosen)
