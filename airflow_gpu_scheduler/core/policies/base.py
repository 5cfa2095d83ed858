"""The one interface every policy implements, so the simulator and benchmark treat them alike.

A policy sees the cluster as Airflow's metadata would show it (waiting jobs with
estimates but no actual durations, running jobs, recent streaming work) and
answers with :class:`~airflow_gpu_scheduler.core.levers.Levers`: the only things
it may change. It never advances the clock; the simulator owns time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from airflow_gpu_scheduler.core.estimates import EstimateErrors
from airflow_gpu_scheduler.core.levers import Levers
from airflow_gpu_scheduler.core.planner import Plan
from airflow_gpu_scheduler.core.planner.lookahead import RecentDemand
from airflow_gpu_scheduler.core.replan import fastest_fitting_type  # noqa: F401 - policies import it from here
from airflow_gpu_scheduler.core.streaming import DEFAULT_MEMORY_S, StreamingInterval
from airflow_gpu_scheduler.core.workload import Cluster, GpuType, Job, RunningJob, runtime_s


@dataclass(frozen=True)
class Completion:
    """A job that ended: as the policy saw it (its estimate, never its duration), where and when it ran."""

    job: Job
    gpu_type: str
    start_s: float
    end_s: float

    def error_ratio(self, cluster: Cluster) -> float:
        """Actual over estimated runtime."""
        expected = runtime_s(self.job, self.job.planning_estimate_s, cluster.gpu_type(self.gpu_type))
        return (self.end_s - self.start_s) / expected if expected > 0 else 1.0


@dataclass(frozen=True)
class ClusterState:
    """What a policy may look at when it decides."""

    now_s: float
    cluster: Cluster
    waiting: tuple[Job, ...]
    running: tuple[RunningJob, ...]
    streaming_history: tuple[StreamingInterval, ...] = ()
    #: Recent completions, oldest first: how far runtimes strayed from their estimates.
    completed: tuple[Completion, ...] = ()

    def estimate_errors(self) -> EstimateErrors:
        return EstimateErrors((c.job.kind, c.error_ratio(self.cluster)) for c in self.completed)

    def recent_demand(self, memory_s: float = DEFAULT_MEMORY_S) -> RecentDemand:
        """What arrived over the last ``memory_s``, from which the rollout draws work to come: the
        endpoints that started (completed ones with their actual runtime) and the batch jobs
        submitted (completed, running or waiting, as estimated)."""
        since = self.now_s - memory_s
        seen = [
            replace(c.job, estimate_s=c.end_s - c.start_s)
            for c in self.completed
            if c.job.is_streaming and c.start_s >= since and c.end_s > c.start_s
        ]
        seen += [r.job for r in self.running if r.job.is_streaming and r.start_s >= since]
        batch = [
            job
            for job in (*(c.job for c in self.completed), *(r.job for r in self.running), *self.waiting)
            if not job.is_streaming and job.submit_s >= since
        ]
        return RecentDemand(tuple(seen), min(memory_s, max(self.now_s, 3600.0)), tuple(batch))


@dataclass(frozen=True)
class Decision:
    """Levers to apply now, when to be asked again, and the plan behind them (if any)."""

    levers: Levers
    wake_at_s: float | None = None
    plan: Plan | None = None


class Policy(Protocol):
    """A dispatch policy. ``cadence_s`` None: asked at every event; else only on ticks of that period."""

    name: str
    cadence_s: float | None

    def decide(self, state: ClusterState) -> Decision: ...


def expected_runtime(job: Job, gpu_type: GpuType) -> float:
    """Runtime by the estimate: what every policy may assume."""
    return runtime_s(job, job.planning_estimate_s, gpu_type)


def free_gpus(state: ClusterState) -> dict[str, int]:
    free = {t.name: t.count for t in state.cluster.gpu_types}
    for r in state.running:
        free[r.gpu_type] -= r.job.gpus
    return free


def arrival_order(jobs: Sequence[Job]) -> list[Job]:
    return sorted(jobs, key=lambda j: (j.submit_s, j.job_id))


def priority_order(jobs: Sequence[Job]) -> list[Job]:
    return sorted(jobs, key=lambda j: (-j.priority, j.submit_s, j.job_id))
