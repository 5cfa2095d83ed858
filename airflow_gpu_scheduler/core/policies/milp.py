"""Ours: replan with the MILP on events, and act only through Airflow's levers.

The policy runs on the scheduling operator's cadence (every minute). Whether it solves
or keeps applying its plan is :class:`~airflow_gpu_scheduler.core.replan.ReplanRule`'s
call, the same rule the operator follows: between solves jobs become due at their
planned start and are released into their GPU type's pool, weighted in plan order; the
rest stay held.
"""

from __future__ import annotations

from airflow_gpu_scheduler.core.planner import MilpPlanner, PlannerConfig
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision
from airflow_gpu_scheduler.core.replan import ReplanRule
from airflow_gpu_scheduler.core.streaming import streaming_reserve


class MilpPolicy:
    name = "milp"

    def __init__(self, config: PlannerConfig | None = None, cadence_s: float = 60.0,
                 min_interval_s: float = 300.0, release_ahead_s: float = 0.0, release_next: bool = False) -> None:
        self.planner = MilpPlanner(config)
        self.cadence_s = cadence_s
        self.rule = ReplanRule(early_s=cadence_s, min_interval_s=min_interval_s, release_ahead_s=release_ahead_s,
                               release_next=release_next)

    def decide(self, state: ClusterState) -> Decision:
        new_plan = None
        if self.rule.decide(state.cluster, state.waiting, state.running, state.now_s).solve:
            reserve = streaming_reserve(state.cluster, state.streaming_history, state.now_s)
            previous = self.rule.previous_starts()
            new_plan = self.planner.plan(state.cluster, state.waiting, state.running, state.now_s, reserve, previous)
            self.rule.solved(new_plan, state.waiting, state.running, state.now_s)
        levers = self.rule.levers(state.cluster, state.waiting, state.running, state.now_s)
        return Decision(levers, wake_at_s=self.rule.wake_at_s(state.waiting, state.running, state.now_s),
                        plan=new_plan)
