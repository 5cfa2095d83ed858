"""An upper bound on weighted output that no policy can beat.

The offline problem knows every arrival and every *actual* duration in advance.
We relax it into a time-indexed LP over slots of length ``slot_s``, built so that
every feasible schedule (continuous start times, non-preemptive gangs) maps to a
feasible LP point of equal value:

- ``x[j, k, s]`` in [0, 1]: job *j* starts on type *k* during slot *s*
  (start S in [s*slot, (s+1)*slot)); slots start at the job's release slot.
- A batch job earns priority x GPUs x duration if it ends by the horizon (and its
  deadline): only slots where the *earliest* start in the slot ends in time are
  allowed. A streaming job earns priority x GPUs x min(duration, horizon - submit)
  (an over-estimate of its served time) in slots that can start within its budget.
- Capacity, per type and window of one or two slots: the GPU-seconds a job surely
  spends in the window, whatever its start inside slot *s*, must fit the window's
  GPU-seconds. The true occupancy is never smaller, so this is a relaxation.
- Volume, per type: all GPU-seconds of jobs that end inside the window fit the window.

The LP is solved with HiGHS. On small instances with integer data the exact
optimum is computable by the same model as a MILP at a fine slot; see
``tests/unit/core/test_bound.py`` for how far the bound sits above it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_gpu_scheduler.core.workload import Cluster, Job, allowed_types, runtime_s

#: Capacity is checked over windows of one and of two slots: two-slot windows hold every
#: job shorter than a slot whole, whatever its start, which one-slot windows cannot see.
WINDOWS = (1, 2)


def add_le_row(h, entries: list[tuple[int, float]], upper: float) -> None:
    """Add the row ``sum(value * x[column] for column, value in entries) <= upper`` to a highspy model."""
    import highspy
    import numpy as np

    idx = np.array([c for c, _ in entries], dtype=np.int32)
    val = np.array([v for _, v in entries], dtype=np.float64)
    h.addRow(-highspy.kHighsInf, upper, len(idx), idx, val)


def _overlap(start: float, length: float, lo: float, hi: float) -> float:
    return max(0.0, min(start + length, hi) - max(start, lo))


@dataclass(frozen=True)
class BoundResult:
    value: float
    slot_s: float
    variables: int
    status: str
    integral: bool


def upper_bound(
    cluster: Cluster,
    jobs: Sequence[Job],
    horizon_s: float,
    slot_s: float | None = None,
    integral: bool = False,
    time_limit_s: float = 120.0,
) -> BoundResult:
    """LP bound (or, with ``integral=True`` on tiny instances, the MILP of the same relaxation)."""
    import highspy
    import numpy as np

    slot = slot_s or max(300.0, horizon_s / 144)
    n_slots = int(math.ceil(horizon_s / slot))
    col_cost: list[float] = []
    rows: dict[tuple[str, int, int], list[tuple[int, float]]] = defaultdict(list)
    volume: dict[str, list[tuple[int, float]]] = defaultdict(list)
    job_rows: list[list[int]] = []
    for job in jobs:
        if job.submit_s >= horizon_s or job.duration_s is None:
            continue
        cols: list[int] = []
        for gpu_type in allowed_types(job, cluster):
            if job.gpus > gpu_type.count:
                continue
            run = runtime_s(job, job.duration_s, gpu_type)
            first = int(job.submit_s // slot)
            for s in range(first, n_slots):
                earliest = max(s * slot, job.submit_s)
                if job.is_streaming:
                    if earliest > job.submit_s + (job.max_wait_s or 0.0) + 1e-9:
                        break
                    value = job.priority * job.gpus * min(job.duration_s, horizon_s - job.submit_s)
                    held = min(run, horizon_s - earliest)
                else:
                    end = earliest + run
                    limit = horizon_s if job.deadline_s is None else min(horizon_s, job.deadline_s)
                    if end > limit + 1e-9:
                        break
                    value = job.priority * job.gpus * job.duration_s
                    held = run
                col = len(col_cost)
                col_cost.append(value)
                cols.append(col)
                # Occupancy of a window is concave in the start time, so its minimum over
                # starts inside slot s is at one end of the slot: that much is certain.
                first_start, last_start = earliest, (s + 1) * slot
                for width in WINDOWS:
                    t = s - width + 1
                    while t * slot < last_start + held and t < n_slots:
                        if t >= 0:
                            lo, hi = t * slot, min((t + width) * slot, horizon_s)
                            sure = min(_overlap(first_start, held, lo, hi), _overlap(last_start, held, lo, hi))
                            if sure > 0:
                                rows[gpu_type.name, t, width].append((col, job.gpus * sure))
                        t += 1
                volume[gpu_type.name].append((col, job.gpus * min(held, horizon_s - earliest)))
        if cols:
            job_rows.append(cols)

    if not col_cost:
        return BoundResult(0.0, slot, 0, "empty", integral)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", time_limit_s)
    n = len(col_cost)
    h.addVars(n, np.zeros(n), np.ones(n))
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(col_cost))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)

    for cols in job_rows:
        add_le_row(h, [(c, 1.0) for c in cols], 1.0)
    for (name, t, width), entries in rows.items():
        window_end = min((t + width) * slot, horizon_s)
        add_le_row(h, entries, cluster.gpu_type(name).count * (window_end - t * slot))
    for name, entries in volume.items():
        add_le_row(h, entries, cluster.gpu_type(name).count * horizon_s)
    if integral:
        h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.array([highspy.HighsVarType.kInteger] * n))
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    value = info.mip_dual_bound if integral and status != "Optimal" else info.objective_function_value
    if not integral and status != "Optimal":
        raise RuntimeError(f"upper bound LP did not solve to optimality: {status}")
    return BoundResult(float(value), slot, n, status, integral)
