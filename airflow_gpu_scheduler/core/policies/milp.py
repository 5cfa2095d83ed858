"""Ours: replan with the MILP on events, and act only through Airflow's levers.

The policy runs on the scheduling operator's cadence (every minute). It re-solves
when jobs arrived or finished since the last plan, but no more often than
``min_interval_s`` (a streaming arrival replans at once: it cannot wait). Between
solves it keeps applying the last plan: jobs become due at their planned start and
are released into their GPU type's pool, weighted in plan order; the rest stay held.
"""

from __future__ import annotations

from airflow_gpu_scheduler.core.levers import levers_for_plan
from airflow_gpu_scheduler.core.planner import MilpPlanner, Plan, PlannerConfig
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision
from airflow_gpu_scheduler.core.streaming import streaming_reserve


class MilpPolicy:
    name = "milp"

    def __init__(self, config: PlannerConfig | None = None, cadence_s: float = 60.0,
                 min_interval_s: float = 60.0) -> None:
        self.planner = MilpPlanner(config)
        self.cadence_s = cadence_s
        self.min_interval_s = min_interval_s
        self._plan: Plan | None = None
        self._planned_for: frozenset[str] = frozenset()
        self._last_solve_s = float("-inf")

    def decide(self, state: ClusterState) -> Decision:
        seen = frozenset(j.job_id for j in state.waiting) | frozenset(r.job.job_id for r in state.running)
        changed = seen != self._planned_for
        planned = self._plan.by_job() if self._plan else {}
        urgent = any(j.is_streaming and j.job_id not in planned for j in state.waiting)
        due_to_replan = state.now_s - self._last_solve_s >= self.min_interval_s
        new_plan = None
        if self._plan is None or (changed and (due_to_replan or urgent)):
            reserve = streaming_reserve(state.cluster, state.streaming_history, state.now_s)
            new_plan = self.planner.plan(state.cluster, state.waiting, state.running, state.now_s, reserve)
            self._plan, self._planned_for, self._last_solve_s = new_plan, seen, state.now_s
        plan = self._plan
        levers = levers_for_plan(plan, state.cluster, state.waiting, state.running, state.now_s)
        waiting_ids = {j.job_id for j in state.waiting}
        upcoming = [s.start_s for s in plan.starts if s.start_s > state.now_s and s.job_id in waiting_ids]
        wake = min(upcoming, default=None)
        if changed and new_plan is None:
            retry = self._last_solve_s + self.min_interval_s
            wake = retry if wake is None else min(wake, retry)
        return Decision(levers, wake_at_s=wake, plan=new_plan)
