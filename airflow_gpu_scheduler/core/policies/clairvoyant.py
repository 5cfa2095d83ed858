"""A yardstick, not a competitor: the planner with the future known.

It plans with every job's actual duration as its estimate and with the jobs that will
arrive over the next ``foresight_s`` already in the queue (each no earlier than its
arrival: a release time), with a larger budget than the online planner, and its plan
goes through the same levers and the same Airflow dispatch in the simulator. No
streaming reservation is kept: it knows when endpoints come. It is the best schedule
this machinery finds, so the distance from ``milp`` to it is the room an online policy
has (the LP bound sits far above any schedule, so it cannot say that).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace

from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutConfig
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision
from airflow_gpu_scheduler.core.policies.milp import SIMULATION_CONFIG, MilpPolicy
from airflow_gpu_scheduler.core.workload import Job, RunningJob

#: Twice the online planner's work limit (nodes) and time guards: it is run once per benchmark, offline.
CLAIRVOYANT_CONFIG = replace(
    SIMULATION_CONFIG,
    time_limit_s=2 * SIMULATION_CONFIG.time_limit_s,
    window_time_limit_s=2 * SIMULATION_CONFIG.window_time_limit_s,
    max_nodes=2 * SIMULATION_CONFIG.max_nodes,
)


class ClairvoyantPolicy(MilpPolicy):
    name = "clairvoyant"

    def __init__(
        self, jobs: tuple[Job, ...], foresight_s: float = 6 * 3600.0, config: PlannerConfig = CLAIRVOYANT_CONFIG
    ) -> None:
        # Durations are exact, so the rollout's sampled futures would all be the same one the plan knows.
        super().__init__(config, rollout=RolloutConfig(enabled=False))
        self.foresight_s = foresight_s
        self._truth = {j.job_id: _exact(j) for j in jobs}
        self._by_submit = sorted(self._truth.values(), key=lambda j: (j.submit_s, j.job_id))
        self._submits = [j.submit_s for j in self._by_submit]

    def decide(self, state: ClusterState) -> Decision:
        lo = bisect_right(self._submits, state.now_s)
        hi = bisect_right(self._submits, state.now_s + self.foresight_s)
        coming = tuple(self._by_submit[lo:hi])
        seen = replace(
            state,
            waiting=tuple(self._truth[j.job_id] for j in state.waiting) + coming,
            running=tuple(RunningJob(self._truth[r.job.job_id], r.gpu_type, r.start_s) for r in state.running),
            streaming_history=(),
        )
        return super().decide(seen)


def _exact(job: Job) -> Job:
    return replace(job, estimate_s=job.duration_s)
