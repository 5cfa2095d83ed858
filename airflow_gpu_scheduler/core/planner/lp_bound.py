"""The LP relaxation of one cycle's whole model: a yardstick for the plan, never part of a cycle.

No plan of the cycle can score above it, so ``(bound - objective) / bound`` is a true
optimality gap. Built with highspy directly (no Pyomo), so a model of hundreds of
thousands of columns is built in seconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from airflow_gpu_scheduler.core.planner.candidates import Candidate
from airflow_gpu_scheduler.core.planner.grid import Capacity
from airflow_gpu_scheduler.core.workload import Job


def lp_relaxation(
    jobs: Sequence[Job], candidates: Mapping[int, list[Candidate]], capacity: Capacity, time_limit_s: float = 600.0
) -> tuple[float | None, int]:
    """The LP optimum (None if HiGHS proves none in time) and the number of columns."""
    import highspy
    import numpy as np

    from airflow_gpu_scheduler.core.bound import add_le_row

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
    # A soft reservation has no batch rows here: dropping its penalty only raises the bound.
    for (name, i), entries in batch_rows.items() if capacity.penalty is None else ():
        if capacity.free_batch[name][i] < capacity.free[name][i]:
            add_le_row(h, entries, capacity.free_batch[name][i])
    h.run()
    if h.modelStatusToString(h.getModelStatus()) != "Optimal":
        return None, n
    return float(h.getInfo().objective_function_value), n
