"""Ours: replan with the MILP on events, and act only through Airflow's levers.

The policy runs on the scheduling operator's cadence (every minute). Between
solves it keeps applying the last plan: jobs become due at their planned start and
are released into their GPU type's pool, weighted in plan order; the rest stay held.
It re-solves when jobs arrived or finished since the last plan and either

- a streaming job has no place in the plan (it cannot wait for the next round), or
- GPUs turned idle that the plan did not expect to be (a job ended well before its
  estimate, or new work arrived that fits now) and a waiting job could use them,

or else once ``min_interval_s`` has passed since the last solve. Idle GPUs the plan
expected (draining for a gang) do not trigger a solve: the plan already decided them.
"""

from __future__ import annotations

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, gpu_type_of_pool, levers_for_plan
from airflow_gpu_scheduler.core.planner import MilpPlanner, Plan, PlannerConfig
from airflow_gpu_scheduler.core.policies.base import (
    ClusterState,
    Decision,
    fastest_fitting_type,
    free_gpus,
)
from airflow_gpu_scheduler.core.streaming import streaming_reserve
from airflow_gpu_scheduler.core.workload import expected_end_s


class MilpPolicy:
    name = "milp"

    def __init__(self, config: PlannerConfig | None = None, cadence_s: float = 60.0,
                 min_interval_s: float = 300.0, release_ahead_s: float = 0.0) -> None:
        self.planner = MilpPlanner(config)
        self.cadence_s = cadence_s
        self.min_interval_s = min_interval_s
        self.release_ahead_s = release_ahead_s
        self._plan: Plan | None = None
        self._planned_for: frozenset[str] = frozenset()
        self._last_solve_s = float("-inf")
        self._expected_end: dict[str, float] = {}

    def decide(self, state: ClusterState) -> Decision:
        seen = frozenset(j.job_id for j in state.waiting) | frozenset(r.job.job_id for r in state.running)
        changed = seen != self._planned_for
        new_plan = None
        surprise = self._surprised(state)
        if self._plan is None or (changed and self._must_replan(state, surprise)):
            reserve = streaming_reserve(state.cluster, state.streaming_history, state.now_s)
            previous = {s.job_id: s.start_s for s in self._plan.starts} if self._plan else None
            new_plan = self.planner.plan(state.cluster, state.waiting, state.running, state.now_s, reserve, previous)
            self._plan, self._planned_for, self._last_solve_s = new_plan, seen, state.now_s
            changed = False
        plan = self._plan
        levers = levers_for_plan(plan, state.cluster, state.waiting, state.running, state.now_s,
                                 release_ahead_s=self.release_ahead_s)
        waiting_ids = {j.job_id for j in state.waiting}
        upcoming = [s.start_s for s in plan.starts if s.start_s > state.now_s and s.job_id in waiting_ids]
        wake = min(upcoming, default=None)
        if changed:
            retry = self._last_solve_s + self.min_interval_s
            wake = retry if wake is None else min(wake, retry)
        return Decision(levers, wake_at_s=wake, plan=new_plan)

    def _surprised(self, state: ClusterState) -> bool:
        """Did GPUs free up earlier than planned, or did new work arrive, since the last call?"""
        running = {r.job.job_id: r for r in state.running}
        early = any(job_id not in running and end - state.now_s > (self.cadence_s or 0.0)
                    for job_id, end in self._expected_end.items())
        known = set(self._plan.by_job()) | set(self._plan.unplanned) if self._plan else set()
        arrived = any(j.job_id not in known for j in state.waiting)
        self._expected_end = {
            job_id: expected_end_s(r, state.cluster.gpu_type(r.gpu_type), state.now_s)
            for job_id, r in running.items()
        }
        return early or arrived

    def _must_replan(self, state: ClusterState, surprise: bool) -> bool:
        if state.now_s - self._last_solve_s >= self.min_interval_s:
            return True
        assert self._plan is not None
        planned = self._plan.by_job()
        if any(j.is_streaming and j.job_id not in planned for j in state.waiting):
            return True
        if not surprise:
            return False
        levers = levers_for_plan(self._plan, state.cluster, state.waiting, state.running, state.now_s)
        free = free_gpus(state)
        held = []
        for job in state.waiting:
            pool = levers.assignments[job.job_id].pool
            gpu_type = gpu_type_of_pool(pool)
            if pool == INTAKE_POOL or gpu_type is None:
                held.append(job)
            else:
                free[gpu_type] -= job.gpus
        return any(fastest_fitting_type(job, state.cluster, free) is not None for job in held)
