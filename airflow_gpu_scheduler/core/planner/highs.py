"""Load a Pyomo model into HiGHS, run it, and read the result back.

Pyomo's persistent ``appsi_highs`` interface walks every row's expression tree twice to hand
it over (once for its variables, once for its coefficients), and on the benchmark's queues that
hand-off took nearly as long as HiGHS took to solve (docs/benchmark.md). The planner's rows are already
flat lists of coefficients and variables (``LinearExpression``), so this module reads them as they
are and passes them to highspy with the same calls, in the same order, as ``appsi_highs`` does
(columns, integrality, rows, objective, MIP start): HiGHS is given the same problem and returns
the same plan, sooner. Pyomo's standard-form compiler would do the reading too, but it needs
SciPy, whose import (seconds) would fall inside the budget of every cycle run in a fresh process.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: HiGHS's model status -> the name the cycle's report gives it (``appsi``'s termination conditions).
_STATUS = {
    "kOptimal": "optimal",
    "kTimeLimit": "maxTimeLimit",
    "kIterationLimit": "maxIterations",
    "kSolutionLimit": "maxIterations",
    "kObjectiveBound": "objectiveLimit",
    "kObjectiveTarget": "objectiveLimit",
    "kInfeasible": "infeasible",
    "kUnboundedOrInfeasible": "infeasibleOrUnbounded",
    "kUnbounded": "unbounded",
    "kLoadError": "error",
    "kModelError": "error",
    "kPresolveError": "error",
    "kSolveError": "error",
    "kPostsolveError": "error",
}
#: Stopped by a limit: a solution found before it is still a solution.
_LIMITS = {"maxTimeLimit", "maxIterations", "objectiveLimit"}


@dataclass
class HighsResult:
    """What one HiGHS run gave: ``status`` as the report names it, the best solution's objective
    (None without one), the best bound (None if unknown)."""

    status: str
    objective: float | None
    bound: float | None


class HighsModel:
    """A Pyomo model loaded into HiGHS (:func:`to_highs`), ready to :meth:`run`; ``columns``: its
    variables, in HiGHS's column order."""

    def __init__(self, highs: Any, columns: list) -> None:
        self.highs = highs
        self.columns = columns

    def run(self, time_limit_s: float, mip_rel_gap: float, options: Mapping[str, Any]) -> HighsResult:
        """Solve from the columns' current values (a MIP start if any is set; unset ones count as 0), within
        ``time_limit_s``; on a solution, its values are loaded into the Pyomo variables."""
        import highspy
        import numpy as np

        h = self.highs
        h.setOptionValue("time_limit", float(time_limit_s))
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
        for key, option in options.items():
            if h.setOptionValue(key, option) == highspy.HighsStatus.kError:
                raise ValueError(f"HiGHS refused option {key}={option!r}")
        values = [v.value for v in self.columns]
        if any(x is not None for x in values):
            start = highspy.HighsSolution()
            start.col_value = np.array([0.0 if x is None else float(x) for x in values], dtype=np.double)
            start.value_valid = True
            start.dual_valid = False
            h.setSolution(start)
        if h.run() == highspy.HighsStatus.kError and h.getModelStatus() == highspy.HighsModelStatus.kNotset:
            # Refused before solving (a scheduler sized to another thread count), not a model
            # without a solution: say so, not "no solution in time".
            raise RuntimeError(f"HiGHS refused to run with options {dict(options)!r}")
        status = _STATUS.get(h.getModelStatus().name, "unknown")
        solution = h.getSolution()
        feasible = status == "optimal" or (status in _LIMITS and solution.value_valid)
        info = h.getInfo()
        objective = info.objective_function_value if feasible else None
        # No branch-and-bound (an LP, or solved in presolve): the solution's value is the bound.
        bound = objective if info.mip_node_count == -1 else info.mip_dual_bound
        bound = float(bound) if bound is not None and math.isfinite(bound) else None
        if feasible:
            for v, x in zip(self.columns, solution.col_value, strict=True):
                v.set_value(x, skip_validation=True)
        return HighsResult(status, objective, bound)


@functools.cache
def _banner_printed() -> None:
    """HiGHS prints a banner to the process's stdout when its first instance is made, before any
    option can turn its output off: make that instance here, with stdout captured."""
    import highspy
    from pyomo.common.tee import capture_output

    with capture_output(capture_fd=True):
        highspy.Highs()


def use_threads(threads: int) -> None:
    """Size this process's HiGHS scheduler to ``threads``, unless it already is.

    HiGHS keeps one scheduler per process, sized by the first run's ``threads`` option; later
    instances left at the default reuse it, and one asking for another count fails (``kError``),
    which the planner would only see as a cycle without a MILP plan. So the planner sizes it here
    before each run (a one-column LP, nothing beside a solve: no cache that other code resizing
    the scheduler could make stale), and resizes it if something else sized it otherwise. Its MIP
    search gains little from extra threads, which mostly spin and take CPU from the work beside
    it (a benchmark worker, the other tasks of an Airflow worker), and its search can depend on
    the thread count: with one thread, the same cycle gives the same plan on any machine
    (docs/benchmark.md). One thread also survives a fork; more do not (a forked child inherits a
    scheduler whose threads are gone, and its solves spin). Resizing waits for HiGHS's threads to
    stop; no other thread of this process may be solving then (the planner runs HiGHS from one).
    """
    import highspy
    import numpy as np

    if threads < 1:
        raise ValueError(f"HiGHS threads must be >= 1, got {threads!r}")

    def run() -> Any:
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", threads)
        h.addVars(1, np.zeros(1), np.ones(1))
        return h.run()

    _banner_printed()
    if run() == highspy.HighsStatus.kOk:
        return
    try:
        highspy.Highs.resetGlobalScheduler(True)
    except RuntimeError as error:
        # A process forked from one whose HiGHS ran threads inherits a scheduler without them.
        raise RuntimeError(
            f"HiGHS's scheduler in this process runs another thread count than {threads} and cannot be"
            f" resized ({error}); was the process forked from one that had run HiGHS?"
        ) from error
    if run() != highspy.HighsStatus.kOk:
        raise RuntimeError(f"HiGHS could not size its scheduler to {threads} thread(s) in this process")


