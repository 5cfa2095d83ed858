"""The planning run's decision path, kept between its cycles: the core's re-planning rule and the planner."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow_gpu_scheduler.core.levers import Levers
from airflow_gpu_scheduler.core.planner import Plan
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.policies.base import ClusterState
from airflow_gpu_scheduler.core.replan import ReplanDecision, ReplanRule
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.cycle.workload import GpuWorkload


class PlanningLoop:
    """The operator's decision path, kept between cycles of one run: the core's re-planning rule, the
    planner where the rule says solve, and the plan's levers, which are applied either way.

    It also remembers the decisions of the newest stored plan, so a cycle that changes none of
    them stores nothing (see :func:`~airflow_gpu_scheduler.cycle.records.decisions_changed`).

    :param planner: the planner (the MILP and the rollout over candidate plans).
    :param early_s: a job ending this much before its expected end is a surprise (the full-cycle interval).
    :param replan_interval_s: solve again at least this often while the work keeps changing.
    """

    def __init__(self, planner: RolloutPlanner, early_s: float = 10.0, replan_interval_s: float = 60.0) -> None:
        self.planner = planner
        # At most one solve per cycle interval, as the simulator's policy (asked at every event) does.
        self.rule = ReplanRule(early_s=early_s, min_interval_s=replan_interval_s, release_next=True, min_gap_s=early_s)
        self.solves = 0
        self.wake_at_s: float | None = None
        #: id and ``{job_id: row}`` of the newest stored plan: rows read back (dicts) or written (JobRow)
        self.stored: tuple[int | None, Mapping[str, Mapping[str, Any]]] | None = None
        #: the plan (solve) the newest stored plan records, once this run stored or confirmed it
        self.stored_for: Plan | None = None

    def step(
        self, cluster: Cluster, workload: GpuWorkload, now_s: float, previous: Callable[[], Mapping[str, float]] = dict
    ) -> tuple[Plan, Levers, ReplanDecision]:
        """Decide (solve or keep applying), solve if so, and return the plan, its levers and the decision.

        ``previous``: the promises of the newest stored plan, read only when this run has no plan yet.
        """
        decision = self.rule.decide(cluster, workload.queued, workload.running, now_s)
        if decision.solve:
            promises = self.rule.previous_starts() or previous()
            # What finished teaches the rollout the estimate errors and the endpoints to expect.
            seen = ClusterState(
                now_s, cluster, tuple(workload.queued), tuple(workload.running), completed=tuple(workload.completed)
            )
            plan = self.planner.plan(
                cluster,
                workload.queued,
                workload.running,
                now_s,
                workload.reserve,
                previous=promises,
                errors=seen.estimate_errors(),
                in_force=self.rule.plan,
                demand=seen.recent_demand(),
            )
            self.rule.solved(plan, workload.queued, workload.running, now_s)
            self.solves += 1
        assert self.rule.plan is not None
        levers = self.rule.levers(cluster, workload.queued, workload.running, now_s)
        self.wake_at_s = self.rule.wake_at_s(workload.queued, workload.running, now_s)
        return self.rule.plan, levers, decision

    def due(self, now_s: float) -> bool:
        """Has a job of the current plan reached its planned start (or a solve become allowed)?"""
        return self.wake_at_s is not None and now_s >= self.wake_at_s
