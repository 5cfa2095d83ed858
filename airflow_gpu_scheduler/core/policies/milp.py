"""Ours: replan with the MILP and the rollout on events, and act only through Airflow's levers.

The policy is asked at every event (a job arrives or ends), as the operator watches
between its cycles. Whether it solves or keeps applying its plan is
:class:`~airflow_gpu_scheduler.core.replan.ReplanRule`'s call, the same rule the operator
follows: between solves jobs become due at their planned start, the next job of each GPU
type in plan order is released as soon as GPUs free up for it, an endpoint the plan has not
placed goes first at once; it solves at most once per ``solve_every_s`` (the operator's
cycle). Each solve is a rollout over candidate plans
(:mod:`~airflow_gpu_scheduler.core.planner.rollout`).
"""

from __future__ import annotations

from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutConfig, RolloutPlanner
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision
from airflow_gpu_scheduler.core.replan import ReplanRule
from airflow_gpu_scheduler.core.streaming import streaming_reserve

#: The planner's budget in simulation: work limits (branch-and-bound nodes, window passes) decide
#: when a cycle stops, and the time limits are only a far guard, so a benchmark gives the same
#: schedule on a busy machine as on an idle one (a cycle that ends by its work limits on an idle
#: machine makes the same plan under the operator's default two-second budget).
SIMULATION_CONFIG = PlannerConfig(time_limit_s=20.0, window_time_limit_s=10.0)


class MilpPolicy:
    name = "milp"
    #: Asked at every event: applying the plan in force must not wait for the next solve.
    cadence_s: float | None = None

    def __init__(
        self,
        config: PlannerConfig | None = None,
        solve_every_s: float = 60.0,
        min_interval_s: float = 300.0,
        release_ahead_s: float = 0.0,
        release_next: bool = True,
        rollout: RolloutConfig | None = None,
    ) -> None:
        self.planner = RolloutPlanner(config or SIMULATION_CONFIG, rollout)
        self.rule = ReplanRule(
            early_s=solve_every_s,
            min_interval_s=min_interval_s,
            release_ahead_s=release_ahead_s,
            release_next=release_next,
            min_gap_s=solve_every_s,
        )

    def decide(self, state: ClusterState) -> Decision:
        new_plan = None
        if self.rule.decide(state.cluster, state.waiting, state.running, state.now_s).solve:
            reserve = streaming_reserve(state.cluster, state.streaming_history, state.now_s)
            new_plan = self.planner.plan(
                state.cluster,
                state.waiting,
                state.running,
                state.now_s,
                reserve,
                self.rule.previous_starts(),
                errors=state.estimate_errors(),
                in_force=self.rule.plan,
                demand=state.recent_demand(),
            )
            self.rule.solved(new_plan, state.waiting, state.running, state.now_s)
        levers = self.rule.levers(state.cluster, state.waiting, state.running, state.now_s)
        return Decision(levers, wake_at_s=self.rule.wake_at_s(state.waiting, state.running, state.now_s), plan=new_plan)
