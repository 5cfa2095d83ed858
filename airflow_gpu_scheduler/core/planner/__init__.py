"""The constraint-aware planner: a time-indexed MILP in Pyomo, solved with HiGHS, and a rollout over candidate plans.

One planning cycle, module by module:

1. :mod:`.grid`: where starts may happen (fine near now, coarser further out, plus the
   expected ends of running jobs) and what is free there.
2. :mod:`.candidates` and :mod:`.objective`: every start a queued job could take, and what
   it is worth (priority-weighted output, earlier completion, two promises).
3. :mod:`.greedy`: list scheduling in priority order, always feasible: the warm start and
   the fallback.
4. :mod:`.model` and :mod:`.windows`: the MILP (``start[j, k, p]`` binaries, capacity per GPU
   type and point, the streaming reservation), solved whole or window by window within the
   cycle's budget; never worse than greedy. :mod:`.highs` hands each model to HiGHS.
5. :mod:`.rollout`: the plans of several base heuristics (the MILP's, EASY backfill's, the
   greedy one, the plan in force) are each followed forward through Airflow's dispatch on
   sampled durations (:mod:`.lookahead`), and the one with the best expected weighted
   goodput is applied, so the cycle is as good as the best of them up to the simulation's
   fidelity.
6. :mod:`.lp_bound`: the LP relaxation, a yardstick for the gap.

Only estimates are used, never actual durations.
"""

from airflow_gpu_scheduler.core.planner.grid import room_for_gangs, start_grid
from airflow_gpu_scheduler.core.planner.milp import CyclePlans, MilpPlanner
from airflow_gpu_scheduler.core.planner.model import MIN_SOLVE_S
from airflow_gpu_scheduler.core.planner.objective import commitment, job_value
from airflow_gpu_scheduler.core.planner.plan import Plan, PlannedStart, PlannerConfig, SolveReport

__all__ = [
    "MIN_SOLVE_S",
    "CyclePlans",
    "MilpPlanner",
    "Plan",
    "PlannedStart",
    "PlannerConfig",
    "SolveReport",
    "commitment",
    "job_value",
    "room_for_gangs",
    "start_grid",
]
