"""Priority order with EASY backfill, as Slurm's sched/backfill does.

Jobs are taken by priority (then arrival). The first one that cannot start gets a
reservation at its earliest start by the estimates of running jobs; a later job
may start now only if it does not delay that reservation: it ends (by estimate)
before the reservation, or runs on another GPU type, or fits in the GPUs the
reservation leaves over.
"""

from __future__ import annotations

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, Assignment, Levers, default_levers, plan_weight, pool_name
from airflow_gpu_scheduler.core.policies.base import (
    ClusterState,
    Decision,
    expected_runtime,
    fastest_fitting_type,
    free_gpus,
    priority_order,
)
from airflow_gpu_scheduler.core.workload import Job, allowed_types, expected_end_s


class EasyBackfillPolicy:
    name = "backfill"
    cadence_s: float | None = None

    def decide(self, state: ClusterState) -> Decision:
        cluster, now = state.cluster, state.now_s
        free = free_gpus(state)
        # Expected releases per type: (time, gpus), from running jobs and from jobs started here.
        releases: dict[str, list[tuple[float, int]]] = {t.name: [] for t in cluster.gpu_types}
        for r in state.running:
            releases[r.gpu_type].append((expected_end_s(r, cluster.gpu_type(r.gpu_type), now, floor_s=0.0), r.job.gpus))

        assignments: dict[str, Assignment] = {}
        reservation: tuple[str, float, int] | None = None  # (gpu type, shadow time, spare GPUs then)
        rank = 0
        for job in priority_order(state.waiting):
            if reservation is None:
                fitting = fastest_fitting_type(job, cluster, free)
                gpu_type = None if fitting is None else fitting.name
            else:
                gpu_type = self._backfill_type(job, state, free, reservation)
            if gpu_type is not None:
                free[gpu_type] -= job.gpus
                end = now + expected_runtime(job, cluster.gpu_type(gpu_type))
                releases[gpu_type].append((end, job.gpus))
                if reservation is not None and reservation[0] == gpu_type and end > reservation[1]:
                    reservation = (reservation[0], reservation[1], reservation[2] - job.gpus)
                assignments[job.job_id] = Assignment(pool_name(gpu_type), plan_weight(rank))
                rank += 1
                continue
            assignments[job.job_id] = Assignment(INTAKE_POOL, 0)
            if reservation is None:
                reservation = self._reserve(job, state, free, releases)
        return Decision(Levers(default_levers(cluster), assignments))

    @staticmethod
    def _reserve(
        job: Job, state: ClusterState, free: dict[str, int], releases: dict[str, list[tuple[float, int]]]
    ) -> tuple[str, float, int] | None:
        """Earliest (by expected completion) start of ``job`` on any allowed type."""
        best = None
        for gpu_type in allowed_types(job, state.cluster):
            available = free[gpu_type.name]
            shadow = state.now_s
            for end, gpus in sorted(releases[gpu_type.name]):
                if available >= job.gpus:
                    break
                available += gpus
                shadow = end
            if available < job.gpus:
                continue
            finish = shadow + expected_runtime(job, gpu_type)
            if best is None or finish < best[0]:
                best = (finish, gpu_type.name, shadow, available - job.gpus)
        return None if best is None else best[1:]

    @staticmethod
    def _backfill_type(
        job: Job, state: ClusterState, free: dict[str, int], reservation: tuple[str, float, int]
    ) -> str | None:
        reserved_type, shadow, spare = reservation
        options = sorted(allowed_types(job, state.cluster), key=lambda t: -t.speed)
        for gpu_type in options:
            if free[gpu_type.name] < job.gpus:
                continue
            if gpu_type.name != reserved_type:
                return gpu_type.name
            ends_in_time = state.now_s + expected_runtime(job, gpu_type) <= shadow
            if ends_in_time or job.gpus <= spare:
                return gpu_type.name
        return None