def to_highs(model: Any) -> HighsModel:
    """Load ``model`` (linear, one objective) into a fresh HiGHS instance.

    Columns are the variables in the order they first appear in the rows (then the objective), rows
    the constraints in declaration order: the order ``appsi_highs`` gives them, so that HiGHS,
    whose search depends on that order, finds the same plan.
    """
    import highspy
    import numpy as np
    from pyomo.core.base.constraint import Constraint
    from pyomo.core.base.objective import Objective, maximize

    column: dict[int, int] = {}
    columns: list = []
    row_lower: list[float] = []
    row_upper: list[float] = []
    starts: list[int] = []
    index: list[int] = []
    value: list[float] = []
    for con in model.component_data_objects(Constraint, active=True, descend_into=True):
        constant, terms = _linear(con.body, column, columns)
        starts.append(len(index))
        for i, coef in terms:
            index.append(i)
            value.append(coef)
        row_lower.append(con.lower - constant if con.has_lb() else -highspy.kHighsInf)
        row_upper.append(con.upper - constant if con.has_ub() else highspy.kHighsInf)
    objectives = list(model.component_data_objects(Objective, active=True, descend_into=True))
    if len(objectives) != 1:
        raise ValueError(f"to_highs: the model needs exactly one active objective, not {len(objectives)}")
    offset, terms = _linear(objectives[0].expr, column, columns)
    n = len(columns)
    costs = np.zeros(n, dtype=np.double)
    for i, coef in terms:
        costs[i] += coef
    lower = np.empty(n, dtype=np.double)
    upper = np.empty(n, dtype=np.double)
    for i, v in enumerate(columns):
        lb, ub = v.bounds
        lower[i] = -highspy.kHighsInf if lb is None else lb
        upper[i] = highspy.kHighsInf if ub is None else ub

    _banner_printed()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.addVars(n, lower, upper)
    integer = np.array([i for i, v in enumerate(columns) if v.is_integer()], dtype=np.int32)
    if len(integer):
        h.changeColsIntegrality(len(integer), integer, np.array([highspy.HighsVarType.kInteger] * len(integer)))
    h.addRows(
        len(row_lower),
        np.array(row_lower, dtype=np.double),
        np.array(row_upper, dtype=np.double),
        len(value),
        np.array(starts, dtype=np.int32),
        np.array(index, dtype=np.int32),
        np.array(value, dtype=np.double),
    )
    h.changeObjectiveOffset(float(offset))
    sense = highspy.ObjSense.kMaximize if objectives[0].sense == maximize else highspy.ObjSense.kMinimize
    h.changeObjectiveSense(sense)
    h.changeColsCost(n, np.arange(n, dtype=np.int32), costs)
    return HighsModel(h, columns)


def _linear(expr: Any, column: dict[int, int], columns: list) -> tuple[float, list[tuple[int, float]]]:
    """(constant, [(column, coefficient), ...]) of a linear expression; a variable seen for the
    first time becomes the next column.

    The planner's rows are ``LinearExpression`` sums of ``coefficient * variable`` terms, read
    as they are; anything else goes through Pyomo's general ``generate_standard_repn``.
    """
    from pyomo.core.base.var import VarData
    from pyomo.core.expr.numeric_expr import LinearExpression, MonomialTermExpression
    from pyomo.core.expr.numvalue import native_numeric_types
    from pyomo.repn import generate_standard_repn

    if type(expr) is LinearExpression:
        constant = 0.0
        terms = []
        for arg in expr.args:
            if type(arg) is MonomialTermExpression:
                coef, var = arg.args
                if type(coef) in native_numeric_types:
                    terms.append((_column(var, column, columns), float(coef)))
                    continue
            elif isinstance(arg, VarData):
                terms.append((_column(arg, column, columns), 1.0))
                continue
            elif type(arg) in native_numeric_types:
                constant += arg
                continue
            break  # a term of another shape: read the whole expression the general way
        else:
            return constant, terms
    repn = generate_standard_repn(expr, quadratic=False, compute_values=True)
    if repn.nonlinear_expr is not None:
        raise ValueError(f"to_highs: {expr} is not linear")
    return float(repn.constant), [
        (_column(v, column, columns), float(c)) for c, v in zip(repn.linear_coefs, repn.linear_vars, strict=True)
    ]


def _column(var: Any, column: dict[int, int], columns: list) -> int:
    key = id(var)
    at = column.get(key)
    if at is None:
        at = column[key] = len(columns)
        columns.append(var)
    return at
