"""What a plan is expected to gain over Airflow's own dispatch of the same queue.

Both are simulated from the current state (queued and running jobs, estimates taken
as durations, no future arrivals) over the next ``window_s`` (an hour by default):
once following the plan through its levers, once with Airflow's default pools and
weights. A window that covers the whole queue would hide the difference (everything
finishes either way); what matters is what gets done first. The numbers are
predictions on estimates, for reviewing a plan, not measurements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from airflow_gpu_scheduler.core.levers import levers_for_plan, pool_name
from airflow_gpu_scheduler.core.metrics import evaluate
from airflow_gpu_scheduler.core.planner import Plan
from airflow_gpu_scheduler.core.policies.airflow_default import AirflowDefaultPolicy
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision
from airflow_gpu_scheduler.core.simulate import simulate
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob

DEFAULT_WINDOW_S = 3600.0


class FollowPlanPolicy:
    """Applies one fixed plan (shifted to start at time 0), never replanning."""

    name = "plan"
    cadence_s: float | None = None

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def decide(self, state: ClusterState) -> Decision:
        levers = levers_for_plan(self.plan, state.cluster, state.waiting, state.running, state.now_s)
        upcoming = [s.start_s for s in self.plan.starts if s.start_s > state.now_s]
        return Decision(levers, wake_at_s=min(upcoming, default=None))


def predict_plan_vs_airflow(
    cluster: Cluster,
    queued: Sequence[Job],
    running: Sequence[RunningJob],
    now_s: float,
    plan: Plan,
    window_s: float = DEFAULT_WINDOW_S,
) -> dict[str, object]:
    """``{"window_s", "plan": {...}, "airflow": {...}}`` with utilization and weighted output of each."""
    window = window_s

    def shifted(job: Job) -> Job:
        # Estimates stand in for durations; the queue is all there at time 0.
        return replace(
            job,
            submit_s=0.0,
            duration_s=job.planning_estimate_s,
            deadline_s=None if job.deadline_s is None else max(job.deadline_s - now_s, 1e-3),
        )

    jobs = [shifted(j) for j in queued]
    started = [replace(r, job=shifted(r.job), start_s=r.start_s - now_s) for r in running]
    shifted_plan = replace(
        plan, now_s=0.0, starts=tuple(replace(s, start_s=s.start_s - now_s, end_s=s.end_s - now_s) for s in plan.starts)
    )
    # Airflow alone has one pool per GPU type: what runs now, real-time inference included,
    # holds slots of that pool (the plan's side keeps them in the streaming pools they are in).
    alone = {r.job.job_id: pool_name(r.gpu_type) for r in running}
    out: dict[str, object] = {"window_s": window}
    for name, policy, pools in (
        ("plan", FollowPlanPolicy(shifted_plan), None),
        ("airflow", AirflowDefaultPolicy(), alone),
    ):
        metrics = evaluate(simulate(cluster, jobs, policy, window, running_at_start=started, running_pools=pools))
        out[name] = {
            "utilization": metrics.utilization,
            "weighted_output": metrics.weighted_output,
            "max_wait_s": metrics.max_wait_s,
            "deadline_hit_rate": metrics.deadline_hit_rate,
        }
    return out
